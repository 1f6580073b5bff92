"""Score by context length, the "effective length" picture: per task and arm the score at each length with its
interval, each compressed arm minus full at each length (paired on the example, and pooled over a category's
tasks), and LongBench v2's ``result.py`` table (overall, by difficulty, by length)."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from experiments.inference.paired import mean_interval
from experiments.inference.results import MIN_PAIRS, PairedDelta, format_delta
from experiments.report.cells import Cell, Scores, Table, format_n, merged_scores, paired_vs


def _length_order(keys: Sequence[str]) -> list[str]:
    """Lengths in increasing order: numbers numerically (RULER's tokens), LongBench v2's short/medium/long, else as met."""
    if all(k.isdigit() for k in keys):
        return sorted(keys, key=int)
    named = [k for k in ("short", "medium", "long") if k in keys]
    return named if len(named) == len(keys) else list(keys)


def length_label(key: str) -> str:
    """``16384`` as ``16k`` (a power-of-two multiple of 1,024), other keys as they are."""
    return f"{int(key) // 1024}k" if key.isdigit() and int(key) % 1024 == 0 else key


def length_items(cells: Sequence[Cell], predictions: Sequence) -> dict[tuple[str, str], dict[str, Scores]]:
    """Item scores by (task, config hash), then length bucket (``meta["length_bucket"]``), then example id."""
    keys = {(c.task, c.config_hash) for c in cells}
    out: dict[tuple[str, str], dict[str, Scores]] = defaultdict(lambda: defaultdict(Scores))
    for r in predictions:
        bucket = (r.meta or {}).get("length_bucket")
        if bucket is not None and (r.task, r.config_hash) in keys:
            scores = out[(r.task, r.config_hash)][str(bucket)]
            scores[r.id] = float(r.score)
            if r.cluster:
                scores.clusters[r.id] = r.cluster
    return out


def length_tables(cells: Sequence[Cell], predictions: Sequence) -> tuple[Table, Table]:
    """Score by context length per task and arm, ``score [95% interval] (n)``; and each compressed arm minus full
    context at each length, paired on the example, with its interval and n, per task and pooled over the tasks of
    one category (stratified by task).  The deltas' last column pools every length, since a few examples per
    length rarely resolve a difference on their own: it holds the same pairs as the scores table's cell (one task)
    or its category average (tasks pooled, stratified by task), so it prints the same interval as they do.
    Only tasks with two or more lengths."""
    items = length_items(cells, predictions)
    by_task: dict[str, list[str]] = defaultdict(list)
    for (task, _), buckets in items.items():
        by_task[task] += [b for b in buckets if b not in by_task[task]]
    by_task = {t: _length_order(b) for t, b in by_task.items() if len(b) > 1}
    lengths = list(dict.fromkeys(b for bs in by_task.values() for b in bs))
    lengths = _length_order(lengths) if len(set(map(str.isdigit, lengths))) == 1 else lengths
    labels = [length_label(k) for k in lengths]
    scores: list[list[str]] = []
    deltas: list[list[str]] = []
    full = {(c.task, c.reader): c for c in cells if c.is_full}
    for c in sorted((c for c in cells if c.task in by_task), key=lambda c: (c.order[1], c.order[0])):
        mine = items.get((c.task, c.config_hash), {})
        row = [c.task, c.reader, c.compressor]
        for k in lengths:
            values = list(mine.get(k, {}).values())
            if not values:
                row.append("")
                continue
            at = mine.get(k, Scores())
            mi = mean_interval(values, clusters=[at.cluster(i) for i in at])
            row.append(f"{mi.mean:.1f} [{mi.lo:.1f}, {mi.hi:.1f}] (n={format_n(mi.n, mi.n_clusters)})")
        scores.append(row)
        base = full.get((c.task, c.reader))
        if base is None or c.is_full:
            continue
        base_items = items.get((base.task, base.config_hash), {})
        deltas.append([c.task, c.reader, f"{c.compressor} - full",
                       *(_length_delta(paired_vs(base_items.get(k, {}), mine.get(k, {}))) for k in lengths),
                       _length_delta(_pooled_pairs([(c.task, base_items, mine)], lengths))])
    # tasks of one category (e.g. the needle tasks) pooled: paired on (task, example), resampled within each task
    pooled: dict[tuple[str, str, str], list[Cell]] = defaultdict(list)
    for c in cells:
        if c.task in by_task and not c.is_full and (c.task, c.reader) in full and c.category:
            pooled[(c.category, c.reader, c.compressor)].append(c)
    for (category, reader, comp), group in pooled.items():
        if len(group) < 2:
            continue
        arms = [(c.task, items.get((c.task, full[(c.task, c.reader)].config_hash), {}),
                 items.get((c.task, c.config_hash), {})) for c in group]
        deltas.append([f"{category} ({len(group)} tasks)", reader, f"{comp} - full",
                       *(_length_delta(_pooled_pairs(arms, [k])) for k in lengths),
                       _length_delta(_pooled_pairs(arms, lengths))])
    header = ["task", "reader", "compressor", *labels]
    return (header, scores), (["task", "reader", "contrast", *labels, "all lengths"], deltas)


def _pooled_pairs(arms: Sequence[tuple[str, Mapping[str, Mapping[str, float]], Mapping[str, Mapping[str, float]]]],
                  lengths: Sequence[str]) -> PairedDelta:
    """Compressed minus full over ``(task, full's items by length, the arm's items by length)``, paired on
    (task, length, example) and stratified by task alone, as the scores table's averages over tasks are: a length
    is a property of the examples a task drew, not a separate test (testing each length at α / K would print a
    second, wider interval for the very pairs of the scores table's cell)."""
    base, keys = merged_scores([(f"{task}\x1f{k}", full_items.get(k, {})) for task, full_items, _ in arms
                                for k in lengths])
    other, _ = merged_scores([(f"{task}\x1f{k}", arm_items.get(k, {})) for task, _, arm_items in arms for k in lengths])
    tasks = {key: stratum.split("\x1f", 1)[0] for key, stratum in keys.items()}
    return paired_vs(base, other, tasks if len(set(tasks.values())) > 1 else None)


def _length_delta(pd: PairedDelta) -> str:
    if pd.n == 0:
        return ""
    return (format_delta(pd) if pd.n >= MIN_PAIRS else f"{pd.delta:+.2f}") + f" (n={format_n(pd.n, pd.clusters)})"
