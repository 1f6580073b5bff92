"""``ctxcomp data list`` and ``ctxcomp data get NAME...``: the public data files, fetched by name and checked."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from core.errors import UserError
from experiments.cli.errors import one_line, plain_output, print_table, user_errors
from experiments.data.catalog import DataFile, MissingDataError, catalog, data_dir, entry

data_app = typer.Typer(help="The public data files the shipped configs read: list them, fetch them by name (checked "
                            "against a recorded sha256) into the data directory ($CTXCOMP_DATA_DIR, default "
                            "<cache root>/data).", no_args_is_help=True)

_DIR_HELP = "Data directory to use instead of $CTXCOMP_DATA_DIR (default <cache root>/data)."


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.0f} kB"


def _root(dir_: Optional[Path]) -> Path:
    """The data directory to use: ``--dir`` or the default; a file there is refused, not listed as empty."""
    root = dir_ or data_dir()
    if root.exists() and not root.is_dir():
        raise UserError(f"{'--dir ' if dir_ else 'the data directory '}{root} is a file, not a folder")
    return root


def _chosen(names: list[str]) -> list[DataFile]:
    """The entries ``names`` name: exact names, or a group prefix (``leval``, ``lost_in_the_middle``) for all of it."""
    files = catalog()
    chosen: dict[str, DataFile] = {}
    for name in names:
        group = [f for key, f in files.items() if key.startswith(name.rstrip("/") + "/")]
        for item in group if name not in files and group else [entry(name)]:
            chosen.setdefault(item.name, item)
    return list(chosen.values())


@data_app.command("list")
@user_errors
def list_data(
    dir_: Optional[Path] = typer.Option(None, "--dir", help=_DIR_HELP),
    plain: bool = typer.Option(False, "--plain", help="Plain Markdown tables (the default when stdout is not a terminal)."),
) -> None:
    """Every data file ctxcomp can fetch: its name (what a config's `data:` takes), size, licence and whether it is here."""
    root = _root(dir_)
    rows = []
    for item in catalog().values():
        path = item.path(root)
        here = "yes" if path.is_file() and item.size in (None, path.stat().st_size) else \
            "wrong size" if path.is_file() else "no"
        rows.append([item.name, _size(item.size), here, "sha256" if item.verified else "not yet", item.licence,
                     item.about])
    print_table(["name", "size", "here", "checked", "licence", "what"], rows, plain=plain_output(plain),
                title=f"data directory: {root}")


@data_app.command("get")
@user_errors
def get(
    names: List[str] = typer.Argument(..., help="Data names from `ctxcomp data list` (or a group: leval, lost_in_the_middle)."),
    dir_: Optional[Path] = typer.Option(None, "--dir", help=_DIR_HELP),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a download progress bar."),
) -> None:
    """Download data files from where they are published and check each against its recorded sha256.

    A file already in the data directory that checks out is kept; a download that does not is deleted."""
    from experiments.data.fetch import FetchError, fetch

    root = _root(dir_)
    failed = 0
    for item in _chosen(names):
        try:
            done = fetch(item, root, progress=progress)
        except (FetchError, MissingDataError) as err:
            typer.echo(f"error: {one_line(err)}", err=True)
            failed += 1
            continue
        checked = "sha256 checked" if item.verified else f"NOT checked: no sha256 recorded yet; its sha256 is {done.sha256}"
        how = f"already here, {checked}" if done.status == "present" else f"downloaded, {checked}, from {done.url}"
        typer.echo(f"{item.name}: {done.path} ({_size(done.path.stat().st_size)}; {how}); licence: {item.licence}")
    if dir_ is not None and dir_.resolve() != data_dir().resolve():
        typer.echo(f"note: runs read data names from {data_dir()}; set CTXCOMP_DATA_DIR={dir_} to use these files")
    if failed:
        raise typer.Exit(2)


__all__ = ["data_app"]
