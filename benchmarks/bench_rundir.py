"""A run directory at 10^4, 10^5 and 10^6 predictions: the resume scan, ``report``, ``compare`` and ``view``.

A LongBench grid on a GPU fleet writes hundreds of thousands of predictions; what reads the run directory
must not become the bottleneck.  For each size this script writes (once, under ``--dir``) a synthetic run
directory in the layout a real run leaves: ``config.yaml`` and ``grid.json`` from the project's own config
and grid code, ``predictions.jsonl`` and ``traces.jsonl`` of the project's record types, with realistic field
sizes (a question, a prediction, gold answers, kept chunk ids and their scores; a ranking of 20 chunks per
trace).  The grid is 50 points (full context and 49 truncation lengths, the extractive reader) x 2 synthetic
multi-document QA tasks, so a size N has N / 100 examples per task.  Then, each in a fresh process:

- **resume scan**: ``evaluate(run_dir)`` of the finished run (read and check every log, repair nothing,
  load the examples, plan zero pending units, write ``stats.json``), without the report;
- **report**: ``ctxcomp report RUN --no-view`` (cells, paired intervals, tables, plots);
- **compare**: ``ctxcomp compare RUN RUN``;
- **view**: ``ctxcomp view RUN`` where its page stays below ``--view-max`` predictions.

It prints wall seconds and peak RSS of each, the growth from 10^5 to 10^6 (``x10 size`` means linear), and
the targets at 10^6: resume scan <= 20 s, report <= 120 s, memory <= 4 GB.

``--overhead`` measures the runner's own work per prediction (compress nothing, build the prompt, record,
hash, append and sync the logs) with a reader that answers instantly, as a real grid runs.

Run: ``python benchmarks/bench_rundir.py [--sizes 10000,100000,1000000] [--dir runs/bench-rundir] [--overhead]``.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collections.abc import Sequence  # noqa: E402

from experiments.data.records import Prediction, Trace  # noqa: E402
from experiments.data.store import CONFIG, GRID, PREDICTIONS, TRACES  # noqa: E402
from experiments.run.config import dump_config, parse_config  # noqa: E402
from experiments.run.grid import expand_grid, grid_manifest  # noqa: E402
from readers.base import Generation, GenerationRequest, Reader  # noqa: E402

POINTS = 50
TASKS = 2


def config(examples_per_task: int, name: str = "bench-rundir") -> dict:
    return {
        "name": name,
        "tasks": [{"name": "nq_multidoc", "label": f"qa{t}",
                   "synthetic": {"kind": "multidoc_qa", "n": examples_per_task, "num_docs": 4, "words_per_doc": 20,
                                 "seed": t}} for t in range(TASKS)],
        "compressors": ["full", {"name": "truncate", "params": {"max_tokens": [40 + 4 * i for i in range(POINTS - 1)]}}],
        "readers": ["extractive"],
        "batch_size": 64,
    }


def write_run(run_dir: Path, n_predictions: int, seed: int = 0) -> None:
    """A finished run of ``n_predictions`` lines (and as many traces), written in the project's record format."""
    from experiments.data.synthetic import make_multidoc_qa

    per_task = n_predictions // (POINTS * TASKS)
    cfg = parse_config(config(per_task))
    grid = expand_grid(cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    dump_config(cfg, run_dir / CONFIG)
    (run_dir / GRID).write_text(json.dumps(grid_manifest(cfg, grid), indent=2), encoding="utf-8")
    rng = random.Random(seed)
    tasks = [(t.key, make_multidoc_qa(per_task, num_docs=4, words_per_doc=20, seed=t.synthetic.seed))
             for t in cfg.tasks]
    # one record of each kind per example, in the project's own line format; each grid point changes its keys,
    # its prediction and its score (serialised with the same json.dumps a run uses)
    templates = []
    for key, examples in tasks:
        for ex in examples:
            keyed = dict(task=key, spec="nq_multidoc", id=ex.id, config_hash="", compressor="",
                         compressor_kind="", reader="extractive")
            ranking = [[f"{ex.id}:c{j}", round(rng.random() * 20, 4)] for j in range(20)]
            kept = [r[0] for r in ranking[:3]]
            pred = Prediction(**keyed, query=ex.query, prompt_hash="", prediction="", answers=list(ex.answers),
                              metric="litm_qa_em", score=0.0, answer_in_context=True, tokens_in=120, tokens_out=120,
                              reader_tokens_in=150, reader_tokens_out=8, latency_s=0.5, compress_s=0.0012,
                              kept_chunks=kept, chunk_scores=[r[1] for r in ranking[:3]], meta=dict(ex.meta),
                              source=ex.source).as_dict()
            trace = Trace(**keyed, compressor_identity="", kept_chunks=kept,
                          trace={"ranking": ranking, "n_chunks": 20, "order": "score"}).as_dict()
            templates.append((pred, trace, ex.answers[0]))
    with open(run_dir / PREDICTIONS, "w", encoding="utf-8") as preds, open(run_dir / TRACES, "w", encoding="utf-8") as traces:
        for pi, point in enumerate(grid):
            label = "full" if pi == 0 else f"truncate({point.compressor.params['max_tokens']}, middle)"
            point_keys = dict(config_hash=point.config_hash, compressor=label, compressor_kind=point.compressor.name)
            for pred, trace, answer in templates:
                right = rng.random() < (0.8 - 0.005 * pi)
                pred.update(point_keys, prompt_hash=f"{rng.getrandbits(64):016x}", score=float(right),
                            prediction=answer if right else "I do not know the answer.", tokens_out=120 - pi,
                            latency_s=round(rng.random(), 4))
                trace.update(point_keys, compressor_identity=label)
                traces.write(json.dumps(trace, ensure_ascii=False) + "\n")
                preds.write(json.dumps(pred, ensure_ascii=False) + "\n")


LAST: dict[str, str] = {}


def measure(code: str, env: dict | None = None, keep: str = "") -> tuple[float, float, str]:
    """(wall s, peak RSS GB, error) of ``code`` run in a fresh Python process; the last output line starting
    with ``keep`` is left in ``LAST``."""
    probe = textwrap.dedent(f"""
        import resource, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        t0 = time.perf_counter()
        {textwrap.indent(textwrap.dedent(code), '        ').strip()}
        wall = time.perf_counter() - t0
        print("MEASURED", wall, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 / 1024)
    """)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env={**os.environ, "CTXCOMP_NO_PROGRESS": "1", **(env or {})})
    if out.returncode:
        return float("nan"), float("nan"), (out.stderr.strip().splitlines() or ["failed"])[-1][:200]
    if keep:
        LAST[keep] = [x for x in out.stdout.splitlines() if x.startswith(keep)][-1]
    line = [x for x in out.stdout.splitlines() if x.startswith("MEASURED")][-1].split()
    return float(line[1]), float(line[2]), ""


def cli(args: list[str]) -> str:
    return f"from experiments.cli.app import main\nsys.argv = ['ctxcomp', *{args!r}]\ntry:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code"


def overhead(n: int, tmp: Path) -> None:
    """Runner work per prediction with an instant reader: the grid of ``config`` run for real, examples loaded first."""
    code = f"""
        import json, shutil
        from experiments import evaluate
        from experiments.run.config import parse_config
        from experiments.data.synthetic import make_multidoc_qa
        cfg = json.loads({json.dumps(json.dumps(config(n // (POINTS * TASKS), "overhead")))})
        cfg["readers"] = ["benchmarks.bench_rundir:InstantReader"]
        cfg = parse_config(cfg)
        t1 = time.perf_counter()
        for t in cfg.tasks:  # generating the examples is the data's cost, not the runner's: timed and taken off
            make_multidoc_qa(t.synthetic.n, num_docs=4, words_per_doc=20, seed=t.synthetic.seed)
        data_s = time.perf_counter() - t1
        shutil.rmtree({str(tmp / "overhead")!r}, ignore_errors=True)
        t1 = time.perf_counter()
        ev = evaluate(cfg, {str(tmp / "overhead")!r}, report=False, progress=False)
        run_s = time.perf_counter() - t1 - data_s
        from experiments.data.store import RunDir
        compress_s = sum(p.compress_s for p in RunDir(ev.run_dir).predictions.read())
        print("PER_PREDICTION_MS", 1000 * run_s / ev.stats.predicted, ev.stats.predicted,
              1000 * (run_s - compress_s) / ev.stats.predicted)
    """
    wall, rss, err = measure(code, {"CTXCOMP_CACHE_DIR": str(tmp / "overhead-cache")}, keep="PER_PREDICTION_MS")
    if err:
        print("overhead run failed:", err)
        return
    ms, count, own_ms = LAST.get("PER_PREDICTION_MS", "- nan 0 nan").split()[1:]
    print(f"per prediction with an instant reader ({int(count):,} predictions of full/truncate arms, examples "
          f"generated beforehand and not counted): {float(ms):.3f} ms in all, of which the runner's own work "
          f"(everything but the compressors' compress_s: prompt, scoring, the generation cache, records, appends "
          f"and syncs) {float(own_ms):.3f} ms (target <= 1 ms); peak {rss:.2f} GB")


class InstantReader(Reader):
    """Answers every request at once; for timing the runner alone."""

    identity = "instant"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        return [Generation(text="Paris", tokens_in=len(r.prompt) // 4, tokens_out=1, latency_s=0.0) for r in requests]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--dir", type=Path, default=ROOT / "runs" / "bench-rundir")
    ap.add_argument("--view-max", type=int, default=100_000, help="write the view only up to this many predictions")
    ap.add_argument("--overhead", type=int, default=0, help="also time the runner per prediction on a grid this big")
    args = ap.parse_args()
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} CPUs")
    results: dict[int, dict[str, tuple[float, float, str]]] = {}
    for n in [int(s) for s in args.sizes.split(",") if s]:  # --sizes "": only --overhead
        run = args.dir / f"n{n}"
        if not (run / PREDICTIONS).is_file() or sum(1 for _ in open(run / PREDICTIONS, "rb")) != n:
            t0 = time.perf_counter()
            write_run(run, n)
            print(f"wrote {run} ({n:,} predictions + traces) in {time.perf_counter() - t0:.1f} s")
        size_mb = sum(p.stat().st_size for p in (run / PREDICTIONS, run / TRACES)) / 1e6
        steps = {
            "resume scan": f"from experiments import evaluate\nev = evaluate({str(run)!r}, report=False, progress=False)\n"
                           f"assert ev.stats.predicted == 0 and ev.stats.already_done == {n}, ev.stats",
            "report": cli(["report", str(run), "--no-view"]),
            "compare": cli(["compare", str(run), str(run), "--plain"]),
        }
        if n <= args.view_max:
            steps["view"] = cli(["view", str(run)])
        results[n] = {}
        for name, code in steps.items():
            results[n][name] = measure(code)
            wall, rss, err = results[n][name]
            print(f"{n:>9,} predictions ({size_mb:,.0f} MB of logs) | {name:<11} | {wall:8.2f} s | peak {rss:5.2f} GB"
                  + (f" | FAILED: {err}" if err else ""), flush=True)
    sizes = sorted(results)
    for lo, hi in zip(sizes, sizes[1:]):
        for name in results[hi]:
            if name in results[lo]:
                ratio = results[hi][name][0] / results[lo][name][0]
                print(f"{name}: {hi // lo}x the predictions took {ratio:.1f}x the time ({lo:,} -> {hi:,})")
    if args.overhead:
        overhead(args.overhead, args.dir)
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
