"""``ctxcomp chunk``: split a text file and print one JSON line per chunk (text and character offsets)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from core.errors import UserError
from experiments.cli.errors import user_errors
from indexes.chunking import make_chunker


def _read_text(file: Path) -> str:
    if str(file) == "-":
        return sys.stdin.read()
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"{file}: not UTF-8 text ({err.reason} at byte {err.start})") from None


@user_errors
def chunk(
    file: Path = typer.Argument(..., help="A UTF-8 text file, or '-' for stdin."),
    chunker: str = typer.Option("longbench", "--chunker", help="longbench, words, tokens, recursive, sentences, or pkg.mod:Class."),
    size: int = typer.Option(500, "--size", help="Chunk size in the chunker's units (words, tokens, characters)."),
    overlap: int = typer.Option(0, "--overlap", help="Units shared by neighbouring chunks (not for longbench)."),
    compat: bool = typer.Option(False, "--compat", help="longbench only: reproduce the released splitter byte for byte."),
) -> None:
    """Split FILE into chunks; print {"chunk_id", "text", "start", "end"} per line."""
    params = {"compat": True} if compat else {}
    if compat and chunker != "longbench":
        raise UserError("--compat applies only to --chunker longbench")
    splitter = make_chunker(chunker, size, overlap=overlap, **params)
    doc_id = "stdin" if str(file) == "-" else file.stem
    text = _read_text(file)
    if not text.strip():
        raise UserError(f"{file}: the file is empty (or only whitespace); nothing to chunk")
    for c in splitter.split(text, doc_id):
        typer.echo(json.dumps({"chunk_id": c.chunk_id, "text": c.text, "start": c.start, "end": c.end}, ensure_ascii=False))
