"""``ctxcomp view``: write RUN_DIR/view.html, one self-contained page to explore a run, and open it if asked."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from experiments.cli.errors import user_errors


@user_errors
def view(
    run_dir: Path = typer.Argument(..., help="A run directory written by `ctxcomp run`."),
    against: Optional[Path] = typer.Option(None, "--against", help="A second run: its cells are compared and its "
                                                                   "arms appear beside the same example."),
    open_: bool = typer.Option(False, "--open", help="Open the page in the default browser."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the page here instead of RUN_DIR/view.html."),
) -> None:
    """Write RUN_DIR/view.html: scores with paired intervals, plots, failures, the example browser and every arm of
    one example side by side (kept text highlighted). No server, no network: it opens from the file."""
    from experiments.report.view import write_view

    path = write_view(run_dir, against=against, out=out)
    size = path.stat().st_size
    typer.echo(f"wrote {path} ({size / 1e6:.1f} MB)")
    if open_:
        import webbrowser

        webbrowser.open(path.resolve().as_uri())
