"""The exact test's speed, today's code beside the merge-base's (0362aec) in one run: a report's work on a grid
of 0/1 cells (each cell: its interval, its verdict at the margin and the p-values both print), and ``plan``'s
work on the same cells (the n for 80% power at a true difference of 0).

The merge-base's modules are read with ``git show 0362aec:<path>`` into temporary modules, so both run on the same
machine under the same load; the ratio is what to read (the machine here has 2 cores shared by many jobs).

Run: ``python benchmarks/bench_exact.py [--cells 6] [--n 1000]`` (the target: 60 cells at n = 1,000 in
<= 60 s on 2 cores, ``plan`` over them in <= 2 min; the projection to 60 cells is printed).
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BASE = "0362aec"


def _old(path: str, name: str, replace: tuple[str, str] | None = None):
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{BASE}:{path}"], check=True, capture_output=True,
                          text=True).stdout
    if replace:
        text = text.replace(*replace)
    folder = Path(tempfile.mkdtemp())
    (folder / f"{name}.py").write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


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
        else:  # the merge-base's code: one search for the scores table, the same cached for the verdict
            exact.exact_bounds(loss, gain, n, alpha)
        for delta in (0.0, shift):
            for upper in (True, False):
                exact.exact_p(loss, gain, n, delta, upper=upper)


def plan_work(power, cells, n: int) -> None:
    for loss, gain in cells:
        full = [1.0] * loss + [0.0] * gain + [1.0] * (n - loss - gain)
        arm = [0.0] * loss + [1.0] * gain + [1.0] * (n - loss - gain)
        power.needed(power.pilot(full, arm), 5.0, delta=0.0, power=0.8)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=6)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--skip-plan", action="store_true")
    args = parser.parse_args()
    from experiments.inference import exact, power

    old_exact = _old("experiments/inference/exact.py", "exact_0362aec")
    old_power = _old("experiments/inference/power.py", "power_0362aec",
                     ("from experiments.inference import betting, exact",
                      "from experiments.inference import betting\nimport exact_0362aec as exact"))
    import scipy.optimize  # noqa: F401 - imports paid before any clock starts
    import scipy.special  # noqa: F401
    import scipy.stats  # noqa: F401

    cells = _cells(args.cells, args.n)
    rows = []
    for label, work in (("report", lambda m, a: report_work(m, cells, args.n, anchored=a)),
                        ("plan", lambda m, _a: plan_work(m, cells, args.n))):
        if label == "plan" and args.skip_plan:
            continue
        times = {}
        for name, module, anchored in (("0362aec", old_exact if label == "report" else old_power, False),
                                       ("now", exact if label == "report" else power, True)):
            start = time.perf_counter()
            work(module, anchored)
            times[name] = time.perf_counter() - start
        rows.append((label, times))
        per = {k: v / len(cells) for k, v in times.items()}
        print(f"{label}: {len(cells)} cells at n = {args.n}: 0362aec {times['0362aec']:.1f} s, now {times['now']:.1f} s, "
              f"ratio {times['0362aec'] / times['now']:.2f}x; projected to 60 cells: "
              f"0362aec {60 * per['0362aec']:.0f} s, now {60 * per['now']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
