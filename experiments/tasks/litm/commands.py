"""Lost in the Middle's ``ctxcomp build`` commands: fresh key-value retrieval data (``kv``) and gold-position
sweep files (``sweep``), in the paper's formats, so the ordinary loaders read them back."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from core.errors import UserError
from experiments.tasks.commands import data_path, parse_ints


def build_kv(
    n: int = typer.Option(500, "--n", help="Number of examples (the paper uses 500)."),
    num_keys: int = typer.Option(75, "--num-keys", help="Key-value pairs per example (paper: 75, 140, 300)."),
    positions: Optional[str] = typer.Option(None, "--positions", help="Comma-separated 0-based key positions; every example once per position. Default: random positions."),
    seed: int = typer.Option(0, "--seed", help="Random seed; the same seed gives the same UUIDs."),
    out: Path = typer.Option(..., "--out", help="Output .jsonl or .jsonl.gz (Lost in the Middle kv_retrieval format)."),
) -> None:
    """Fresh key-value retrieval data with UUID pairs, like the paper's kv-retrieval-*_keys files."""
    from experiments.data.store import write_jsonl
    from experiments.protocols.kv import generate_kv_records, move_key

    if n < 1:
        raise UserError(f"--n must be >= 1, got {n}")
    records = generate_kv_records(n, num_keys, seed=seed)
    if positions is not None:
        records = [move_key(r, p) for p in parse_ints(positions, "--positions") for r in records]
    typer.echo(f"wrote {len(records)} records to {write_jsonl(records, out)}")


def build_sweep(
    litm: Path = typer.Option(..., "--litm", help="Lost in the Middle QA file, a path or a data name; gold-only files get distractors from their own passages."),
    num_docs: int = typer.Option(20, "--num-docs", help="Documents per example (paper: 10, 20, 30)."),
    positions: str = typer.Option("0,4,9,14,19", "--positions", help="Comma-separated 0-based gold positions."),
    retriever: str = typer.Option("bm25", "--retriever", help="Retriever that ranks distractors when the file has too few."),
    distractors: str = typer.Option("retriever", "--distractors", help="'retriever' (top hits without the answer, as the paper) or 'random' (appendix B)."),
    seed: int = typer.Option(0, "--seed", help="Seed of random distractors."),
    out: Path = typer.Option(..., "--out", help="Output folder; one nq-open-{k}_total_documents_gold_at_{p}.jsonl.gz per position."),
) -> None:
    """Gold-position sweep files in the paper's format and naming."""
    from experiments.data.store import write_jsonl
    from experiments.protocols.corpus import load_litm_corpus
    from experiments.protocols.litm import add_distractors, litm_qa_record, with_gold_at
    from experiments.protocols.litm import distractors as distractors_of

    if distractors not in ("retriever", "random"):
        raise UserError(f"--distractors must be 'retriever' or 'random', got {distractors!r}")
    position_list = parse_ints(positions, "--positions")
    outside = [p for p in position_list if not 0 <= p < num_docs]
    if outside:
        raise UserError(f"--positions {outside} are outside 0..{num_docs - 1} for --num-docs {num_docs}")
    questions, corpus = load_litm_corpus(data_path(litm))
    if any(len(distractors_of(q)) < num_docs - 1 for q in questions):
        questions = add_distractors(questions, corpus, num_docs, retriever=retriever, method=distractors, seed=seed)
    for p in position_list:
        path = Path(out) / f"nq-open-{num_docs}_total_documents_gold_at_{p}.jsonl.gz"
        write_jsonl((litm_qa_record(with_gold_at(q, p, num_docs)) for q in questions), path)
        typer.echo(f"wrote {len(questions)} examples to {path}")
