"""How the CLI reports trouble (a user's mistake is one line on stderr and exit 2; a bug keeps its traceback) and
prints its tables."""
from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import signal
import sqlite3
import sys
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Callable, TypeVar

import typer

from core.errors import PluginError, UnknownComponentError, UserError
from core.files import disk_error
from core.paths import cache_root

F = TypeVar("F", bound=Callable)

# A UserError says what in the config, data file or command line is wrong.  A path the user named that
# does not exist or cannot be read is the same kind of mistake.  Everything else is a bug.
USER_ERRORS: tuple[type[BaseException], ...] = (
    UserError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError,
)

DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})

_debug = False


def set_debug(on: bool) -> None:
    """``ctxcomp --debug``: a user's mistake is still one line, printed after its traceback."""
    global _debug
    _debug = on


def debugging() -> bool:
    """``--debug`` was given, or ``CTXCOMP_DEBUG`` is set (for a run started from a script)."""
    return _debug or bool(os.environ.get("CTXCOMP_DEBUG"))


def user_errors(func: F) -> F:
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except USER_ERRORS as err:
            msg = err.args[0] if isinstance(err, KeyError) and err.args else err
            hint = ""
            if debugging():
                traceback.print_exception(err, file=sys.stderr)
            elif isinstance(err, PluginError) and err.__cause__ is not None:
                hint = " (`ctxcomp --debug ...` prints the plugin's traceback)"
            typer.echo(f"error: {one_line(str(msg))}{hint}", err=True)
            raise typer.Exit(2) from None
        except OSError as err:  # a write deep inside a library (a plot, a model file) on a full or read-only disk
            if err.errno not in DISK_ERRNOS:
                raise
            typer.echo(f"error: {disk_error(err.filename or 'a file', err)}", err=True)
            raise typer.Exit(2) from None
        except sqlite3.OperationalError as err:  # the diskcache stores (embeddings, generations) are SQLite
            if not any(words in str(err) for words in ("disk is full", "readonly database", "disk I/O error")):
                raise
            typer.echo(f"error: the cache under {cache_root()} cannot be written ({err}); free some space or set "
                       "CTXCOMP_CACHE_DIR to a writable folder, then run the same command again", err=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


@contextlib.contextmanager
def config_location(path: Path | None) -> Iterator[None]:
    """A component that a config file names and that cannot be found: the error also says the file and line that
    name it (the first line holding a name the message quotes), so a typo is found without a search."""
    try:
        yield
    except UnknownComponentError as err:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines() if path is not None else []
        except (OSError, UnicodeDecodeError):
            lines = []
        names = re.findall(r"'([^'\s]+)'", str(err))
        where = next((f"{path}:{i}" for name in names for i, line in enumerate(lines, 1) if name in line), None)
        if where is None:
            raise
        raise UnknownComponentError(f"{where}: {err}") from None


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a scheduler's stop, ``kill``) ends the block as Ctrl-C does: records flushed, lock released."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"stopped by signal {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_for_failures(failed: int, succeeded: int, *, strict: bool, what: str) -> None:
    """Exit 1 when everything failed, or with ``--strict`` when anything failed, so CI sees it; else return."""
    if failed and not succeeded:
        typer.echo(f"error: every {what} failed ({failed}); nothing was scored", err=True)
        raise typer.Exit(1)
    if failed and strict:
        typer.echo(f"error: {failed} {what}(s) failed and --strict was given", err=True)
        raise typer.Exit(1)


def parse_overrides(items: list[str]) -> dict:
    """``--set a.b=3`` pairs; values are parsed as YAML so numbers, lists and booleans work."""
    import yaml

    out = {}
    for item in items:
        if "=" not in item:
            raise UserError(f"--set expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        if not key.strip():
            raise UserError(f"--set expects KEY=VALUE with a key (e.g. tasks.0.limit=5), got {item!r}")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise UserError(f"--set {key.strip()}: the value {value!r} is not valid YAML ({one_line(err)})") from None
    return out


def one_line(message: str | BaseException) -> str:
    """A message spread over lines (a config with two bad keys, YAML's caret drawing) as one line:
    ``invalid config F:\n  a: x\n  b: y`` -> ``invalid config F: a: x; b: y``."""
    head, *rest = [" ".join(part.split()) for part in str(message).splitlines() if part.strip()] or [""]
    if not rest:
        return head
    return f"{head} {'; '.join(rest)}" if head.endswith(":") else "; ".join([head, *rest])


def plain_output(plain: bool) -> bool:
    """Markdown tables instead of rich ones: asked for, or stdout is not a terminal (a pipe, a file, CI)."""
    return plain or not sys.stdout.isatty()


def print_table(header: list[str], body: list[list[str]], *, plain: bool, title: str | None = None) -> None:
    """A table on stdout: plain Markdown when ``plain``, else a rich table that folds long cells instead of cutting them."""
    if plain:
        from experiments.report.tables import markdown_table

        if title:
            typer.echo(f"{title}\n")
        typer.echo(markdown_table(header, body))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title)
    for col in header:
        table.add_column(Text(col), overflow="fold")
    for row in body:
        table.add_row(*map(Text, row))  # text as it is: a `[...]` in a label or a cell is not rich markup
    Console().print(table)


def print_scores(data, *, plain: bool = True) -> None:
    """Print the score table of a reported run (``RunData``; Markdown pastes into a paper draft or an issue as is)."""
    from experiments.report.estimand import estimand_text, estimands
    from experiments.report.tables import score_table

    run_dir = data.run_dir
    print_table(*score_table(data.cells, data.items()), plain=plain)
    said = estimand_text(estimands(data.manifest, data.predictions))
    if said and any(not c.is_full for c in data.cells):
        typer.echo(f"{said[0].upper()}{said[1:]} (docs/metrics.md, 'Which mean').")
    print_warnings(data)
    plots = sorted((Path(run_dir) / "plots").glob("*")) if (Path(run_dir) / "plots").is_dir() else []
    typer.echo(f"report: {Path(run_dir) / 'report.md'}" + (f"; {len(plots)} plot file(s) in {Path(run_dir) / 'plots'}"
                                                           if plots else ""))


def print_warnings(data) -> None:
    """What a reader of the scores must know first, on stderr: one line per (reader, task) whose window cut `full`."""
    from experiments.report.truncation import truncation_warnings

    for line in truncation_warnings(data.predictions):
        typer.echo(f"warning: {line}", err=True)
