"""``ctxcomp curve``: retriever recall@k against reader accuracy@k on a Lost in the Middle QA file (paper Fig. 11).

A thin front to an ordinary run: the questions get the top passages of one
index over the whole file's passages, the ``top_k`` compressor keeps the
first k for every k, and the run directory holds per-question records
(``ctxcomp show``), resumes after a kill, and gets curve.csv/.json/.png.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from core.errors import UserError
from experiments.cli.errors import plain_output, print_table, user_errors
from experiments.cli.retrieve import retriever_spec, shard_plan
from experiments.tasks.commands import data_path, parse_ints

DEFAULT_KS = "1,2,5,10,20,30,40,50"


def curve_config(litm: Path, retriever: dict, readers: list[str], ks: list[int], limit: int | None,
                 query_aware: bool, max_new_tokens: int | None = None, margin: float | None = None,
                 corpus: str | None = None) -> dict:
    """The run config a curve stands for (``max_new_tokens``: the task's own when None; ``margin``: the
    saturation test's, in points, the config's default when None; ``corpus``: a passage corpus searched from
    disk instead of the file's own passages)."""
    task = {"name": "nq_multidoc", "label": "nq_open", "path": str(litm), "limit": limit, "query_aware": query_aware,
            "open_domain": {"retriever": retriever, "depth": max(ks), **({"corpus": corpus} if corpus else {})}}
    if max_new_tokens is not None:
        task["max_new_tokens"] = max_new_tokens
    config = {
        "name": "curve",
        "tasks": [task],
        "compressors": [{"name": "top_k", "params": {"k": sorted(set(ks))}}],
        "readers": [{"name": r} for r in readers],
    }
    return config if margin is None else {**config, "margin": margin}


def curve_shard_plan(cfg, out: Path, executor: str, ray_address: Optional[str], workers: Optional[int],
                     shards: Optional[Path], shard_size: Optional[int]):
    """The shard plan for the config's open-domain tasks (None: index as always); shard folders go under
    ``OUT/shards`` unless ``--shards`` names one, which then serves one corpus and encoder only."""
    from experiments.run.examples import is_dense

    retrievers = [t.open_domain.retriever.spec for t in cfg.tasks if t.open_domain is not None]
    plan = shard_plan(executor, ray_address, workers, shards, shard_size, out / "shards", retrievers)
    if plan is not None and shards is not None:
        dense = {(t.open_domain.corpus or t.data or t.path, t.open_domain.retriever.model_dump_json()) for t in cfg.tasks
                 if t.open_domain is not None and is_dense(t.open_domain.retriever.spec)}
        if len(dense) > 1:
            raise UserError(f"--shards names one folder, but the config has {len(dense)} dense open-domain indexes "
                            f"(corpus x encoder); drop --shards (with --executor ray each gets a folder under {out / 'shards'})")
    return plan


@user_errors
def curve(
    litm: Optional[Path] = typer.Option(None, "--litm", help="Lost in the Middle QA file, a path or a data name "
                                       "(lost_in_the_middle/nq-open-oracle); its passages are the corpus."),
    retriever: str = typer.Option("bm25", "--retriever", help="bm25, minilm, contriever, ... or a plugin's import path pkg.mod:Class."),
    retriever_param: List[str] = typer.Option([], "--retriever-param", help="KEY=VALUE for the retriever (YAML values; repeatable)."),
    reader: Optional[List[str]] = typer.Option(None, "--reader", help="Reader name or import path pkg.mod:Class; repeat for several readers; default smollm2."),
    ks: str = typer.Option(DEFAULT_KS, "--ks", help="Comma-separated cut-offs k."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Use only the first N questions (the corpus stays whole)."),
    query_aware: bool = typer.Option(False, "--query-aware", help="Query-aware contextualization (question before the documents too)."),
    max_new_tokens: Optional[int] = typer.Option(None, "--max-new-tokens", help="Tokens the reader may generate (default: the task's, 100)."),
    margin: Optional[float] = typer.Option(None, "--margin", help="Saturation: the smallest k not worse than the best k by more than this many points (paired non-inferiority; default 5)."),
    out: Path = typer.Option(..., "--out", help="Run directory; curve.csv, curve.json and plots/curve_<task>_<retriever>_<readers>.png land there."),
    config: Optional[Path] = typer.Option(None, "--config", help="A run config with an open_domain task instead of the options above."),
    plain: bool = typer.Option(False, "--plain", help="Plain Markdown tables (the default when stdout is not a terminal)."),
    shards: Optional[Path] = typer.Option(None, "--shards", help="Dense retrievers: keep the corpus embeddings in this folder as .npy shards (resumable after a kill); default with --executor ray: a folder per corpus and encoder under OUT/shards."),
    shard_size: Optional[int] = typer.Option(None, "--shard-size", help="Passages per shard (default 50000)."),
    executor: str = typer.Option("local", "--executor", help="Where the corpus is encoded into shards: 'local' (this process) or 'ray' (a pool of encoder actors). The reader runs here either way."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Join this Ray cluster ('auto', HOST:PORT or ray://HOST:PORT); default: start a local Ray instance."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Ray encoder actors (default: one per GPU, else the cluster's CPUs)."),
    corpus: Optional[str] = typer.Option(None, "--corpus", help="Retrieve from this passage corpus instead of the file's own passages: a data name (wikipedia-dpr-100w) or a .tsv[.gz] or .parquet file (id, text[, title]), searched from disk."),
    index: Optional[str] = typer.Option(None, "--index", help="With --corpus and a dense retriever: a FAISS index_factory string, flat, hnsw, ivf or auto."),
    nprobe: Optional[int] = typer.Option(None, "--nprobe", help="Inverted lists searched per query (IVF indexes); default: the index's search plan, chosen when it is built to find 0.95 of exact search's top-20 (recall_target)."),
    ef_search: Optional[int] = typer.Option(None, "--ef-search", help="HNSW's efSearch."),
    rerank: Optional[int] = typer.Option(None, "--rerank", help="Re-score this many candidates exactly against the full vectors; default: the search plan's."),
    max_index_memory: Optional[str] = typer.Option(None, "--max-index-memory", help="Refuse an index whose build needs more (e.g. 8GB), naming a string that fits."),
    max_encode_time: Optional[str] = typer.Option(None, "--max-encode-time", help="Refuse, after timing the encoder on a first batch and before encoding the rest, when encoding the corpus is projected to take longer, e.g. 2h."),
    corpus_quoting: Optional[str] = typer.Option(None, "--corpus-quoting", help="A .tsv corpus's fields: csv (the default; DPR's format) or none (plain tab-separated lines, a quote is just a character)."),
    shard_dtype: Optional[str] = typer.Option(None, "--shard-dtype", help="float32 (default) or float16: the embedding shards on disk (float16 halves them: 32 GB for Wikipedia at 768-d)."),
) -> None:
    """Index the file's passages once, give every question its top-k, and chart recall@k against accuracy@k."""
    from experiments.cli.run import execute
    from experiments.protocols.large_corpus import with_index_options
    from experiments.report.curve import curve_rows, curve_table, saturation
    from experiments.run.config import load_config, parse_config

    if config is not None:
        if max_new_tokens is not None:
            raise UserError("--max-new-tokens goes with --litm; with --config set the task's max_new_tokens there")
        cfg = load_config(config)
        if margin is not None:
            cfg = cfg.model_copy(update={"margin": margin})
    else:
        if litm is None:
            raise UserError("missing --litm FILE (or --config RUN_CONFIG)")
        if limit is not None and limit < 1:
            raise UserError(f"--limit must be >= 1, got {limit}")
        if max_new_tokens is not None and max_new_tokens < 1:
            raise UserError(f"--max-new-tokens must be >= 1, got {max_new_tokens}")
        if margin is not None and not margin >= 0:
            raise UserError(f"--margin must be >= 0 points, got {margin}")
        k_list = parse_ints(ks, "--ks")
        if min(k_list) < 1:
            raise UserError(f"--ks must be positive, got {ks}")
        section = with_index_options(retriever_spec(retriever, retriever_param), corpus, index=index, nprobe=nprobe,
                                     ef_search=ef_search, rerank=rerank, max_index_memory=max_index_memory,
                                     shard_dtype=shard_dtype, corpus_quoting=corpus_quoting,
                                     max_encode_time=max_encode_time)
        cfg = parse_config(curve_config(data_path(litm), section, reader or ["smollm2"], k_list, limit, query_aware,
                                        max_new_tokens, margin, corpus), "ctxcomp curve options")
    plan = curve_shard_plan(cfg, out, executor, ray_address, workers, shards, shard_size)
    result = execute(cfg, out, plain=plain_output(plain), shards=plan, summary=False)
    rows = curve_rows(result.data)
    if not rows:
        raise UserError(f"{out}: the run has no open-domain task cut by top_k, so there is no curve to draw")
    print_table(*curve_table(rows, saturation(result.data)), plain=plain_output(plain))
    plots = sorted((out / "plots").glob("curve*")) if (out / "plots").is_dir() else []
    typer.echo(f"wrote {out / 'curve.csv'}, {out / 'curve.json'}, {out / 'report.md'}" + "".join(f", {p}" for p in plots)
               + f" ({result.stats.wall_s:.0f} s)")
