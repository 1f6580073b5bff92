"""``ctxcomp show``: everything behind one prediction -- the example, the kept context, the trace, the prompt, the answer."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.errors import UserError
from experiments.data.records import Trace
from experiments.data.store import RunDir
from experiments.report.cells import load_traces

MAX_RANKING = 20


def _block(title: str, body: str) -> str:
    return f"--- {title} ---\n{body.rstrip()}\n"


def _trace_text(trace: Trace) -> str:
    """The compressor's intermediates, readable: rankings with scores, summaries chunk by chunk."""
    lines = []
    inner: dict[str, Any] = trace.trace or {}
    ranking = inner.get("ranking")
    if ranking:
        kept = set(trace.kept_chunks or ())
        lines.append(f"ranking ({len(ranking)} units, * = kept):")
        for i, (unit, score) in enumerate(ranking[:MAX_RANKING]):
            score_text = "" if score is None else f"{score:.4f}"
            lines.append(f"  {i + 1:>3}. {'*' if unit in kept else ' '} {unit}  {score_text}")
        if len(ranking) > MAX_RANKING:
            lines.append(f"  ... {len(ranking) - MAX_RANKING} more")
    for s in inner.get("summaries") or ():
        lines.append(f"summary of {s['chunk_id']} ({s.get('tokens_out', '?')} tokens): {s['summary']}")
    rest = {k: v for k, v in inner.items() if k not in ("ranking", "summaries")}
    if rest:
        lines.append(json.dumps(rest, ensure_ascii=False, default=str))
    lines.append(f"compressor: {trace.compressor_identity}")
    return "\n".join(lines)


def show_example(run_dir: str | Path, example_id: str, *, config_hash: str | None = None) -> str:
    """A readable dump of every prediction (or failure) of ``example_id`` in the run, one block per config."""
    files = RunDir(Path(run_dir)).require()
    preds = [r for r in files.predictions.read() if r.id == example_id]
    fails = [f for f in files.failures.read() if f.id == example_id]
    if config_hash:
        preds = [r for r in preds if r.config_hash.startswith(config_hash)]
        fails = [f for f in fails if f.config_hash.startswith(config_hash)]
    if not preds and not fails:
        raise UserError(f"{files.path}: no prediction or failure for example id {example_id!r}"
                        + (f" and config {config_hash!r}" if config_hash else ""))
    traces = load_traces(files.path)
    out = []
    for r in preds:
        head = (f"=== {r.task} | {r.compressor} | {r.reader} | config {r.config_hash} | "
                f"example {r.id} ({r.source}) ===\n")
        parts = [head, _block("question", r.query), _block("answers", "\n".join(r.answers))]
        parts.append(_block("kept", f"{len(r.kept_chunks)} unit(s): {', '.join(r.kept_chunks) or '(the whole context)'}; "
                                    f"tokens {r.tokens_in} -> {r.tokens_out}"))
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
