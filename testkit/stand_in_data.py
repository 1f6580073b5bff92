"""Small files in the published formats at the paths the shipped configs name, for data this machine lacks.

LongBench (``data/longbench/*.jsonl``), LongBench v2 (``data/longbench_v2/data.json``) and ∞Bench
(``data/infinitebench/*.jsonl``) are read by path and cannot be fetched here; a test or a benchmark of a shipped
config (its dry run) writes these stand-ins under a temporary working directory, so the config runs as
written.  The texts are generated (seeded words), a few thousand words each: enough for chunking, retrieval
and a reader's window to matter, not a benchmark's numbers.

The overrides that make the shipped configs run offline with them (``OFFLINE_OVERRIDES``): the Qwen tokenizer
that LongBench v2's and ∞Bench's chunks are cut with is not on this machine, so they are cut in words; the Lost
in the Middle 20-document file is not fetched, so a stand-in is built from nq-open-oracle (``write_twenty_docs``).
"""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

from experiments.tasks.specs import get_task

WORDS = ("river harbour council budget engine protein orbit archive treaty signal garden mineral ledger "
         "station glacier market vessel theory canyon festival").split()

LONGBENCH = ("narrativeqa", "qasper", "multifieldqa_en", "multifieldqa_zh", "hotpotqa", "2wikimqa", "musique",
             "dureader", "gov_report", "qmsum", "multi_news", "vcsum")
INFINITEBENCH = ("longbook_qa_eng", "longbook_choice_eng", "longbook_sum_eng", "longbook_qa_chn")

TWENTY_DOCS = "nq-open-20_total_documents_stand_in.jsonl.gz"  # beside the other stand-ins, under data/
OFFLINE_OVERRIDES: dict[str, dict[str, object]] = {
    "longbench_v2": {"tasks.0.chunks.chunker": "words"},
    "infinitebench": {f"tasks.{i}.chunks.chunker": "words" for i in range(4)},
    "litm_position_sweep": {"tasks.0.data": None, "tasks.0.path": f"data/{TWENTY_DOCS}"},
}


def _text(rng: random.Random, words: int, zh: bool = False) -> str:
    if zh:
        return "".join(rng.choice("河港会议预算引擎蛋白轨道档案条约信号花园矿物") for _ in range(words)) + "。"
    sentences = []
    for _ in range(max(1, words // 12)):
        sentences.append(" ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + ".")
    return " ".join(sentences)


def write_stand_in_data(root: Path, *, n: int = 3, words: int = 3000, seed: int = 0) -> list[Path]:
    """Write the stand-in files under ``root`` (a working directory); returns their paths."""
    rng = random.Random(seed)
    out = []
    for name in LONGBENCH:
        zh = name.endswith("zh") or name in ("dureader", "vcsum")
        rows = [{"input": f"What does record {i} say about the {rng.choice(WORDS)}?",
                 "context": _text(rng, words, zh), "answers": [rng.choice(WORDS)], "length": words,
                 "dataset": name, "language": "zh" if zh else "en", "all_classes": None, "_id": f"{name}-{i}"}
                for i in range(n)]
        out.append(_write_lines(root / "data" / "longbench" / f"{name}.jsonl", rows))
    v2 = [{"_id": f"v2-{i}", "domain": "Single-Document QA", "sub_domain": "Financial", "difficulty": "easy",
           "length": "short", "question": f"Which {rng.choice(WORDS)} is named first?", "choice_A": "river",
           "choice_B": "harbour", "choice_C": "council", "choice_D": "budget", "answer": "B",
           "context": _text(rng, words)} for i in range(n)]
    path = root / "data" / "longbench_v2" / "data.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(v2), encoding="utf-8")
    out.append(path)
    for name in INFINITEBENCH:
        choice = name == "longbook_choice_eng"
        rows = [{"id": i, "context": _text(rng, words, name.endswith("chn")), "input": f"Who kept the {WORDS[i]}?",
                 "answer": ["harbour"] if choice else [rng.choice(WORDS)],
                 "options": ["river", "harbour", "council", "budget"] if choice else []} for i in range(n)]
        out.append(_write_lines(root / "data" / "infinitebench" / f"{name}.jsonl", rows))
    get_task("longbench_v2")  # the tasks these files feed exist (a renamed task fails here, not in a config)
    return out


def write_twenty_docs(root: Path, oracle: Path, *, documents: int = 20) -> Path:
    """The published 20-document QA file's stand-in, from nq-open-oracle (``oracle``): each question's gold
    passage first, then the gold passages of the next questions as distractors (marked without the answer), so
    every question of the real file is there with 20 real Wikipedia passages."""
    with gzip.open(oracle, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    golds = [row["ctxs"][0] for row in rows]
    path = root / "data" / TWENTY_DOCS
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as out:
        for i, row in enumerate(rows):
            others = [{**golds[(i + j) % len(golds)], "hasanswer": False, "isgold": False} for j in range(1, documents)]
            out.write(json.dumps({**row, "ctxs": [row["ctxs"][0], *others]}) + "\n")
    return path


def _write_lines(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


__all__ = ["OFFLINE_OVERRIDES", "TWENTY_DOCS", "write_stand_in_data", "write_twenty_docs"]
