"""The ``ctxcomp`` command line: one typer app; each command parses, calls a library function and prints."""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any, Optional

import typer
from typer.core import TyperGroup

from core.errors import UserError
from experiments.cli.curve import curve
from experiments.cli.data import data_app
from experiments.cli.design import plan
from experiments.cli.errors import one_line, set_debug, user_errors
from experiments.cli.listing import cache_app, list_components
from experiments.cli.quickstart import quickstart
from experiments.cli.retrieve import chunk, retrieve
from experiments.cli.run import RunCommand, compare, report, rescore, run, show
from experiments.cli.scoring import judge, score
from experiments.cli.view import view

app = typer.Typer(
    name="ctxcomp",
    help="Retrieval- and summary-based context compression for long-context LLM evaluation.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        try:
            typer.echo(f"ctxcomp {version('ctxcomp')}")
        except PackageNotFoundError:
            typer.echo("ctxcomp (not installed as a package)")
        raise typer.Exit()


@app.callback()
def root(
    show_version: Optional[bool] = typer.Option(None, "--version", callback=_version, is_eager=True,
                                                help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Print the traceback of an error too (a plugin's, a "
                                                      "config's); also CTXCOMP_DEBUG=1."),
) -> None:
    """Retrieval- and summary-based context compression for long-context LLM evaluation."""
    set_debug(debug)


app.command("quickstart")(quickstart)
app.command("run", cls=RunCommand)(run)
app.command("report")(report)
app.command("rescore")(rescore)
app.command("compare")(compare)
app.command("show")(show)
app.command("view")(view)
app.command("score")(score)
app.command("chunk")(chunk)
app.command("retrieve")(retrieve)
app.command("curve")(curve)
app.command("judge")(judge)
app.command("plan")(plan)
app.command("list")(list_components)



class BenchmarkCommands(TyperGroup):
    """``ctxcomp build``: the commands the registered benchmarks offer (``Benchmark.commands``), looked up when the
    group is listed or one of them runs, so a plugin benchmark adds its own and other commands import none."""

    def _commands(self) -> dict[str, Any]:
        from experiments.tasks.benchmark import build_commands

        offered = typer.Typer()
        try:
            commands = build_commands()
        except UserError as err:  # two benchmarks offering one name, a plugin's command that cannot be imported
            typer.echo(f"error: {one_line(str(err))}", err=True)
            raise typer.Exit(2) from None
        for name, command in commands.items():
            offered.command(name)(user_errors(command))
        return dict(typer.main.get_group(offered).commands)

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return sorted(self._commands())

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:
        return self._commands().get(cmd_name)


build_app = typer.Typer(cls=BenchmarkCommands, no_args_is_help=True,
                        help="Build a benchmark's data in its published format (each benchmark offers its own).")
app.add_typer(build_app, name="build")
app.add_typer(data_app, name="data")
app.add_typer(cache_app, name="cache")


def main() -> None:
    """The console script: a usage mistake (a missing argument, an unknown option) is one line and exit 2."""
    usage_error = typer.BadParameter.__mro__[1]  # click's UsageError, which typer vendors under a private name
    try:
        result = app(prog_name="ctxcomp", standalone_mode=False)  # `python -m experiments.cli` is ctxcomp too
    except typer.Abort:
        typer.echo("aborted", err=True)
        raise SystemExit(130) from None
    except usage_error as err:
        command = err.ctx.command_path if err.ctx is not None else "ctxcomp"
        if not err.format_message().strip() and err.ctx is not None:  # no arguments at all: the help is the answer
            typer.echo(err.ctx.get_help())
            raise SystemExit(2) from None
        typer.echo(f"error: {' '.join(err.format_message().split())} (see `{command} --help`)", err=True)
        raise SystemExit(2) from None
    except typer.Exit as done:
        raise SystemExit(done.exit_code) from None
    if isinstance(result, int):  # a command (or --help, no_args_is_help) that ended with an exit code
        raise SystemExit(result)


if __name__ == "__main__":
    main()
