"""How large ``view.html`` gets and how fast it opens and filters in a real browser (not a test).

Builds (once) a run of 20,000 predictions over documents of 10,000 words: 1,000 synthetic multi-document
questions (72 documents each, about 10,400 words and 66,000 characters in all; the generator writes about
145 words per document) x 20 arms (full context, BM25 retrieval at 3 chunk sizes x 5
top-n, truncation to 4 lengths), read by the model-free extractive reader.  Then writes the view and opens
it in headless Chromium (Debian's ``chromium`` + ``chromium-driver``, driven by Selenium), timing:

- open: ``driver.get`` until the overview is on screen (the whole file read and parsed, the overview drawn);
- the example browser of the task (its data block parsed, the first page drawn), a score filter, a search;
- one example with all 20 arms side by side.

Run: ``python benchmarks/bench_view.py [--run DIR] [--n 1000] [--quick]`` (``--quick``: 100 questions).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testkit.browser import BrowserUnavailable, headless_chromium  # noqa: E402


def config(n: int) -> dict:
    return {
        "name": "view-scale",
        "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": n, "num_docs": 72,
                                                         "words_per_doc": 500}}],
        "compressors": [
            "full",
            {"name": "retrieval", "params": {"retriever": "bm25", "unit": "chunk", "chunk_size": [100, 200, 500],
                                             "top_n": [1, 2, 3, 5, 7]}},
            {"name": "truncate", "params": {"max_tokens": [500, 1000, 2000, 4000], "policy": "middle"}},
        ],
        "readers": ["extractive"],
        "batch_size": 50,
    }


def timed(driver, script: str) -> float:
    """Milliseconds a synchronous render took inside the page."""
    return driver.execute_script("const t0 = performance.now();" + script + "; return performance.now() - t0;")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", type=Path, default=ROOT / "runs" / "view-scale")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = 100 if args.quick else args.n
    from experiments import evaluate
    from experiments.cli.view import load_contexts
    from experiments.view.page import write_view

    t0 = time.perf_counter()
    result = evaluate(config(n), args.run, report=False, progress=False)
    print(f"run: {sum(c.n for c in result.cells)} predictions in {args.run} ({time.perf_counter() - t0:.0f} s, "
          f"{result.stats.predicted} new)")
    t0 = time.perf_counter()
    page = write_view(args.run, contexts=load_contexts)
    print(f"view: {page} {page.stat().st_size / 1e6:.1f} MB, written in {time.perf_counter() - t0:.1f} s")
    try:
        driver = headless_chromium()
    except BrowserUnavailable as err:
        print(f"no browser: {err}")
        return
    try:
        timings = {}
        t0 = time.perf_counter()
        driver.get(page.resolve().as_uri())
        while driver.execute_script("return document.body.getAttribute('data-view')") != "overview":
            time.sleep(0.01)
        timings["open (file read, parsed, overview drawn), s"] = round(time.perf_counter() - t0, 2)
        nav = driver.execute_script("return performance.getEntriesByType('navigation')[0].toJSON()")
        timings["load event (page's own clock), s"] = round(nav["loadEventEnd"] / 1000, 2)
        go = "history.replaceState(null, '', '#/{}'); CTX.render()"
        timings["example browser, first open of the task (20,000 rows), ms"] = round(timed(driver, go.format("browse?task=nq_multidoc")))
        timings["browser again (task block cached), ms"] = round(timed(driver, go.format("browse?task=nq_multidoc")))
        timings["filter: one arm, score 0-0.5, ms"] = round(timed(driver, go.format(
            "browse?task=nq_multidoc&arm=" + "retrieval(bm25, 200x3, order=score)".replace(" ", "%20") + "&max=0.5")))
        timings["filter: lost flips, ms"] = round(timed(driver, go.format("browse?task=nq_multidoc&flip=lost")))
        timings["lost flips found"] = driver.execute_script("return document.querySelector('.pager').textContent")
        timings["free-text search (first: builds the index), ms"] = round(timed(driver, go.format("browse?task=nq_multidoc&q=engine")))
        timings["free-text search again, ms"] = round(timed(driver, go.format("browse?task=nq_multidoc&q=lake")))
        timings["one example, 20 arms side by side, ms"] = round(timed(driver, go.format("example?task=nq_multidoc&ex=7")))
        print(json.dumps(timings, indent=1))
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
