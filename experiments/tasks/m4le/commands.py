"""M4LE's ``ctxcomp build m4le``: long instances built from short ones, in M4LE's format."""
from __future__ import annotations

from pathlib import Path

import typer

from core.errors import UserError
from experiments.tasks.commands import data_path, parse_ints


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
