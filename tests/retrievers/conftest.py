"""The real open-domain corpus: Lost in the Middle's NQ-Open gold passages, each distinct one once."""
from __future__ import annotations

import gzip
import json

import pytest

from indexes.types import Chunk, make_chunk_id


@pytest.fixture(scope="session")
def nq_corpus(shared_data):
    """(chunks with titles, [(question, answers)]) from nq-open-oracle: 2,600 passages, 2,655 questions."""
    path = shared_data / "lost_in_the_middle" / "nq-open-oracle.jsonl.gz"
    if not path.exists():
        pytest.skip(f"{path} missing")
    chunks, seen, queries = [], set(), []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            queries.append((row["question"], row["answers"]))
            for ctx in row["ctxs"]:
                if (ctx["title"], ctx["text"]) in seen:
                    continue
                seen.add((ctx["title"], ctx["text"]))
                doc_id = f"d{len(chunks)}"
                chunks.append(Chunk(make_chunk_id(doc_id, 0), doc_id, 0, 0, len(ctx["text"]), ctx["text"], ctx["title"]))
    return chunks, queries
