"""The compressors the field compares, side by side: seconds per example on the same inputs, in one run.

Each compressor compresses the same L-Eval NQ examples (the first question of each of the first ``--examples``
Wikipedia pages, cut to ``--words`` words) at each of ``--budgets`` reader tokens (SmolLM2's tokenizer), in
that order, the compressors interleaved per example so a change of load hits them alike.  The first budget pays
the per-example work that does not depend on the budget (a ranking, self-information, sentence embeddings, the
LLMLingua-2 encoder's pass); later budgets show what sharing it saves.  Per compressor it prints the median
seconds per example at the first budget and at the later ones, its own model time (``ModelWork.model_s``; the
rest is splitting, counting and the package's own code) and the ratio to BM25 retrieval.

``llmlingua2`` runs only with ``--llmlingua2-model FOLDER`` (a local token classifier: the published ones are
hub downloads); its times with a tiny model say nothing of the real one's.

Usage: ``python benchmarks/bench_compressors.py [--examples 3] [--words 1500] [--budgets 300 600] [--only ARM ...]``
(``--only``: re-time some arms beside BM25 retrieval, e.g. after a change to one compressor; data from
``$CTXCOMP_DATA_DIR``, else ../shared/data beside the checkout).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARMS = {
    "retrieval(bm25)": {"name": "retrieval", "params": {"retriever": "bm25", "chunk_size": 50}},
    "retrieval(minilm)": {"name": "retrieval", "params": {"retriever": "minilm", "chunk_size": 50}},
    "longllmlingua": {"name": "longllmlingua", "params": {"device": "cpu"}},
    "llmlingua": {"name": "llmlingua", "params": {"device": "cpu"}},
    "selective_context(word)": {"name": "selective_context", "params": {"device": "cpu"}},
    "recomp_extractive(minilm)": {"name": "recomp_extractive", "params": {"retriever": "minilm"}},
}


class Example:
    def __init__(self, id: str, context: str, query: str) -> None:
        self.id, self.context, self.query, self.passages, self.lang = id, context, query, (), "en"


def examples(n: int, words: int) -> list[Example]:
    data = Path(os.environ.get("CTXCOMP_DATA_DIR") or REPO.parent / "shared" / "data")
    path = data / "leval" / "natural_question.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:n]]
    return [Example(f"nq{i}", " ".join(r["input"].split()[:words]), r["instructions"][0]) for i, r in enumerate(rows)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=3)
    parser.add_argument("--words", type=int, default=1500)
    parser.add_argument("--budgets", type=int, nargs="+", default=[300, 600])
    parser.add_argument("--llmlingua2-model", default=None)
    parser.add_argument("--only", nargs="+", choices=sorted(ARMS), default=None,
                        help="Time these arms (BM25 retrieval, the ratios' base, always runs).")
    args = parser.parse_args()

    import torch

    from compressors.base import CompressionError
    from compressors.registry import make_compressor
    from readers.registry import make_reader

    arms = {name: spec for name, spec in ARMS.items()
            if args.only is None or name in args.only or name == "retrieval(bm25)"}
    if args.llmlingua2_model:
        arms["llmlingua2"] = {"name": "llmlingua2", "params": {"model": args.llmlingua2_model, "device": "cpu"}}
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores, "
          f"torch threads {torch.get_num_threads()})")
    tokenizer = make_reader("smollm2", max_context=4096).tokenizer
    built = {name: {b: make_compressor(spec, tokenizer=tokenizer) for b in args.budgets} for name, spec in arms.items()}
    for per_budget in built.values():
        for comp in per_budget.values():
            comp.warm_up()  # models load before any timing
    first: dict[str, list[float]] = {name: [] for name in arms}
    later: dict[str, list[float]] = {name: [] for name in arms}
    model: dict[str, list[float]] = {name: [] for name in arms}
    tokens: dict[str, list[float]] = {name: [] for name in arms}
    for ex in examples(args.examples, args.words):
        for i, budget in enumerate(args.budgets):
            for name in arms:
                start = time.perf_counter()
                try:
                    out = built[name][budget].compress(ex, budget)
                except CompressionError as err:  # a budget smaller than any unit: said, not timed
                    print(f"{name} @{budget}: {err}")
                    continue
                seconds = time.perf_counter() - start
                (first if i == 0 else later)[name].append(seconds)
                if i == 0:
                    model[name].append(out.work.model_s - out.work.cached_model_s)
                tokens[name].append(out.tokens_out / budget)
    base = statistics.median(first["retrieval(bm25)"])
    print(f"\n{args.examples} examples of {args.words} words, budgets {args.budgets} (SmolLM2 tokens), median s/example")
    print("| compressor | first budget | later budgets | own model time (first) | x BM25 (first) | achieved / budget |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in arms:
        if not first[name]:
            print(f"| {name} | - | - | - | - | - |")
            continue
        f, m = statistics.median(first[name]), statistics.median(model[name])
        rest = f"{statistics.median(later[name]):.2f}" if later[name] else "-"
        print(f"| {name} | {f:.2f} | {rest} | {m:.2f} | {f / base:.0f}x | {statistics.mean(tokens[name]):.2f} |")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
