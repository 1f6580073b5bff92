"""RULER's ``ctxcomp build ruler``: its tasks written as files at target lengths, which the ordinary loader reads
back by path."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from core.errors import UserError
from experiments.tasks.commands import data_path, parse_ints


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
