"""How long ``ctxcomp run CONFIG --dry-run`` takes on every shipped config, each in a fresh process (not a test).

The dry run is meant to take seconds (docs/scale.md, "Sizing a grid before paying for it"): it loads no
model.  Data this machine lacks is stood in for (``testkit.stand_in_data``: LongBench, LongBench v2 and ∞Bench
files in their formats, the 20-document Lost in the Middle file built from nq-open-oracle) with the overrides
that make the configs run offline; the named L-Eval and Lost in the Middle files come from
``$CTXCOMP_DATA_DIR`` (or ../shared/data).  Each config runs ``--rounds`` times; the minimum and median wall
time, CPU time (user + system, both cores of a fast tokenizer counted) and the load average are printed,
since a machine shared with other work stretches wall time.  The first dry run that counts SmolLM2 tokens reads its
tokenizer from the packaged GGUF once (about 15 s); a warm-up run does that before timing, and compiles
the project's modules once, as any install's first start does (``PYTHONDONTWRITEBYTECODE`` is unset for the runs).

Run: ``python benchmarks/bench_dry_run.py [--rounds 2] [CONFIG_STEM ...]``.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testkit.stand_in_data import OFFLINE_OVERRIDES, write_stand_in_data, write_twenty_docs  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", help="config stems (default: every shipped config)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    shared = Path(os.environ.get("CTXCOMP_DATA_DIR") or REPO.parent / "shared" / "data")
    stems = args.configs or sorted(p.stem for p in (REPO / "experiments" / "configs").glob("*.yaml"))
    env = {**os.environ, "CTXCOMP_DATA_DIR": str(shared), "CTXCOMP_NO_PROGRESS": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    # a cold start is a fresh process of an installed project, whose modules Python has compiled once; a shell
    # with PYTHONDONTWRITEBYTECODE set would recompile ctxcomp's modules at every start (0.3-0.4 s)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_stand_in_data(work)
        write_twenty_docs(work, shared / "lost_in_the_middle" / "nq-open-oracle.jsonl.gz")
        dry(work, env, "quickstart")  # warm-up: the SmolLM2 tokenizer, once
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print("| config | wall min / median (s) | CPU min / median (s) | exit | load average (1 min) |")
        print("| --- | --- | --- | --- | --- |")
        for stem in stems:
            runs = [dry(work, env, stem) for _ in range(args.rounds)]
            walls, cpus = [r[0] for r in runs], [r[1] for r in runs]
            code = max(r[2] for r in runs)
            print(f"| {stem} | {min(walls):.1f} / {statistics.median(walls):.1f} | {min(cpus):.1f} / "
                  f"{statistics.median(cpus):.1f} | {code} | {os.getloadavg()[0]:.2f} |", flush=True)


def dry(work: Path, env: dict, stem: str) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit code) of one dry run of a shipped config, from ``work``."""
    sets = [f"--set={key}={'null' if value is None else value}" for key, value in OFFLINE_OVERRIDES.get(stem, {}).items()]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "experiments.cli", "run", str(REPO / "experiments/configs" / f"{stem}.yaml"),
                           "--dry-run", "--out", str(work / "runs" / stem), *sets], cwd=work, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode or "Traceback" in done.stderr:
        print(f"  {stem}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


if __name__ == "__main__":
    main()
