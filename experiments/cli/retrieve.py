"""``ctxcomp chunk`` (split a text file) and ``ctxcomp retrieve`` (index a corpus, retrieve top-k per query,
measure recall@k / MRR): the two commands that look at indexing on its own."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from core.errors import UserError
from core.registry import ComponentSpec
from experiments.cli.errors import parse_overrides, user_errors
from experiments.tasks.commands import data_path
from indexes.chunking import make_chunker


def retriever_spec(name: str, params: list[str]) -> dict:
    """``--retriever NAME --retriever-param KEY=VALUE ...`` as a component section (values parsed as YAML)."""
    return {"name": name, "params": parse_overrides(params)}


def shard_plan(executor: str, ray_address: Optional[str], workers: Optional[int], shards: Optional[Path],
               shard_size: Optional[int], root: Path, retrievers: list):
    """The ``ShardPlan`` the encoding options ask for, or None (no ``--shards``, local: index as always).

    ``root``: where a shard folder named by corpus and encoder goes when ``--shards`` names none;
    ``retrievers``: the sections the plan would serve, at least one of which must be dense.  Bad options,
    a retriever that is not dense, a missing Ray and an unreachable ``--ray-address`` are one-line errors
    here, before any work.
    """
    from experiments.run.examples import is_dense
    from experiments.run.sharding import ShardPlan
    from retrievers.shards import DEFAULT_SHARD_SIZE

    if executor not in ("local", "ray"):
        raise UserError(f"--executor must be 'local' or 'ray', got {executor!r}")
    if executor == "local":
        ray_only = [("--ray-address", ray_address), ("--workers", workers)]
        given = [name for name, value in ray_only + ([("--shard-size", shard_size)] if shards is None else [])
                 if value is not None]
        if given:
            raise UserError(f"{' and '.join(given)} need(s) --executor ray" + (" or --shards DIR" if shards is None else ""))
        if shards is None:
            return None
    sections = [ComponentSpec.parse(r, "retriever") for r in retrievers]
    if not any(is_dense(r) for r in sections):
        names = ", ".join(repr(r.name) for r in sections)
        raise UserError(f"--shards and --executor ray need a dense retriever (contriever, minilm, "
                        f"sentence-transformers, openai, ...); got {names or 'none'}")
    if workers is not None and workers < 1:
        raise UserError(f"--workers must be >= 1, got {workers}")
    if ray_address is not None and not ray_address.strip():
        raise UserError("--ray-address is empty; give 'auto', HOST:PORT or ray://HOST:PORT")
    if shard_size is not None and shard_size < 1:
        raise UserError(f"--shard-size must be >= 1, got {shard_size}")
    if executor == "ray":  # a missing Ray or an unreachable address: one line now, not after the corpus loads
        from experiments.run.ray_pool import check_address, import_ray

        import_ray()
        if ray_address is not None:
            check_address(ray_address)
    return ShardPlan(folder=shards, root=root, executor=executor, address=ray_address, workers=workers,
                     shard_size=DEFAULT_SHARD_SIZE if shard_size is None else shard_size, progress=True)


@user_errors
def retrieve(
    corpus: Optional[Path] = typer.Argument(None, help="JSONL corpus: id, text[, title] (held in memory); a data name, .tsv[.gz] or .parquet corpus is searched from disk as with --corpus."),
    queries: Optional[Path] = typer.Argument(None, help="JSONL queries: id, query[, answers]."),
    litm: Optional[Path] = typer.Option(None, "--litm", help="A Lost-in-the-Middle file (.jsonl or .jsonl.gz) as corpus and queries: a path, or a data name "
                                       "from `ctxcomp data list` (lost_in_the_middle/nq-open-oracle)."),
    retriever: str = typer.Option("bm25", "--retriever", help="bm25, contriever, mcontriever, minilm, openai, ... or pkg.mod:Class."),
    retriever_param: List[str] = typer.Option([], "--retriever-param", help="KEY=VALUE for the retriever (YAML values; repeatable)."),
    k: int = typer.Option(20, "-k", "--k", "--top-k", help="Hits kept per query."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the top-k per query here as JSONL (default: stdout unless --json)."),
    json_out: bool = typer.Option(False, "--json", help="Print recall@1/5/20 (those up to k), recall@k and MRR as one JSON object."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Use only the first N queries (the corpus stays whole)."),
    shards: Optional[Path] = typer.Option(None, "--shards", help="Dense retrievers: keep the corpus embeddings in this folder as .npy shards (resumable after a kill); default with --executor ray: a folder per corpus and encoder under $CTXCOMP_CACHE_DIR/shards."),
    shard_size: Optional[int] = typer.Option(None, "--shard-size", help="Passages per shard (default 50000)."),
    executor: str = typer.Option("local", "--executor", help="Where the corpus is encoded into shards: 'local' (this process) or 'ray' (a pool of encoder actors)."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Join this Ray cluster ('auto', HOST:PORT or ray://HOST:PORT); default: start a local Ray instance."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Ray encoder actors (default: one per GPU, else the cluster's CPUs)."),
    corpus_name: Optional[str] = typer.Option(None, "--corpus", help="A passage corpus searched from disk: a data name (wikipedia-dpr-100w) or a .tsv[.gz], .jsonl[.gz] or .parquet file (id, text[, title]); the queries come from --litm or QUERIES."),
    index: Optional[str] = typer.Option(None, "--index", help="With --corpus and a dense retriever: a FAISS index_factory string ('IVF4096,SQ8', 'OPQ64,IVF16384,PQ64'), flat, hnsw, ivf or auto."),
    nprobe: Optional[int] = typer.Option(None, "--nprobe", help="Inverted lists searched per query (IVF indexes); default: the index's search plan, chosen when it is built to find 0.95 of exact search's top-20 (recall_target)."),
    ef_search: Optional[int] = typer.Option(None, "--ef-search", help="HNSW's efSearch."),
    rerank: Optional[int] = typer.Option(None, "--rerank", help="Re-score this many candidates exactly against the full vectors (memory-mapped shards); default: the search plan's."),
    max_index_memory: Optional[str] = typer.Option(None, "--max-index-memory", help="Refuse (naming a string that fits) an index whose build needs more, e.g. 8GB; `--index auto` picks within it."),
    max_encode_time: Optional[str] = typer.Option(None, "--max-encode-time", help="Refuse, after timing the encoder on a first batch and before encoding the rest, when encoding the corpus is projected to take longer, e.g. 2h, 30m, 1.5d."),
    corpus_quoting: Optional[str] = typer.Option(None, "--corpus-quoting", help="A .tsv corpus's fields: csv (the default; DPR's format: a field holding a quote is csv-quoted) or none (plain tab-separated lines, a quote is just a character)."),
    shard_dtype: Optional[str] = typer.Option(None, "--shard-dtype", help="float32 (default) or float16: the embedding shards on disk (float16 halves them: 32 GB for Wikipedia at 768-d)."),
) -> None:
    """Retrieve the top-k passages per query and report answer recall."""
    from experiments.protocols.large_corpus import corpus_on_disk, open_corpus_search
    from experiments.protocols.retrieval import (
        litm_corpus_and_queries,
        litm_questions,
        load_corpus,
        load_queries,
        retrieve_all,
        summarize,
    )
    from experiments.run.sharding import default_shard_root
    from retrievers.contract import Checked
    from retrievers.registry import make_retriever

    if k <= 0:
        raise UserError(f"-k must be positive, got {k}")
    if limit is not None and limit < 1:
        raise UserError(f"--limit must be >= 1, got {limit}")
    if out is not None and not out.parent.is_dir():  # found now, not after an hour of indexing
        raise UserError(f"--out {out}: the folder {out.parent} does not exist")
    if out is not None and out.is_dir():
        raise UserError(f"--out {out} is a directory; name the JSONL file to write")
    spec = retriever_spec(retriever, retriever_param)
    plan = shard_plan(executor, ray_address, workers, shards, shard_size, default_shard_root(), [spec])
    index_options = {"index": index, "nprobe": nprobe, "ef_search": ef_search, "rerank": rerank,
                     "max_index_memory": max_index_memory, "max_encode_time": max_encode_time,
                     "shard_dtype": shard_dtype}
    big = corpus_on_disk(corpus_name, corpus, queries, litm, index_options)
    if big is not None:
        qs = litm_questions(data_path(litm), limit) if litm is not None else load_queries(big[1], limit)
        engine = open_corpus_search(big[0], spec, index=index_options, quoting=corpus_quoting,
                                    pool_for=plan.encoder_pool if plan is not None else None)
    elif litm is not None:
        if corpus is not None or queries is not None:
            raise UserError("give either --litm FILE or CORPUS QUERIES, not both")
        chunks, qs = litm_corpus_and_queries(data_path(litm), limit)
    else:
        if corpus is None or queries is None:
            raise UserError("give CORPUS and QUERIES (JSONL files), or --litm FILE")
        chunks, qs = load_corpus(corpus), load_queries(queries, limit)
    if big is None and plan is None:
        built = make_retriever(spec)
        print(f"indexing {len(chunks)} passages with {built.label} ...", file=sys.stderr)
        engine = Checked.index(built, chunks)
    elif big is None:
        engine = Checked(plan.index(spec, chunks), chunks)
    sink = open(out, "w", encoding="utf-8") if out is not None else (None if json_out else sys.stdout)

    def write(q, hits, rel) -> None:
        if sink is None:
            return
        record = {"id": q.id, "query": q.text,
                  "hits": [{"id": h.chunk.doc_id, "title": h.chunk.title, "score": h.score, "rank": h.rank,
                            "has_answer": r} for h, r in zip(hits, rel)]}
        sink.write(json.dumps(record, ensure_ascii=False) + "\n")

    try:
        relevance = retrieve_all(engine, qs, k, write)
    finally:
        if sink is not None and sink is not sys.stdout:
            sink.close()
    if json_out:
        typer.echo(json.dumps(summarize(relevance, k)))

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
