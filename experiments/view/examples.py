"""One example in full: ``ctxcomp show`` as text (``show_example``), and the example data of ``ctxcomp view``:
one block per task (the browser's rows) and one per example (all arms).

A task block holds what the example browser filters on: one row per
prediction or failure with its cell, score, prediction and whether it flipped
against the full-context arm.  An example block holds what one example shows:
the original context (once), and for every arm its kept spans, ranking,
summaries, prompt, prediction, score, judgements, tokens and latency.  Blocks
are parsed by the page only when opened, so a large run stays fast.
"""
from __future__ import annotations

import difflib
import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compressors.registry import is_reference
from core.errors import UserError
from experiments.data.records import Example, Failure, Judgement, Prediction, RecordKey, Trace
from experiments.data.store import RunDir
from experiments.report.cells import Cell, RunData, load_traces
from experiments.view.spans import arm_detail, ranked_units

# An item score at or above this is "right": flips compare right/wrong between the full arm and another arm.
RIGHT = 0.5
MIN_SPAN_REF = 40  # shorter kept spans are written into a prompt as text, not as a reference to the context

# (run directory, task keys) -> (examples by task key and id, a note for each task left without them)
ContextLoader = Callable[[Path, Sequence[str]], tuple[dict[str, dict[str, Example]], dict[str, str]]]
NO_LOADER = "the original contexts were not loaded (`ctxcomp view` reloads them from the run's config)"


@dataclass
class RunSide:
    """One run as the view reads it: its records, its traces, its judgements and its cells' indices in the page."""

    data: RunData
    label: str  # "" for the run viewed, "B" for --against
    cell_index: dict[tuple[str, str], int] = field(default_factory=dict)
    traces: dict[RecordKey, Trace] = field(default_factory=dict)
    judgements: dict[RecordKey, list[Judgement]] = field(default_factory=dict)

    @classmethod
    def load(cls, data: RunData, label: str, first_cell: int) -> "RunSide":
        side = cls(data, label)
        side.cell_index = {(c.task, c.config_hash): first_cell + i for i, c in enumerate(data.cells)}
        side.traces = load_traces(data.run_dir)
        latest = {j.key: j for j in RunDir(data.run_dir).judgements.read()}
        for j in latest.values():
            side.judgements.setdefault((j.task, j.id, j.config_hash), []).append(j)
        return side

    def unresolved_failures(self) -> list[Failure]:
        recorded = {r.key for r in self.data.predictions}
        latest = {f.key: f for f in self.data.failures if f.key not in recorded}
        return list(latest.values())


def flips(data: RunData) -> dict[RecordKey, str]:
    """``"lost"`` where the full-context arm (same task and reader) is right and the arm wrong, ``"gained"``
    for the reverse, keyed by the arm's prediction."""
    full = {(c.task, c.reader): c.config_hash for c in data.cells if c.is_full}
    score = {r.key: float(r.score) for r in data.predictions}
    out: dict[RecordKey, str] = {}
    for r in data.predictions:
        base = full.get((r.task, r.reader))
        if base is None or base == r.config_hash or (r.task, r.id, base) not in score:
            continue
        right_full, right_arm = score[(r.task, r.id, base)] >= RIGHT, float(r.score) >= RIGHT
        if right_full != right_arm:
            out[r.key] = "lost" if right_full else "gained"
    return out


def flip_counts(data: RunData) -> dict[tuple[str, str], dict[str, int]]:
    counts: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: {"lost": 0, "gained": 0})
    for (task, _, config_hash), kind in flips(data).items():
        counts[(task, config_hash)][kind] += 1
    return counts


def encode_prompt(prompt: str, context: str, spans: Sequence[tuple[int, int]]) -> list[Any]:
    """The prompt as text pieces and ``[start, end]`` references into the context (the whole context, or kept
    spans), so a run's prompts do not repeat its contexts; the page joins the pieces back."""
    if not context:
        return [prompt]
    taken: list[tuple[int, int, int, int]] = []  # (prompt start, prompt end, context start, context end)
    candidates = [(0, len(context))] + sorted({(s, e) for s, e in spans if e - s >= MIN_SPAN_REF}, key=lambda x: x[0] - x[1])
    for s, e in candidates:
        text = context[s:e].strip()
        if len(text) < MIN_SPAN_REF:
            continue
        s += len(context[s:e]) - len(context[s:e].lstrip())
        at = prompt.find(text)
        while at >= 0 and any(at < pe and at + len(text) > ps for ps, pe, _, _ in taken):
            at = prompt.find(text, at + 1)
        if at >= 0:
            taken.append((at, at + len(text), s, s + len(text)))
    out: list[Any] = []
    pos = 0
    for ps, pe, cs, ce in sorted(taken):
        if ps > pos:
            out.append(prompt[pos:ps])
        out.append([cs, ce])
        pos = pe
    if pos < len(prompt):
        out.append(prompt[pos:])
    return out


def share_rankings(arms: Sequence[dict[str, Any]], example_id: str) -> list[list[list[Any]]]:
    """Each distinct ranking of the example once (arms that differ only in how many units they keep rank alike):
    rows ``[unit, score, answer-bearing]`` with a unit id ``"<example id>#7"`` written ``"#7"`` and flags as
    1/0; each arm's ``ranking`` becomes the index of its ranking, and which units it kept stays in ``kept_ids``."""
    shared: dict[str, int] = {}
    out: list[list[list[Any]]] = []
    prefix = f"{example_id}#"
    for arm in arms:
        ranking = arm.pop("ranking", None)
        if ranking is None:
            continue
        rows = [[u[len(prefix) - 1:] if u.startswith(prefix) else u,
                 round(score, 4) if isinstance(score, float) else score, None if bearing is None else int(bearing)]
                for u, score, _, bearing in ranking]
        key = json.dumps(rows)
        if key not in shared:
            shared[key] = len(out)
            out.append(rows)
        arm["ranking"] = shared[key]
    return out


def _judgements(items: Sequence[Judgement]) -> list[dict[str, Any]]:
    return [{"protocol": j.protocol, "judge": j.judge, "against": j.against, "status": j.status, "value": j.value,
             "reason": j.reason} for j in items]


def _arm(side: RunSide, files: RunDir, example: Example | None, points: Mapping[str, Any],
         pred: Prediction | None, fail: Failure | None) -> dict[str, Any]:
    rec = pred or fail
    assert rec is not None
    trace = side.traces.get(rec.key)
    prompt_file = files.prompt_path(pred.prompt_hash) if pred is not None and pred.prompt_hash else None
    prompt = prompt_file.read_text(encoding="utf-8") if prompt_file is not None and prompt_file.is_file() else None
    detail = arm_detail(example, pred, trace, points.get(rec.config_hash))
    arm: dict[str, Any] = {"c": side.cell_index.get((rec.task, rec.config_hash)), "run": side.label, **detail}
    if fail is not None:
        arm["failure"] = f"{fail.stage}: {fail.reason}"
        return arm
    assert pred is not None
    if prompt is not None:
        context = example.context if example else ""
        arm["prompt"] = encode_prompt(prompt, context, [(s, e) for s, e, *_ in detail.get("kept", [])])
    arm.update(prediction=pred.prediction, score=pred.score, metric=pred.metric, prompt_hash=pred.prompt_hash,
               tokens_in=pred.tokens_in, tokens_out=pred.tokens_out, reader_tokens_in=pred.reader_tokens_in,
               reader_tokens_out=pred.reader_tokens_out, latency_s=pred.latency_s, compress_s=pred.compress_s,
               cost_usd=pred.cost_usd, truncated=pred.truncated, tokens_seen=pred.context_seen,
               answer_in_context=pred.answer_in_context,
               cached=pred.cached, judgements=_judgements(side.judgements.get(pred.key, [])))
    return arm


def task_blocks(sides: Sequence[RunSide], cells: Sequence[Cell],
                contexts: ContextLoader | None = None) -> tuple[list[dict], dict[str, dict], dict[str, str]]:
    """(one entry per task for the page's index, the blocks by element id, a note per task without contexts)."""
    main = sides[0]
    tasks = list(dict.fromkeys([c.task for c in main.data.cells]))
    examples, notes = contexts(main.data.run_dir, tasks) if contexts else ({}, {t: NO_LOADER for t in tasks})
    flip_of = flips(main.data)
    full_score = {(r.task, r.id, r.reader): float(r.score) for r in main.data.predictions
                  if is_reference(r.compressor_kind or r.compressor)}
    per_side = []
    for side in sides:
        preds: dict[tuple[str, str], list[Prediction]] = defaultdict(list)
        for r in side.data.predictions:
            preds[(r.task, r.id)].append(r)
        fails: dict[tuple[str, str], list[Failure]] = defaultdict(list)
        for f in side.unresolved_failures():
            fails[(f.task, f.id)].append(f)
        points = {p["config_hash"]: p for p in side.data.manifest.get("points", [])}
        per_side.append((side, RunDir(side.data.run_dir), preds, fails, points))
    index, blocks = [], {}
    for t, task in enumerate(tasks):
        ids = list(dict.fromkeys([r.id for r in main.data.predictions if r.task == task]
                                 + [f.id for f in main.unresolved_failures() if f.task == task]))
        rows, ex_list = [], []
        for j, ex_id in enumerate(ids):
            example = examples.get(task, {}).get(ex_id)
            a_preds, a_fails = per_side[0][2].get((task, ex_id), []), per_side[0][3].get((task, ex_id), [])
            head = a_preds[0] if a_preds else None
            ex_list.append({"id": ex_id, "q": head.query if head else (example.query if example else ""),
                            "answers": list(head.answers) if head else list(example.answers if example else ()),
                            "block": f"ex-{t}-{j}"})
            for r in a_preds:
                base = full_score.get((task, ex_id, r.reader))
                row = {"e": j, "c": main.cell_index[(task, r.config_hash)], "s": r.score, "p": r.prediction,
                       "v": flip_of.get(r.key, ""), "d": None if base is None else round(r.score - base, 4)}
                if r.truncated:
                    row["t"] = 1  # the reader's window cut this prompt
                rows.append(row)
            for f in a_fails:
                rows.append({"e": j, "c": main.cell_index.get((task, f.config_hash)), "s": None,
                             "f": f"{f.stage}: {f.reason}"})
            arms = []
            for side, files, preds, fails, points in per_side:
                arms += [_arm(side, files, example, points, r, None) for r in preds.get((task, ex_id), [])]
                arms += [_arm(side, files, example, points, None, f) for f in fails.get((task, ex_id), [])]
            arms.sort(key=lambda a: (a["run"], cells[a["c"]].order if a["c"] is not None else (10**6, 0)))
            blocks[f"ex-{t}-{j}"] = {"context": example.context if example else None,
                                     "note": notes.get(task, "" if example else "example not found in the task's data"),
                                     "source": example.source if example else "", "arms": arms,
                                     "rankings": share_rankings(arms, ex_id)}
        blocks[f"task-{t}"] = {"examples": ex_list, "rows": rows}
        index.append({"name": task, "block": f"task-{t}", "n_rows": len(rows), "n_examples": len(ids),
                      "note": notes.get(task, "")})
    return index, blocks, notes


def failures_by_reason(side: RunSide) -> list[dict[str, Any]]:
    """Unresolved failures grouped by stage and kind of reason (what precedes its first colon, as the run's
    ``stats.json`` counts them), most first, each with one full reason as an example."""
    groups: dict[tuple[str, str], list[Failure]] = defaultdict(list)
    for f in side.unresolved_failures():
        groups[(f.stage, f.kind)].append(f)
    out = [{"stage": stage, "reason": kind, "count": len(fs), "example": fs[0].reason,
            "cells": sorted({c for c in (side.cell_index.get((f.task, f.config_hash)) for f in fs) if c is not None})}
           for (stage, kind), fs in groups.items()]
    return sorted(out, key=lambda g: -g["count"])


def run_files(run_dir: Path) -> dict[str, str]:
    """The run's manifest files as text: config, grid, stats and any other manifest JSON the run wrote."""
    names = ["config.yaml", "grid.json", "stats.json", "manifest.json", "env.json"]
    return {n: (run_dir / n).read_text(encoding="utf-8", errors="replace") for n in names if (run_dir / n).is_file()}


# -- ctxcomp show: everything behind one prediction, as text ------------------------------------------------------

MAX_RANKING = 20


def _block(title: str, body: str) -> str:
    return f"--- {title} ---\n{body.rstrip()}\n"


def _trace_text(trace: Trace) -> str:
    """The compressor's intermediates, readable: rankings with scores, summaries chunk by chunk."""
    lines = []
    inner: dict[str, Any] = trace.trace or {}
    ranking = ranked_units(inner.get("ranking"))
    if ranking:
        kept = set(trace.kept_chunks or ())
        lines.append(f"ranking ({len(ranking)} units, best first" + (", * = kept):" if kept else "):"))
        for i, (unit, score) in enumerate(ranking[:MAX_RANKING]):
            score_text = "" if score is None else f"{score:.4f}"
            lines.append(f"  {i + 1:>3}. {'*' if unit in kept else ' '} {unit}  {score_text}".rstrip())
        if len(ranking) > MAX_RANKING:
            lines.append(f"  ... {len(ranking) - MAX_RANKING} more")
    for s in inner.get("summaries") or ():
        lines.append(f"summary of {s['chunk_id']} ({s.get('tokens_out', '?')} tokens): {s['summary']}")
    shown = ("summaries", "unit_spans") + (("ranking",) if ranking else ())
    rest = {k: v for k, v in inner.items() if k not in shown}
    if rest:
        lines.append(json.dumps(rest, ensure_ascii=False, default=str))
    lines.append(f"compressor: {trace.compressor_identity}")
    return "\n".join(lines)


def _kept_text(r: Prediction) -> str:
    if r.kept_chunks:
        return f"{len(r.kept_chunks)} unit(s): {', '.join(r.kept_chunks)}"
    if is_reference(r.compressor_kind or r.compressor):
        return "the whole context"
    return "no units recorded (this compressor keeps text, not units: see its trace)"


def cut_text(r: Prediction) -> str:
    """What the reader's own truncation did to one prediction's prompt, in words."""
    return (f"cut by the reader's window: it saw {r.context_seen} of the {r.tokens_out} context tokens the "
            f"compressor kept ({r.reader_tokens_in} prompt tokens read)")


def _did_you_mean(example_id: str, ids: set[str]) -> str:
    """The run's ids a mistyped one may mean: those it ends (an id written without its task's prefix, as
    ``natural_question-17-1`` for ``leval_natural_question-17-1``), else the closest spellings."""
    close = sorted(i for i in ids if i.endswith(example_id)) or \
        difflib.get_close_matches(example_id, sorted(ids), n=3, cutoff=0.6)
    return f"; did you mean {', '.join(map(repr, close[:3]))}?" if close else ""


def show_example(run_dir: str | Path, example_id: str, *, config_hash: str | None = None) -> str:
    """A readable dump of every prediction (or failure) of ``example_id`` in the run, one block per config."""
    files = RunDir(Path(run_dir)).require()
    every_pred, every_fail = list(files.predictions.read()), list(files.failures.read())
    preds = [r for r in every_pred if r.id == example_id]
    fails = [f for f in every_fail if f.id == example_id]
    if config_hash:
        preds = [r for r in preds if r.config_hash.startswith(config_hash)]
        fails = [f for f in fails if f.config_hash.startswith(config_hash)]
    if not preds and not fails:
        raise UserError(f"{files.path}: no prediction or failure for example id {example_id!r}"
                        + (f" and config {config_hash!r}" if config_hash else "")
                        + _did_you_mean(example_id, {r.id for r in [*every_pred, *every_fail]}))
    traces = load_traces(files.path)
    out = []
    for r in preds:
        head = (f"=== {r.task} | {r.compressor} | {r.reader} | config {r.config_hash} | "
                f"example {r.id} ({r.source}) ===\n")
        parts = [head, _block("question", r.query), _block("answers", "\n".join(r.answers))]
        parts.append(_block("kept", f"{_kept_text(r)}; tokens {r.tokens_in} -> {r.tokens_out}"))
        if r.truncated:
            parts.append(_block("reader", cut_text(r)))
        trace = traces.get(r.key)
        parts.append(_block("trace", _trace_text(trace) if trace else "(no trace recorded)"))
        prompt_file = files.prompt_path(r.prompt_hash)
        prompt = prompt_file.read_text(encoding="utf-8") if prompt_file.is_file() else \
            f"(not in the run directory: {prompt_file} is missing; the config may have save_prompts: false)"
        parts.append(_block(f"prompt {r.prompt_hash}", prompt))
        parts.append(_block("prediction", r.prediction))
        parts.append(_block("score", f"{r.metric} = {r.score:.4f}"
                                     + ("" if r.answer_in_context is None else
                                        f"; answer in kept context: {r.answer_in_context}")))
        out.append("".join(parts))
    recorded = {r.key for r in preds}
    for f in fails:
        if f.key not in recorded:
            out.append(f"=== {f.task} | {f.compressor} | {f.reader} | config {f.config_hash} | "
                       f"example {f.id}: FAILED at {f.stage} ===\n{f.reason}\n")
    return "\n".join(out)
