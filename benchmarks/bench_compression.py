"""Per-example latency of retrieval compression, measured side by side in one run.

1. BM25, LongBench setting (500-word chunks, top 3), contexts of 2k / 8k / 32k
   words: ours (``RetrievalCompressor``, word tokens) against rank_bm25 called
   the way the released LongBench script calls it (LongBench splitter, raw
   strings, so rank_bm25 iterates characters).  Both sides include splitting,
   indexing, scoring and concatenation.  It also reports whether each kept the
   one sentence that answers the query.
2. Dense (MiniLM, 200-word chunks, top 7) with a cold then a warm embedding
   cache: the warm run must make no encoder call.

Usage: ``python benchmarks/bench_compression.py [--real [--data-dir DIR]] [--sizes 2000 8000 32000]``.
Without ``--real`` the text is synthetic English (Zipf-distributed common
words in sentences and paragraphs); with it, L-Eval government reports
(``ctxcomp data get leval/gov_report_summ``; read from the data directory, or
``DIR``) are concatenated to the wanted length.  The query's answer sentence is inserted
at the middle of the context.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

from experiments.data.catalog import local_file
from experiments.data.records import Example

GOLD = "The vault combination chosen by Margaret Ellison in the final audit was 7391."
QUERY = "What vault combination did Margaret Ellison choose in the final audit?"

_WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but have an they "
    "you were her she there been one all we their has would when if so what more can out other about into than them "
    "some could time these two may then do first any my now such like our over man me even most made after also did "
    "many before must through back years where much your way well down should because each just those people how too "
    "little state good very make world still own see men work long get here between both life being under never day "
    "same another know while last might us great old year off come since against go came right used take three "
    "report program agency federal committee funding budget department office policy service public plan data system "
    "review costs health education water energy land forest river city county council members meeting board staff "
    "project support process results analysis increase decrease percent million billion local national regional"
).split()


def synthetic_text(n_words: int, rng: random.Random) -> str:
    """English-looking prose: Zipf word frequencies, 8-25-word sentences, 3-7-sentence paragraphs."""
    weights = [1.0 / (rank + 1) for rank in range(len(_WORDS))]
    paragraphs, total = [], 0
    while total < n_words:
        sentences = []
        for _ in range(rng.randint(3, 7)):
            length = rng.randint(8, 25)
            words = rng.choices(_WORDS, weights, k=length)
            sentences.append(" ".join(words).capitalize() + ".")
            total += length
        paragraphs.append(" ".join(sentences))
    return "\n".join(paragraphs)


def real_text(n_words: int, data_dir: Path | None) -> str:
    """L-Eval government reports, concatenated and cut to ``n_words`` words (whole lines kept)."""
    lines, total = [], 0
    with open(local_file("leval/gov_report_summ", data_dir), encoding="utf-8") as fh:
        docs = [json.loads(line)["input"] for line in fh if line.strip()]
    while total < n_words:
        for doc in docs:
            for line in doc.splitlines():
                lines.append(line)
                total += len(line.split())
                if total >= n_words:
                    return "\n".join(lines)
    return "\n".join(lines)


def make_item(n_words: int, text: Callable[[int], str]) -> Example:
    body = text(n_words)
    middle = body.find("\n", len(body) // 2)
    middle = middle if middle >= 0 else len(body) // 2
    return Example(task="bench", answers=(), id=f"ctx{n_words}", query=QUERY, context=f"{body[:middle]}\n{GOLD}{body[middle:]}")


def median_ms(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


_LB_PIECES = re.compile(r"([。？！；\n.!?;]\s*)")
_LB_NON_WORD = re.compile(r"\W")
_LB_CJK = re.compile(r"([\u4e00-\u9fa5])")


def _script_word_len(text: str) -> int:
    """LongBench's word count, computed the way its splitter does (split on \\W, then on each CJK character)."""
    return sum(
        1 for part in _LB_NON_WORD.split(text.lower()) for piece in _LB_CJK.split(part) if piece.strip()
    )


def longbench_script_split(text: str, chunk_size: int) -> list[str]:
    """The released splitter's procedure and cost: before adding each piece it recounts the open chunk's words."""
    chunks: list[str] = []
    current = ""
    for piece in _LB_PIECES.split(text):
        if current and _script_word_len(current) + _script_word_len(piece) <= chunk_size:
            current += " " if piece == "" else piece
        else:
            if current:
                chunks.append(current)
            current = piece
    if current:
        chunks.append(current)
    return chunks


def rank_bm25_chars(chunks: list[str], query: str, top_n: int = 3) -> str:
    """The released BM25 call: raw strings into BM25Okapi (so terms are characters), top-n joined with ''."""
    from rank_bm25 import BM25Okapi

    return "".join(BM25Okapi(chunks).get_top_n(query, chunks, n=top_n))


def bench_bm25(sizes: list[int], text: Callable[[int], str]) -> None:
    from compressors.retrieval import RetrievalCompressor
    from indexes.chunking import make_chunker

    ours = RetrievalCompressor(retriever="bm25", chunker="longbench", chunk_size=500, top_n=3)
    our_splitter = make_chunker("longbench", 500, compat=True)
    print("BM25, 500-word chunks, top 3 (median ms per example, splitting included)")
    print("  longbench = the script's splitter + rank_bm25 on raw strings (character terms)")
    print("  chars/our-split = our splitter + rank_bm25 on raw strings (isolates the BM25 part)")
    print(f"{'words':>7} {'chunks':>6} {'ours':>8} {'longbench':>10} {'speedup':>8} {'chars/our-split':>16} {'speedup':>8}  gold kept (ours / longbench)")
    for n in sizes:
        item = make_item(n, text)
        repeats = max(3, 40_000 // n)
        script = lambda: rank_bm25_chars(longbench_script_split(item.context, 500), item.query)  # noqa: E731
        chars_our_split = lambda: rank_bm25_chars([c.text for c in our_splitter.split(item.context)], item.query)  # noqa: E731
        ours_out, lb_text = ours.compress(item), script()
        t_ours = median_ms(lambda: ours.compress(item), repeats)
        t_lb = median_ms(script, repeats)
        t_chars = median_ms(chars_our_split, repeats)
        print(
            f"{n:>7} {ours_out.trace['n_chunks']:>6} {t_ours:>8.2f} {t_lb:>10.2f} {t_lb / t_ours:>7.1f}x"
            f" {t_chars:>16.2f} {t_chars / t_ours:>7.1f}x  {GOLD in ours_out.text} / {GOLD in lb_text}"
        )


def bench_dense(n_words: int, text: Callable[[int], str]) -> None:
    from compressors.retrieval import RetrievalCompressor
    from indexes.cache import EmbeddingCache

    item = make_item(n_words, text)
    with tempfile.TemporaryDirectory() as tmp:
        comp = RetrievalCompressor(
            retriever={"name": "minilm", "params": {"cache": EmbeddingCache(Path(tmp) / "emb")}},
            chunk_size=200,
            top_n=7,
        )
        retriever = comp.retriever
        print(f"\nDense MiniLM, 200-word chunks, top 7, {n_words} words (model load excluded)")
        for label in ("cold cache", "warm cache"):
            before = retriever.encoder_calls
            start = time.perf_counter()
            out = comp.compress(item)
            ms = 1000 * (time.perf_counter() - start)
            print(
                f"  {label}: {ms:8.1f} ms, encoder_calls +{retriever.encoder_calls - before}, "
                f"chunks {out.trace['n_chunks']}, gold kept {GOLD in out.text}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000, 32000])
    parser.add_argument("--real", action="store_true", help="use L-Eval gov reports (ctxcomp data get leval/gov_report_summ)")
    parser.add_argument("--data-dir", type=Path, default=None, help="with --real: the data directory to read them from")
    parser.add_argument("--dense-words", type=int, default=8000)
    parser.add_argument("--no-dense", action="store_true")
    args = parser.parse_args()
    if args.real or args.data_dir is not None:
        print(f"text: L-Eval gov_report from {local_file('leval/gov_report_summ', args.data_dir)}")
        text: Callable[[int], str] = lambda n: real_text(n, args.data_dir)  # noqa: E731
    else:
        print("text: synthetic English (seeded)")
        text = lambda n: synthetic_text(n, random.Random(n))  # noqa: E731
    bench_bm25(args.sizes, text)
    if not args.no_dense:
        bench_dense(args.dense_words, text)


if __name__ == "__main__":
    main()
