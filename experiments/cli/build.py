"""``ctxcomp build kv|m4le|sweep|ruler``: write data in the published formats, so the ordinary loaders read it back."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from core.errors import UserError
from experiments.cli.errors import data_path, parse_ints, user_errors


@user_errors
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


@user_errors
def build_m4le(
    source: Path = typer.Option(..., "--source", help="Short-context QA file, a path or a data name "
                                "(lost_in_the_middle/nq-open-oracle)."),
    target_words: str = typer.Option("1000,2000,4000,8000", "--target-words", help="Comma-separated length buckets in words."),
    ability: str = typer.Option("semantic_single", "--ability", help="explicit_single, semantic_single, explicit_multi, semantic_multi or global; comma-separated for several."),
    n: int = typer.Option(50, "--n", help="Instances per bucket and ability."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    out: Path = typer.Option(..., "--out", help="Output .jsonl or .jsonl.gz (M4LE format)."),
) -> None:
    """M4LE-style long instances built from short ones, one record per line."""
    from experiments.data.store import write_jsonl
    from experiments.tasks.loading import load_examples
    from experiments.tasks.m4le.build import build_m4le as build

    if n < 1:
        raise UserError(f"--n must be >= 1, got {n}")
    examples = load_examples(data_path(source))
    records = [
        record
        for target in parse_ints(target_words, "--target-words")
        for name in (a.strip() for a in ability.split(",") if a.strip())
        for record in build(examples, target_words=target, ability=name, n_instances=n, seed=seed)
    ]
    typer.echo(f"wrote {len(records)} records to {write_jsonl(records, out)}")


@user_errors
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


@user_errors
def build_ruler(
    tasks: str = typer.Option("niah_single,niah_multikey,niah_multivalue,niah_multiquery,vt,cwe,fwe,qa", "--tasks",
                              help="Comma-separated RULER tasks: niah_single, niah_multikey, niah_multivalue, "
                                   "niah_multiquery, vt, cwe, fwe, qa."),
    lengths: str = typer.Option("4096,8192,16384", "--lengths", help="Comma-separated target lengths in tokens."),
    tokenizer: str = typer.Option("words", "--tokenizer", help="Whose tokens the lengths count: reader:NAME (that "
                                  "reader's own tokens, e.g. reader:smollm2, as its window and budgets count them; "
                                  "read without loading the model where the reader can), tiktoken:NAME, a Hugging "
                                  "Face tokenizer id or folder, or words (the default: LongBench words, not any "
                                  "model's tokens)."),
    n: int = typer.Option(20, "--n", help="Examples per task and length."),
    seed: int = typer.Option(0, "--seed", help="Random seed; the same seed gives the same records."),
    haystack: Optional[Path] = typer.Option(None, "--haystack", help="A text file for the essay haystack (default: "
                                            "the project's own prose)."),
    noise: bool = typer.Option(False, "--noise", help="Use RULER's repeated noise sentences for the needle tasks."),
    qa_source: Optional[Path] = typer.Option(None, "--qa-source", help="QA file with passages for the qa task "
                                             "(e.g. nq-open-oracle.jsonl.gz)."),
    out: Path = typer.Option(..., "--out", help="Output folder; one ruler_<task>.jsonl per task, every length in it."),
) -> None:
    """RULER-style tasks at target lengths in a tokenizer's tokens, offline and seeded (docs/protocols.md)."""
    from experiments.data.store import write_jsonl
    from experiments.tasks.loading import load_examples
    from experiments.tasks.ruler.generate import generate, token_counter

    names = [t.strip() for t in tasks.split(",") if t.strip()]
    if "qa" in names and qa_source is None:
        raise UserError("--tasks qa needs --qa-source (a QA file whose passages pad the question)")
    essay = None
    if haystack is not None:
        try:
            essay = haystack.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise UserError(f"cannot read --haystack {haystack}: {err}") from None
    qa = load_examples(data_path(qa_source)) if qa_source is not None and "qa" in names else []
    count = token_counter(tokenizer)
    for name in names:
        records = generate(name, parse_ints(lengths, "--lengths"), n, count=count, seed=seed,
                           haystack="noise" if noise else "essay", essay_text=essay, qa_examples=qa)
        typer.echo(f"wrote {len(records)} records to {write_jsonl(records, Path(out) / f'ruler_{name}.jsonl')}")
