"""The exact test's speed: today's code beside main's at bd70c94 (and, with ``--merge-base``, beside 0362aec's,
where issue 50 began) in one run, on a grid of 0/1 cells at one n: a report's work (each cell's interval, its
verdict at the margin and the p-values both print) and ``plan``'s (the n for 80% power at a true difference
of 0).

The old modules are read with ``git show <commit>:<path>`` into temporary modules, so all run on the same
machine under the same load; the ratio is what to read (the machine here has 2 cores shared by many jobs).
Today's code runs twice: cold (a new disk cache under a temporary ``$CTXCOMP_CACHE_DIR``, nothing in memory:
a report's first run) and warm (the memory caches emptied, the disk cache kept: the next process's run).

Run: ``python benchmarks/bench_exact.py [--cells 6] [--n 1000] [--merge-base] [--now-only]``.  The targets: 60 cells
at n = 1,000 in <= 60 s on 2 cores, ``plan`` over them in <= 2 min; each time is projected to 60 cells and
compared with its target.
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MAIN = "bd70c94"  # main when issue 50's speed item was taken up
MERGE_BASE = "0362aec"  # where issue 50 began
TARGETS = {"report": 60.0, "plan": 120.0}  # seconds for 60 cells


def _old(commit: str) -> tuple[object, object]:
    """(exact, power) as ``commit`` had them, as modules of their own (power reading that commit's exact)."""
    folder = Path(tempfile.mkdtemp())
    modules = []
    for path, name, replace in (("experiments/inference/exact.py", f"exact_{commit}", None),
                                ("experiments/inference/power.py", f"power_{commit}",
                                 ("from experiments.inference import betting, exact",
                                  f"from experiments.inference import betting\nimport exact_{commit} as exact"))):
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{path}"], check=True, capture_output=True,
                              text=True).stdout
        if replace:
            text = text.replace(*replace)
        (folder / f"{name}.py").write_text(text, encoding="utf-8")
        spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        modules.append(module)
    return modules[0], modules[1]


def _cells(count: int, n: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(0)
    out = []
    for _ in range(count):
        disc = rng.uniform(0.04, 0.3)
        loss = int(rng.binomial(n, disc / 2))
        out.append((loss, int(rng.binomial(n, disc / 2))))
    return out


def report_work(exact, cells, n: int, margin: float = 5.0, alpha: float = 0.025, anchored: bool = True) -> None:
    shift = -margin / 100
    for loss, gain in cells:
        if anchored:
            exact.exact_bounds(loss, gain, n, alpha, (0.0,))
            exact.exact_bounds(loss, gain, n, alpha, (shift, 0.0))
        else:  # 0362aec: one search for the scores table, the same cached for the verdict
            exact.exact_bounds(loss, gain, n, alpha)
        for delta in (0.0, shift):
            for upper in (True, False):
                exact.exact_p(loss, gain, n, delta, upper=upper)


def plan_work(power, cells, n: int) -> None:
    for loss, gain in cells:
        full = [1.0] * loss + [0.0] * gain + [1.0] * (n - loss - gain)
        arm = [0.0] * loss + [1.0] * gain + [1.0] * (n - loss - gain)
        power.needed(power.pilot(full, arm), 5.0, delta=0.0, power=0.8)


def _forget_memory(*modules) -> None:
    """Empty every in-memory cache of ``modules`` (what a new process starts with)."""
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, functools._lru_cache_wrapper):
                value.cache_clear()


def _timed(work: Callable[[], None]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=6)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--merge-base", action="store_true", help=f"also time {MERGE_BASE} (about 3x {MAIN}'s time)")
    parser.add_argument("--skip-plan", action="store_true")
    parser.add_argument("--now-only", action="store_true",
                        help="time today's code alone (a whole 60-cell grid without the minutes the reference commits take)")
    args = parser.parse_args()
    os.environ["CTXCOMP_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-exact-")  # cold: nothing kept yet
    from experiments.inference import exact, power

    olds = {} if args.now_only else {MAIN: _old(MAIN)}
    if args.merge_base and not args.now_only:
        olds[MERGE_BASE] = _old(MERGE_BASE)
    import scipy.optimize  # noqa: F401 - imports paid before any clock starts
    import scipy.special  # noqa: F401
    import scipy.stats  # noqa: F401

    cells = _cells(args.cells, args.n)
    load = os.getloadavg()[0]
    print(f"{len(cells)} cells at n = {args.n}, {os.cpu_count()} cores, load average {load:.1f} at the start",
          flush=True)
    for label in ("report", "plan")[: 1 if args.skip_plan else 2]:
        def work(module_pair, anchored: bool = True) -> Callable[[], None]:
            if label == "report":
                return lambda: report_work(module_pair[0], cells, args.n, anchored=anchored)
            return lambda: plan_work(module_pair[1], cells, args.n)

        times = {}
        for commit, pair in olds.items():
            times[commit] = _timed(work(pair, anchored=commit != MERGE_BASE))
        times["now, cold"] = _timed(work((exact, power)))
        _forget_memory(exact, power)
        times["now, warm"] = _timed(work((exact, power)))
        _forget_memory(exact, power)
        per60 = {k: 60 * v / len(cells) for k, v in times.items()}
        print(f"{label}: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items()), flush=True)
        for base in olds:
            print(f"  ratio against {base}: cold {times[base] / times['now, cold']:.2f}x, "
                  f"warm {times[base] / times['now, warm']:.1f}x", flush=True)
        target = TARGETS[label]
        print("  projected to 60 cells: " + ", ".join(f"{k} {v:.0f} s" for k, v in per60.items())
              + f"; target {target:.0f} s: cold {'met' if per60['now, cold'] <= target else 'NOT met'}, "
              f"warm {'met' if per60['now, warm'] <= target else 'NOT met'}", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end", flush=True)


if __name__ == "__main__":
    main()
