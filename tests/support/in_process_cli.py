"""``ctxcomp ARGS`` through the console script's own ``main`` in this process: the exit code, stdout and stderr a
user would see, without the seconds a fresh interpreter spends importing the project.  Tests whose subject is the
process itself (a signal, a kill, what a fresh interpreter prints at import) start a real one instead."""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import NamedTuple


class CliOutput(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def run_main(args: Sequence[str], stdin: str | None = None, env: Mapping[str, str | None] | None = None,
             cwd: str | os.PathLike | None = None) -> CliOutput:
    """(exit code, stdout, stderr) of ``ctxcomp ARGS``; ``env`` changes the environment for the call (None removes a
    variable).  An exception that escapes is printed as the interpreter would print it, with exit code 1; a warning
    logged goes to stderr as a process without logging handlers prints it (``logging.lastResort``), which pytest's
    own handlers would otherwise take."""
    from click.testing import CliRunner

    from experiments.cli.app import main

    place = contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext()
    with place, CliRunner().isolation(input=stdin, env=dict(env or {})) as (out, err, _):
        argv, sys.argv = sys.argv, ["ctxcomp", *map(str, args)]
        warnings = logging.StreamHandler(sys.stderr)
        warnings.setLevel(logging.WARNING)
        logging.getLogger().addHandler(warnings)
        try:
            main()
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        except BaseException:  # noqa: BLE001 - exactly what a user would see: a traceback
            sys.stderr.write(traceback.format_exc())
            code = 1
        finally:
            logging.getLogger().removeHandler(warnings)
            sys.argv = argv
            sys.stdout.flush()
            sys.stderr.flush()
        return CliOutput(code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace"))
