"""How the CLI reports trouble: a user's mistake is one line on stderr and exit 2; a bug keeps its traceback."""
from __future__ import annotations

import functools
import sys
from typing import Callable, TypeVar

import typer

from core.errors import UserError

F = TypeVar("F", bound=Callable)

# A UserError says what in the config, data file or command line is wrong.  A path the user named that
# does not exist or cannot be read is the same kind of mistake.  Everything else is a bug.
USER_ERRORS: tuple[type[BaseException], ...] = (
    UserError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError,
)


def user_errors(func: F) -> F:
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except USER_ERRORS as err:
            msg = err.args[0] if isinstance(err, KeyError) and err.args else err
            typer.echo(f"error: {msg}", err=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def parse_overrides(items: list[str]) -> dict:
    """``--set a.b=3`` pairs; values are parsed as YAML so numbers, lists and booleans work."""
    import yaml

    out = {}
    for item in items:
        if "=" not in item:
            raise UserError(f"--set expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise UserError(f"--set {key.strip()}: the value is not valid YAML ({err})") from None
    return out


def parse_ints(text: str, option: str) -> list[int]:
    """``"1,2,5"`` -> ``[1, 2, 5]``; a clear error naming the option otherwise."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UserError(f"{option} expects comma-separated integers, got {text!r}") from None
    if not values:
        raise UserError(f"{option} is empty")
    return values


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

    table = Table(title=title)
    for col in header:
        table.add_column(col, overflow="fold")
    for row in body:
        table.add_row(*row)
    Console().print(table)
