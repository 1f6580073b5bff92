"""From a run directory to report cells: one (task, grid point) each, scored with the task's metric.

Everything here is a pure function of the run directory's logs
(``predictions.jsonl``, ``failures.jsonl``) and its grid manifest, so a
report can be rebuilt at any time and every cell names the config hash whose
prediction lines it averages.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compressors.registry import is_reference
from core.errors import UnknownComponentError, UserError
from experiments.data.records import Failure, Prediction, RecordKey, Trace
from experiments.data.store import RunDir
from experiments.inference.paired import mean_interval, paired_delta
from experiments.inference.results import MIN_PAIRS, MeanInterval, PairedDelta
from experiments.inference.verdicts import TOO_FEW, NonInferiority, noninferiority_test
from experiments.scoring.registry import ItemScore, aggregate
from experiments.tasks.benchmark import benchmark_of
from experiments.tasks.specs import get_task

# a table of the report: its header and its rows of text, as report.md, tables/*.csv and the view show it
Table = tuple[list[str], list[list[str]]]


@dataclass
class Cell:
    """One (task, config) cell of the report; ``config_hash`` finds its prediction lines."""

    task: str
    category: str
    compressor: str
    reader: str
    config_hash: str
    metric: str
    score: float
    n: int
    n_failed: int
    tokens_in: float
    tokens_out: float
    ratio: float
    reader_tokens_in: float
    reader_tokens_out: float
    cost_usd: float
    latency_s: float
    compress_s: float
    cache_hits: int
    answer_in_context: float | None = None
    # the reader's own truncation: % of the cell's examples whose prompt it cut, and the mean context tokens it saw
    reader_cut_pct: float = 0.0
    tokens_seen: float = 0.0
    buckets: dict[str, float] = field(default_factory=dict)
    by_position: dict[str, float] = field(default_factory=dict)
    by_position_ci: dict[str, list[float]] = field(default_factory=dict)
    delta_vs_full: float | None = None
    delta_paired: float | None = None
    delta_ci95: list[float] | None = None
    n_paired: int = 0
    p_value: float | None = None
    n_clusters: int = 0  # documents (clusters) the cell's examples come from; questions on one document share one
    clusters_paired: int = 0
    # the interval is the cell's 95% confidence sequence at its last look (a run grown with --until-decided)
    sequence: bool = False
    compressor_kind: str = ""
    order: tuple[int, int] = (0, 0)  # (grid point, task) position in the config

    @property
    def paired(self) -> PairedDelta | None:
        """The paired delta with its interval, or ``None`` below ``MIN_PAIRS`` pairs."""
        if self.delta_paired is None or self.delta_ci95 is None:
            return None
        return PairedDelta(self.delta_paired, self.delta_ci95[0], self.delta_ci95[1], self.p_value or float("nan"),
                           self.n_paired, self.clusters_paired)

    @property
    def is_full(self) -> bool:
        """The full-context baseline (by component, so a custom label does not hide it)."""
        return is_reference(self.compressor_kind or self.compressor)


@dataclass
class RunData:
    run_dir: Path
    predictions: list[Prediction]
    failures: list[Failure]
    cells: list[Cell]
    manifest: dict[str, Any]
    largest: dict[str, int] = field(default_factory=dict)  # each task's pool's largest document (grid.json)

    def items(self) -> dict[tuple[str, str], Scores]:
        """Item scores by (task, config hash), then example id: what paired statistics pair on."""
        return item_scores(self.predictions, self.largest)


class Scores(dict[str, float]):
    """One cell's item scores by example id, and the cluster (``Prediction.cluster``) of each example that
    shares its document with others: paired statistics resample and flip whole clusters."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clusters: dict[str, str] = {}
        # the most questions one document of the task's pool holds: fixed before any score, it bounds a
        # document's sum in the betting test (None: the pool could not be read; the sample's largest is used)
        self.largest: int | None = None

    def cluster(self, example_id: str) -> str:
        return self.clusters.get(example_id, example_id)


def item_scores(predictions: Sequence[Prediction],
                largest: Mapping[str, int] | None = None) -> dict[tuple[str, str], Scores]:
    """Item scores by (task, config hash); ``largest``: each task's pool's largest document (``Scores.largest``)."""
    out: dict[tuple[str, str], Scores] = defaultdict(Scores)
    for r in predictions:
        scores = out[(r.task, r.config_hash)]
        scores[r.id] = float(r.score)
        if r.cluster:
            scores.clusters[r.id] = r.cluster
    for (task, _), scores in out.items():
        scores.largest = (largest or {}).get(task)
    return out


def pool_bound(*scores: Mapping[str, float]) -> int | None:
    """The bound on a document's size the tests of these scores take: the largest of their tasks' pools."""
    known = [b for b in (getattr(s, "largest", None) for s in scores) if b]
    return max(known) if known else None


def scores_interval(scores: Mapping[str, float]) -> MeanInterval:
    """One cell's mean score with its 95% interval, over its examples' clusters."""
    ids = list(scores)
    return mean_interval([scores[i] for i in ids], clusters=cluster_keys(ids, scores), max_cluster=pool_bound(scores))


def cluster_keys(ids: Sequence[str], *scores: Mapping[str, float]) -> list[str] | None:
    """The cluster of each id, from whichever ``Scores`` knows it; None when every id is its own cluster."""
    known: dict[str, str] = {}
    for s in scores:
        known.update(getattr(s, "clusters", {}))
    if not any(i in known for i in ids):
        return None
    return [known.get(i, i) for i in ids]


def format_n(n: int, clusters: int) -> str:
    """``12`` when each example is its own document, else ``12 (4 docs)``: how many examples, from how many
    documents (the clusters every interval is drawn over)."""
    return str(n) if clusters in (0, n) else f"{n} ({clusters} docs)"


def _pct(values: Sequence[float]) -> float:
    return round(100 * sum(values) / len(values), 2) if values else float("nan")


def _interval(values: Sequence[float]) -> list[float]:
    mi = mean_interval(values)
    return [mi.lo, mi.hi]


def _mean(values: Any) -> float:
    values = list(values)
    return round(statistics.fmean(values), 4) if values else 0.0


def position_key(meta: dict[str, Any]) -> str | None:
    """Where an example sits in a sweep; closed-book and oracle are settings, not positions
    (an oracle example has its one document at position 0 and must not count there)."""
    if meta.get("protocol") in ("closed_book", "oracle"):
        return str(meta["protocol"])
    for key in ("gold_position", "key_position"):
        if key in meta:
            return str(meta[key])
    return None


def pos_order(key: str) -> tuple[int, int]:
    return (0, int(key)) if key.lstrip("-").isdigit() else (1, 0)


def _category(spec_name: str) -> str:
    try:
        return get_task(spec_name).category
    except (UnknownComponentError, UserError):  # a plugin task no longer installed: still report it
        return ""


def _length_bucket(spec_name: str) -> Callable[[int], str] | None:
    """How the task's benchmark buckets a context length its examples do not bucket themselves (None: it does not)."""
    try:
        return benchmark_of(get_task(spec_name).family).length_bucket
    except (UnknownComponentError, UserError):  # a plugin task no longer installed: still report it
        return None


def compute_cells(predictions: Sequence[Prediction], failures: Sequence[Failure] = (),
                  manifest: dict[str, Any] | None = None, *, largest: Mapping[str, int] | None = None) -> list[Cell]:
    """Aggregate prediction lines into cells with the task's metric (LongBench: 100 x mean, 2 decimals).

    Cells come in config order (grid point, then task) when the manifest is
    given, else in order of first appearance.  ``largest``: each task's pool's
    largest document, the bound of the betting test (``run_pools``).  Two grid points that share a
    label are told apart by their config hash.
    """
    groups: dict[tuple[str, str], list[Prediction]] = defaultdict(list)
    for rec in predictions:
        groups[(rec.task, rec.config_hash)].append(rec)
    recorded = {r.key for r in predictions}
    failed: dict[tuple[str, str], set[str]] = defaultdict(set)
    heads: dict[tuple[str, str], Prediction | Failure] = {}
    for f in failures:
        if f.key not in recorded:
            failed[(f.task, f.config_hash)].add(f.id)
            heads.setdefault((f.task, f.config_hash), f)
    order = _order(manifest, list(groups) + [k for k in failed if k not in groups])
    cells = []
    for key in sorted(set(groups) | set(failed), key=lambda k: order.get(k, (10**6, 10**6))):
        recs = groups.get(key, [])
        head = recs[0] if recs else heads[key]
        spec_name = head.spec_name
        metric = recs[0].metric if recs else ""
        items = [ItemScore(float(r.score), r.score_parts or {}) for r in recs]
        buckets: dict[str, list[float]] = defaultdict(list)
        positions: dict[str, list[float]] = defaultdict(list)
        bucket_of = _length_bucket(spec_name)
        for r in recs:
            meta = r.meta or {}
            if "length_bucket" in meta:
                buckets[str(meta["length_bucket"])].append(float(r.score))
            elif bucket_of is not None:
                buckets[bucket_of(int(r.length or 0))].append(float(r.score))
            pos = position_key(meta)
            if pos is not None:
                positions[pos].append(float(r.score))
        in_context = [bool(r.answer_in_context) for r in recs if r.answer_in_context is not None]
        tok_in = sum(r.tokens_in for r in recs)
        tok_out = sum(r.tokens_out for r in recs)
        cells.append(Cell(
            task=key[0], category=_category(spec_name), compressor=head.compressor, reader=head.reader,
            config_hash=key[1], metric=metric, score=aggregate(metric, items) if items else float("nan"),
            n=len(recs), n_failed=len(failed.get(key, ())), n_clusters=len({r.cluster_key for r in recs}),
            tokens_in=_mean(r.tokens_in for r in recs), tokens_out=_mean(r.tokens_out for r in recs),
            ratio=round(tok_in / tok_out, 3) if tok_out else float("nan"),
            reader_tokens_in=_mean(r.reader_tokens_in for r in recs),
            reader_tokens_out=_mean(r.reader_tokens_out for r in recs),
            cost_usd=round(sum(r.cost_usd for r in recs), 6),
            latency_s=_mean(r.latency_s for r in recs), compress_s=_mean(r.compress_s for r in recs),
            cache_hits=sum(1 for r in recs if r.cached),
            answer_in_context=round(100 * sum(in_context) / len(in_context), 2) if in_context else None,
            reader_cut_pct=_pct([float(r.truncated) for r in recs]) if recs else 0.0,
            tokens_seen=_mean(r.context_seen for r in recs),
            buckets={b: _pct(v) for b, v in sorted(buckets.items())},
            by_position={p: _pct(v) for p, v in sorted(positions.items(), key=lambda kv: pos_order(kv[0]))},
            by_position_ci={p: _interval(v) for p, v in sorted(positions.items(), key=lambda kv: pos_order(kv[0]))},
            compressor_kind=head.compressor_kind, order=order.get(key, (10**6, 10**6)),
        ))
    _disambiguate(cells)
    _attach_deltas(cells, item_scores(predictions, largest))
    return cells


def _order(manifest: dict[str, Any] | None, seen: list[tuple[str, str]]) -> dict[tuple[str, str], tuple[int, int]]:
    if not manifest:
        return {key: (i, 0) for i, key in enumerate(seen)}
    points = {p["config_hash"]: i for i, p in enumerate(manifest.get("points", []))}
    tasks = {t["key"]: i for i, t in enumerate(manifest.get("tasks", []))}
    return {key: (points.get(key[1], 10**6), tasks.get(key[0], 10**6)) for key in seen}


def _disambiguate(cells: list[Cell]) -> None:
    """Two configs with the same (reader, compressor) label get their hash appended, so rows never merge."""
    hashes: dict[tuple[str, str], set[str]] = defaultdict(set)
    for c in cells:
        hashes[(c.reader, c.compressor)].add(c.config_hash)
    for c in cells:
        if len(hashes[(c.reader, c.compressor)]) > 1:
            c.compressor = f"{c.compressor} [{c.config_hash[:6]}]"


def _attach_deltas(cells: list[Cell], items: dict[tuple[str, str], Scores]) -> None:
    """Delta vs the full-context cell of the same reader and task (LongBench Tables 4/5 compare this way),
    and its paired version over the examples both arms scored: interval, n and p-value."""
    full = {(c.task, c.reader): c for c in cells if c.is_full}
    for c in cells:
        base = full.get((c.task, c.reader))
        if base is None or c.is_full:
            continue
        c.delta_vs_full = round(c.score - base.score, 2)
        pd = paired_vs(items.get((base.task, base.config_hash), {}), items.get((c.task, c.config_hash), {}))
        c.n_paired, c.clusters_paired = pd.n, pd.clusters
        if pd.n:
            c.delta_paired = pd.delta
        if pd.n >= MIN_PAIRS:
            c.delta_ci95, c.p_value = [pd.lo, pd.hi], pd.p_value


def paired_vs(base: Mapping[str, float], other: Mapping[str, float], strata: dict[str, str] | None = None, *,
              scale: float = 100.0) -> PairedDelta:
    """``other - base`` on the example ids both hold (in id order), optionally stratified, over the examples'
    clusters when ``base`` or ``other`` is a ``Scores`` that knows them; ``scale`` as ``paired_delta`` takes it
    (100: scores in points; 1: seconds or tokens)."""
    ids = sorted(set(base) & set(other))
    return paired_delta([base[i] for i in ids], [other[i] for i in ids],
                        strata=[strata[i] for i in ids] if strata else None, clusters=cluster_keys(ids, base, other),
                        scale=scale, max_cluster=pool_bound(base, other))


def noninferiority_vs(base: Mapping[str, float], other: Mapping[str, float], margin: float,
                      strata: dict[str, str] | None = None, **options: Any) -> NonInferiority:
    """``noninferiority_test`` of ``other`` against ``base`` on the ids both hold, paired and clustered as
    ``paired_vs`` pairs them."""
    ids = sorted(set(base) & set(other))
    if not ids:  # nothing paired (an arm whose every example failed): no test, and the table says why
        nan = float("nan")
        return NonInferiority(nan, -math.inf, math.inf, nan, nan, 0, 0, TOO_FEW)
    return noninferiority_test([base[i] for i in ids], [other[i] for i in ids], margin,
                               strata=[strata[i] for i in ids] if strata else None,
                               clusters=cluster_keys(ids, base, other),
                               **{"max_cluster": pool_bound(base, other), **options})


def merged_scores(parts: Sequence[tuple[str, Mapping[str, float]]]) -> tuple[Scores, dict[str, str]]:
    """Several cells' scores as one ``Scores`` keyed ``"{stratum}\x1f{id}"`` (clusters kept), and the stratum of
    each key: what a paired average over tasks (or lengths) pairs and resamples within."""
    merged, strata = Scores(), {}
    for stratum, scores in parts:
        known = getattr(scores, "clusters", {})
        for ex_id, value in scores.items():
            key = f"{stratum}\x1f{ex_id}"
            merged[key], strata[key] = value, stratum
            if ex_id in known:
                merged.clusters[key] = known[ex_id]
    merged.largest = pool_bound(*(scores for _, scores in parts))
    return merged, strata


def load_run(run_dir: str | Path) -> RunData:
    """A run directory's records, read without writing, and its cells."""
    files = RunDir(Path(run_dir)).require()
    preds, fails, manifest = files.predictions.read(), files.failures.read(), files.manifest()
    # each task's largest document, recorded in grid.json from its source before any score (a grid.json without
    # it falls back to its sample's largest document: valid only given the sizes drawn)
    largest = {t["key"]: int(t["largest_document"]) for t in manifest.get("tasks", []) if "largest_document" in t}
    cells = compute_cells(preds, fails, manifest, largest=largest)
    with_confidence_sequences(cells, files.path)
    return RunData(files.path, preds, fails, cells, manifest, largest)


def with_confidence_sequences(cells: Sequence[Cell], run_dir: Path) -> None:
    """A run grown with ``--until-decided`` decided each cell by its looks, so every cell it tested shows its
    95% confidence sequence at its last look (Δ, interval, n; no fixed-n p-value): a fixed-n interval of the
    same data ignores the looks and says more than they allow, and beside the looks table it contradicted
    them.  Every table that prints ``cell.paired`` then prints the run's verdicts, ``*`` where the sequence
    excludes 0."""
    from experiments.data.provenance import read_manifest

    state = read_manifest(run_dir).get("sequential") if (run_dir / "manifest.json").is_file() else None
    latest = {(row["task"], row["config_hash"]): row for seen in (state or {}).get("looks", [])
              for row in seen["cells"] if "lo" in row}
    for cell in cells:
        row = latest.get((cell.task, cell.config_hash))
        if row is not None and not cell.is_full:
            cell.delta_paired, cell.delta_ci95, cell.p_value = row["delta"], [row["lo"], row["hi"]], float("nan")
            cell.n_paired, cell.clusters_paired, cell.sequence = row["n"], row["n_clusters"], True


def load_traces(run_dir: str | Path) -> dict[RecordKey, Trace]:
    """The trace of every prediction by its key (a trace written twice across a resume: the last wins)."""
    return {t.key: t for t in RunDir(Path(run_dir)).traces.read()}
