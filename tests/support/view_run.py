"""A small real run for the view's tests: synthetic multi-document QA read by the model-free extractive reader,
with a full arm, a retrieval arm that keeps one 30-word chunk, and a truncating arm that loses answers."""
from __future__ import annotations

import json
from pathlib import Path

from experiments.data.records import Example

PAYLOAD = ('<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
           '</script><svg onload="window.__xss=3"></svg>&amp; "quotes" \u2028 done')

CONFIG = {
    "name": "view",
    "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 10, "num_docs": 6, "words_per_doc": 40}}],
    "compressors": [
        "full",
        {"name": "retrieval", "params": {"retriever": "bm25", "top_n": 1, "unit": "chunk", "chunk_size": 30}},
        {"name": "truncate", "params": {"max_tokens": 80, "policy": "right"}},
    ],
    "readers": ["extractive"],
}
CHUNK_SIZE = 30


def make_run(run_dir: Path, *, payload: bool = True) -> Path:
    """Run the grid into ``run_dir``; with ``payload``, one prediction's text is replaced by markup that must
    stay text."""
    from experiments import evaluate

    evaluate(CONFIG, run_dir, report=False, progress=False)
    if payload:
        path = run_dir / "predictions.jsonl"
        records = lines_of(path)
        records[0]["prediction"] = PAYLOAD
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return run_dir


def lines_of(path: Path) -> list[dict]:
    """A JSONL file's records (split on newlines only: a U+2028 inside a string is not a line break)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def lines(run_dir: Path, name: str) -> list[dict]:
    return lines_of(run_dir / name)


def examples() -> dict[str, Example]:
    from experiments.run.config import parse_config
    from experiments.run.examples import load_task_examples

    return {ex.id: ex for ex in load_task_examples(parse_config(CONFIG).tasks[0])}


def kept_texts(example: Example, kept_ids: list[str]) -> list[str]:
    """The text of each kept chunk as the retrieval arm's chunker split the context (stripped, as the reader saw it)."""
    from indexes.chunking import make_chunker

    chunks = {c.chunk_id: c.text for c in make_chunker("longbench", CHUNK_SIZE).split(example.context, doc_id=example.id)}
    return [chunks[u].strip() for u in kept_ids]
