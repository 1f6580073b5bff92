"""``ctxcomp view``: write RUN_DIR/view.html (view-against-OTHER.html beside it when compared with run OTHER), one
self-contained page to explore a run, and open it if asked."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import typer

from experiments.cli.errors import user_errors
from experiments.data.records import Example


@user_errors
def view(
    run_dir: Path = typer.Argument(..., help="A run directory written by `ctxcomp run`."),
    against: Optional[Path] = typer.Option(None, "--against", help="A second run: its cells are compared and its "
                                                                   "arms appear beside the same example."),
    open_: bool = typer.Option(False, "--open", help="Open the page in the default browser."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the page here instead of RUN_DIR/view.html "
                                                                 "(RUN_DIR/view-against-OTHER.html with --against)."),
) -> None:
    """Write RUN_DIR/view.html: scores with paired intervals, plots, failures, the example browser and every arm of
    one example side by side (kept text highlighted). No server, no network: it opens from the file. With
    --against OTHER the page goes beside it, RUN_DIR/view-against-OTHER.html, and view.html is left as it is."""
    from experiments.view.page import write_view

    path = write_view(run_dir, against=against, out=out, contexts=load_contexts)
    size = path.stat().st_size
    typer.echo(f"wrote {path} ({size / 1e6:.1f} MB)")
    if open_:
        import webbrowser

        webbrowser.open(path.resolve().as_uri())


def load_contexts(run_dir: Path, tasks: Sequence[str]) -> tuple[dict[str, dict[str, Example]], dict[str, str]]:
    """The examples of each task of the run (by task key, then id) reloaded from its config (files or the
    project's generators; no model runs), and a note for each task left without them.  Open-domain tasks are
    left out: their passages come from a corpus-wide retrieval."""
    from experiments.data.store import CONFIG

    notes: dict[str, str] = {}
    out: dict[str, dict[str, Example]] = {}
    if not (run_dir / CONFIG).is_file():
        return {}, {t: f"no {CONFIG} in the run directory: the original contexts cannot be reloaded" for t in tasks}
    from core.errors import UserError
    from experiments.run.config import load_config
    from experiments.run.examples import load_task_examples

    try:
        config = load_config(run_dir / CONFIG)
    except (UserError, OSError, ValueError) as err:
        return {}, {t: f"{CONFIG} could not be read ({err})" for t in tasks}
    by_key = {t.key: t for t in config.tasks}
    for key in tasks:
        task = by_key.get(key)
        if task is None:
            notes[key] = f"task {key!r} is not in {CONFIG}"
        elif task.open_domain is not None:
            notes[key] = "open-domain: the passages come from a corpus-wide retrieval; the prompt shows the kept ones"
        else:
            try:
                out[key] = {ex.id: ex for ex in load_task_examples(task)}
            except (UserError, OSError, ValueError) as err:
                notes[key] = f"the examples could not be reloaded ({err})"
    return out, notes
