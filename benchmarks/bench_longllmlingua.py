"""LongLLMLingua in the budget sweep: the document ranking scored once against llmlingua alone, side by side.

The sweep's work for LongLLMLingua (experiments/configs/budget_sweep.yaml): its 20-document task (``litm_20docs``:
NQ-Open questions, the gold document first, in the middle or last, BM25 distractors) with the packaged SmolLM2 as
the LM, every budget of the sweep (256/512/1,024/2,048) for each of its two readers' tokenizations (SmolLM2's, the
extractive reader's words), one compressor per (reader, budget) as the runner builds them.  Each example is
compressed at every grid point twice:

- ``alone``: ``use_cache=False``, llmlingua as it is (ranks the documents again on every call);
- ``cached``: ``use_cache=True`` with an empty cache folder, so the first grid point of each example scores the
  ranking and the other seven re-use it.

Both arms run at each grid point in turn, the first of them alternating, so a change in the machine's load
falls on both alike.  It prints per arm the seconds in the ranking (``get_rank_results``), in the token-level
pass (``iterative_compress_prompt``) and the rest (tokenizing, the document-level filter), their ratio, whether
every output is byte-identical between the arms, and LongLLMLingua's share of the sweep before and after (the
sweep's other work, measured in docs/findings.md, does not change).  The load average is printed at the start,
after each example and at the end: the machine is shared.

Usage: ``python benchmarks/bench_longllmlingua.py [--examples 2] [--budgets 256 512 1024 2048]`` (data from
``$CTXCOMP_DATA_DIR``, else ../shared/data beside the checkout, else the data directory: ``ctxcomp data get
lost_in_the_middle/nq-open-oracle``).  About 10 minutes on 2 idle cores with 2 examples; ``--examples 6`` is
the sweep's whole LongLLMLingua work.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SWEEP = REPO / "experiments" / "configs" / "budget_sweep.yaml"
TASK_LABEL = "litm_20docs"
# docs/findings.md, "The budget sweep": the whole sweep and LongLLMLingua's part of it, in minutes
SWEEP_MINUTES, LLMLINGUA_MINUTES = 63.0, 20.0
PARTS = ("ranking", "token-level", "rest")


class Split:
    """Seconds spent in llmlingua's ranking and token-level pass, per call (wraps the two methods once)."""

    def __init__(self) -> None:
        from compressors.longllmlingua import _ranking_once_class

        self.seconds: dict[str, float] = defaultdict(float)  # the current call's, by part
        cls = _ranking_once_class()
        for name, part in (("get_rank_results", "ranking"), ("iterative_compress_prompt", "token-level")):
            setattr(cls, name, self._timed(getattr(cls, name), part))

    def _timed(self, method, part: str):
        def timed(pc, *args, **kwargs):
            start = time.perf_counter()
            try:
                return method(pc, *args, **kwargs)
            finally:
                self.seconds[part] += time.perf_counter() - start

        return timed


@contextmanager
def cache_folder() -> Iterator[None]:
    """An empty ranking cache for this run: a temporary ``CTXCOMP_CACHE_DIR`` (the cache starts cold)."""
    import compressors.longllmlingua as module
    from core.paths import model_cache_root

    before = os.environ.get("CTXCOMP_CACHE_DIR")
    os.environ.setdefault("CTXCOMP_MODEL_CACHE_DIR", str(model_cache_root()))  # SmolLM2 is converted once already
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CTXCOMP_CACHE_DIR"] = tmp
        module._rankings.clear()
        try:
            yield
        finally:
            for cache in module._rankings.values():
                cache.close()
            module._rankings.clear()
            if before is None:
                os.environ.pop("CTXCOMP_CACHE_DIR", None)
            else:
                os.environ["CTXCOMP_CACHE_DIR"] = before


def sweep_examples(n: int) -> list:
    from experiments.run.config import load_config
    from experiments.run.examples import load_task_examples

    shared = REPO.parent / "shared" / "data"
    if not os.environ.get("CTXCOMP_DATA_DIR") and shared.is_dir():
        os.environ["CTXCOMP_DATA_DIR"] = str(shared)
    task = next(t for t in load_config(SWEEP).tasks if t.label == TASK_LABEL)
    return load_task_examples(task)[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=2, help="the first N of the sweep's 6 examples")
    parser.add_argument("--budgets", type=int, nargs="+", default=[256, 512, 1024, 2048])
    args = parser.parse_args()

    import torch

    from compressors.longllmlingua import shared_ranking_cache
    from compressors.registry import make_compressor
    from readers.registry import make_reader

    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores, "
          f"torch threads {torch.get_num_threads()})")
    examples = sweep_examples(args.examples)
    readers = {"smollm2": make_reader("smollm2", max_context=4096).tokenizer, "extractive": make_reader("extractive").tokenizer}
    grid = [(reader, budget) for reader in readers for budget in args.budgets]
    split = Split()
    wall: dict[tuple[str, str], float] = defaultdict(float)  # (arm, part) -> seconds
    texts: dict[str, list[str]] = defaultdict(list)
    with cache_folder():
        make_compressor("longllmlingua", device="cpu").warm_up()  # the LM loads once, before any timing
        step = 0
        for ex in examples:
            for reader, budget in grid:  # both arms at each grid point, so a change of load hits both alike
                line = []
                for arm in ("alone", "cached") if step % 2 == 0 else ("cached", "alone"):
                    comp = make_compressor("longllmlingua", device="cpu", use_cache=arm == "cached",
                                           tokenizer=readers[reader])
                    split.seconds.clear()
                    start = time.perf_counter()
                    out = comp.compress(ex, budget)
                    took = time.perf_counter() - start
                    parts = [split.seconds["ranking"], split.seconds["token-level"]]
                    for part, sec in zip(PARTS, [*parts, took - sum(parts)]):
                        wall[(arm, part)] += sec
                    texts[arm].append(out.text)
                    line.append(f"{arm} {took:6.1f} s (ranking {parts[0]:5.1f}, token-level {parts[1]:5.1f})")
                print(f"  {ex.id} {reader:>10} @{budget:<4}: {'; '.join(line)}; "
                      f"LM tokens kept {out.trace.get('lm_tokens_out', '-')}", flush=True)
                step += 1
            print(f"  load average {os.getloadavg()[0]:.2f}", flush=True)
        rankings = shared_ranking_cache()
        print(f"ranking cache of the cached arm: {rankings.misses} scored, {rankings.hits} served")

    calls = len(examples) * len(grid)
    print(f"\nLongLLMLingua, SmolLM2 on CPU: {len(examples)} example(s) x {len(readers)} readers x budgets "
          f"{'/'.join(map(str, args.budgets))} = {calls} compressions per arm")
    print(f"{'arm':<8} {'total s':>9} {'per call s':>11} " + " ".join(f"{p + ' s':>14}" for p in PARTS))
    total = {arm: sum(wall[(arm, part)] for part in PARTS) for arm in ("alone", "cached")}
    for arm in ("alone", "cached"):
        print(f"{arm:<8} {total[arm]:>9.1f} {total[arm] / calls:>11.2f} "
              + " ".join(f"{wall[(arm, p)]:>8.1f} ({100 * wall[(arm, p)] / total[arm]:>2.0f}%)" for p in PARTS))
    ratio = total["alone"] / total["cached"]
    print(f"alone / cached: {ratio:.2f}x; outputs byte-identical: {texts['alone'] == texts['cached']}")
    after = LLMLINGUA_MINUTES / ratio
    print(f"the sweep (docs/findings.md: {LLMLINGUA_MINUTES:.0f} of {SWEEP_MINUTES:.0f} min LongLLMLingua): "
          f"LongLLMLingua ~{after:.1f} min of ~{SWEEP_MINUTES - LLMLINGUA_MINUTES + after:.0f} min "
          f"({100 * LLMLINGUA_MINUTES / SWEEP_MINUTES:.0f}% -> "
          f"{100 * after / (SWEEP_MINUTES - LLMLINGUA_MINUTES + after):.0f}%)")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
