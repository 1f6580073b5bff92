"""LLM-judged evaluation of a run's predictions: L-Eval's pairwise protocol and a HELMET-style rubric.

ROUGE and F1 judge open-ended answers badly; L-Eval reports pairwise
win-rates judged by GPT-4 and HELMET replaces ROUGE with model-based scores.
Both protocols here take any reader as the judge (in practice an
OpenAI-compatible endpoint or fleet) and its prompts from
``experiments/report/judge_prompts/`` (written out in docs/metrics.md):

- ``pairwise`` (L-Eval, ``Evaluation/llm_eval.py``): the judge sees the
  question, the human reference and two answers and names the better one
  (``[[A]]``, ``[[B]]``, ``[[C]]`` for a tie). Each prediction is compared
  with the reference answer itself, with the same example's prediction in
  another run (``against=RUN_DIR``) or with another arm of this run
  (``against="arm:full"``), asked in both orders to cancel position bias.
  A win counts 1, a tie 0.5, a loss 0; an example's value is the mean of its
  parsed verdicts and the win-rate the mean over examples.
- ``score`` (HELMET): a QA answer gets fluency (0/1) and correctness (0-3),
  value ``fluency * correctness / 3``; a summary gets key-point recall (the
  judge first lists the key points of the reference, then counts those the
  summary states) and precision (sentences of the summary the reference
  supports), value their F1.

Verdicts are parsed strictly: an output without exactly one verdict, or
whose JSON lacks a field or holds a value out of range, is a failed
judgement, recorded with its reason and left out of the rate -- never a tie.
A judge that cannot be reached after its retries is a failed judgement too.
Judgements go to ``judgements.jsonl`` (append-only, one line per prediction,
protocol, judge and opponent); generations are cached, so a re-run asks the
judge nothing it has answered and resumes where a killed run stopped.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from core.errors import UnknownComponentError, UserError
from experiments.data.store import PREDICTIONS, JsonlLog, record_key
from experiments.report.stats import mean_interval
from experiments.tasks.specs import get_task
from readers.base import GenerationRequest, Reader
from readers.cache import CachedReader
from readers.registry import make_reader

JUDGEMENTS = "judgements.jsonl"
PROTOCOLS = ("pairwise", "score")
REFERENCE = "reference"
VERDICT = re.compile(r"\[\[([ABC])\]\]")
JSON_OBJECT = re.compile(r"\{[^{}]*\}")
MAX_NEW_TOKENS = 1024
BATCH = 16


def prompt(name: str) -> str:
    return (files("experiments.report") / "judge_prompts" / f"{name}.txt").read_text(encoding="utf-8")


def fill(template: str, **fields: str) -> str:
    """Replace ``{name}`` for the given fields only; the values (answers, documents) are never formatted."""
    return re.sub(r"\{(\w+)\}", lambda m: str(fields[m.group(1)]) if m.group(1) in fields else m.group(0), template)


class Unparseable(ValueError):
    """The judge answered, but not in the required form."""


def parse_verdict(text: str) -> str:
    """``A``, ``B`` or ``C`` when the output holds exactly one distinct verdict, else ``Unparseable``."""
    found = set(VERDICT.findall(text))
    if not found:
        raise Unparseable("no verdict [[A]], [[B]] or [[C]] in the judge's output")
    if len(found) > 1:
        raise Unparseable(f"conflicting verdicts {sorted(found)} in the judge's output")
    return found.pop()


def parse_scores(text: str, ranges: Mapping[str, tuple[int, int | None]]) -> dict[str, int]:
    """The last JSON object of the output, with every field an integer within its (inclusive) range."""
    objects = JSON_OBJECT.findall(text)
    if not objects:
        raise Unparseable("no JSON object in the judge's output")
    try:
        data = json.loads(objects[-1])
    except json.JSONDecodeError as err:
        raise Unparseable(f"the last JSON object does not parse ({err.msg})") from None
    out = {}
    for key, (lo, hi) in ranges.items():
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise Unparseable(f"field {key!r} is missing or not an integer: {value!r}")
        if value < lo or (hi is not None and value > hi):
            raise Unparseable(f"field {key!r} = {value} is outside {lo}..{hi if hi is not None else ''}")
        out[key] = value
    return out


def parse_keypoints(text: str) -> list[str]:
    """The numbered lines ``1. ...`` of the judge's key-point list (at least one)."""
    points = [m.group(1).strip() for m in re.finditer(r"^\s*\d+[.)]\s+(.+)$", text, flags=re.MULTILINE)]
    if not points:
        raise Unparseable("no numbered key points in the judge's output")
    return points


@dataclass
class Judged:
    """One prediction's judgement: its value in [0, 1] or the reason it failed."""

    record: dict[str, Any]
    value: float | None = None
    parts: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None


class Judge:
    """Asks one judge reader, through the generation cache, and parses what it says."""

    def __init__(self, reader: Reader, max_new_tokens: int = MAX_NEW_TOKENS) -> None:
        self.reader = reader if isinstance(reader, CachedReader) else CachedReader(reader)
        self.max_new_tokens = max_new_tokens

    @property
    def identity(self) -> str:
        return self.reader.identity

    def ask(self, prompts: Sequence[tuple[str | None, str]]) -> list[tuple[str | None, str | None]]:
        """(text, error) per (system, user) prompt, in order."""
        requests = [GenerationRequest(user, max_new_tokens=self.max_new_tokens, temperature=0.0, system=system)
                    for system, user in prompts]
        return [(g.text, None) if g.ok else (None, g.error or "the judge failed") for g in self.reader.generate(requests)]

    # -- pairwise ---------------------------------------------------------------
    def pairwise(self, items: Sequence[tuple[dict[str, Any], str]]) -> list[Judged]:
        """Each (record, other answer) judged in both orders; the record's prediction is the first answer."""
        system, user = prompt("pairwise_system"), prompt("pairwise_user")
        prompts = []
        for rec, other in items:
            reference = rec["answers"][0] if rec["answers"] else ""
            for a, b in ((rec["prediction"], other), (other, rec["prediction"])):
                prompts.append((system, fill(user, question=rec.get("query", ""), reference=reference,
                                             answer_a=a, answer_b=b)))
        answers = self.ask(prompts)
        out = []
        for i, (rec, _) in enumerate(items):
            verdicts, reasons = [], []
            for order, (text, error) in enumerate(answers[2 * i: 2 * i + 2]):
                if error is not None:
                    reasons.append(f"order {order + 1}: {error}")
                    continue
                try:
                    v = parse_verdict(text)
                except Unparseable as err:
                    reasons.append(f"order {order + 1}: {err}")
                    continue
                mine = "A" if order == 0 else "B"
                verdicts.append(0.5 if v == "C" else float(v == mine))
            parts = {"verdicts": verdicts, "failed_orders": reasons}
            if not verdicts:
                out.append(Judged(rec, None, parts, "; ".join(reasons)))
            else:
                out.append(Judged(rec, sum(verdicts) / len(verdicts), parts))
        return out

    # -- score ------------------------------------------------------------------
    def score_qa(self, records: Sequence[dict[str, Any]]) -> list[Judged]:
        template = prompt("score_qa")
        answers = self.ask([(None, fill(template, question=r.get("query", ""), answers="; ".join(r["answers"]),
                                        prediction=r["prediction"])) for r in records])
        out = []
        for rec, (text, error) in zip(records, answers):
            if error is not None:
                out.append(Judged(rec, reason=error))
                continue
            try:
                s = parse_scores(text, {"fluency": (0, 1), "correctness": (0, 3)})
            except Unparseable as err:
                out.append(Judged(rec, reason=str(err)))
                continue
            out.append(Judged(rec, s["fluency"] * s["correctness"] / 3, dict(s)))
        return out

    def score_summaries(self, records: Sequence[dict[str, Any]]) -> list[Judged]:
        references = list(dict.fromkeys(r["answers"][0] if r["answers"] else "" for r in records))
        listed = self.ask([(None, fill(prompt("keypoints"), reference=ref)) for ref in references])
        keypoints: dict[str, list[str] | str] = {}
        for ref, (text, error) in zip(references, listed):
            try:
                keypoints[ref] = error if error is not None else parse_keypoints(text)
            except Unparseable as err:
                keypoints[ref] = f"key points: {err}"
        out: list[Judged | None] = [None] * len(records)
        asks, where = [], []
        for i, rec in enumerate(records):
            points = keypoints[rec["answers"][0] if rec["answers"] else ""]
            if isinstance(points, str):
                out[i] = Judged(rec, reason=points)
                continue
            numbered = "\n".join(f"{n}. {p}" for n, p in enumerate(points, 1))
            asks.append((None, fill(prompt("score_recall"), keypoints=numbered, n_keypoints=str(len(points)),
                                    prediction=rec["prediction"])))
            asks.append((None, fill(prompt("score_precision"), reference=rec["answers"][0], prediction=rec["prediction"])))
            where.append((i, len(points)))
        answers = self.ask(asks)
        for j, (i, n_points) in enumerate(where):
            rec = records[i]
            (r_text, r_err), (p_text, p_err) = answers[2 * j], answers[2 * j + 1]
            try:
                if r_err or p_err:
                    raise Unparseable(r_err or p_err)
                recall = parse_scores(r_text, {"recall": (0, n_points)})["recall"] / n_points
                p = parse_scores(p_text, {"precision": (0, None), "sentence_count": (1, None)})
                if p["precision"] > p["sentence_count"]:
                    raise Unparseable(f"precision {p['precision']} exceeds sentence_count {p['sentence_count']}")
                precision = p["precision"] / p["sentence_count"]
            except Unparseable as err:
                out[i] = Judged(rec, reason=str(err))
                continue
            f1 = 2 * recall * precision / (recall + precision) if recall + precision else 0.0
            out[i] = Judged(rec, f1, {"recall": recall, "precision": precision, "keypoints": n_points})
        return out  # type: ignore[return-value]


def _is_summary(spec_name: str) -> bool:
    try:
        return "summar" in get_task(spec_name).category
    except (UnknownComponentError, UserError):
        return False


def judgement_key(record: Mapping[str, Any]) -> tuple[str, ...]:
    return (*record_key(record), record["protocol"], record["judge"], record["against"])


def _opponents(predictions: Sequence[dict[str, Any]], against: str) -> Callable[[dict[str, Any]], str | None]:
    """The other answer each prediction is compared with: the reference, another arm, or another run's."""
    if against == REFERENCE:
        return lambda rec: rec["answers"][0] if rec["answers"] else None
    if against.startswith("arm:"):
        arm = against[4:]
        by = {(r["task"], r["id"], r["reader"]): r["prediction"] for r in predictions if r["compressor"] == arm}
        if not by:
            raise UserError(f"--against {against}: this run has no arm labelled {arm!r}")
        return lambda rec: None if rec["compressor"] == arm else by.get((rec["task"], rec["id"], rec["reader"]))
    other_dir = Path(against)
    if not (other_dir / PREDICTIONS).is_file():
        raise UserError(f"--against {against}: not a run directory (no {PREDICTIONS})")
    other = {(r["task"], r["id"], r["reader"], r["compressor"]): r["prediction"] for r in JsonlLog(other_dir / PREDICTIONS).recover()}
    return lambda rec: other.get((rec["task"], rec["id"], rec["reader"], rec["compressor"]))


@dataclass
class JudgeStats:
    judged: int = 0
    already_done: int = 0
    failed: int = 0
    unmatched: int = 0


def judge_run(run_dir: str | Path, judge: Any, *, protocol: str = "pairwise", against: str = REFERENCE,
              reader_factory: Callable[..., Reader] = make_reader, progress: bool = True) -> JudgeStats:
    """Judge every prediction of a run not judged yet by this judge, protocol and opponent."""
    if protocol not in PROTOCOLS:
        raise UserError(f"unknown judge protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
    if protocol == "score" and against != REFERENCE:
        raise UserError("the score protocol rates each prediction against its references; --against is for pairwise")
    run_dir = Path(run_dir)
    if not (run_dir / PREDICTIONS).is_file():
        raise UserError(f"{run_dir} holds no {PREDICTIONS}; is it a run directory?")
    from core.registry import ComponentSpec
    from readers.registry import READERS

    spec = ComponentSpec.parse(judge, "judge")
    READERS.check(spec)  # a typo costs seconds, not a model load
    j = Judge(reader_factory(spec.name, **spec.params))
    log = JsonlLog(run_dir / JUDGEMENTS)
    done = {judgement_key(r) for r in log.recover() if r["status"] == "ok"}
    predictions = JsonlLog(run_dir / PREDICTIONS).recover()
    opponent = _opponents(predictions, against) if protocol == "pairwise" else None
    stats = JudgeStats()
    todo = []
    for rec in predictions:
        key = (*record_key(rec), protocol, j.identity, against)
        if key in done:
            stats.already_done += 1
            continue
        if opponent is not None:
            other = opponent(rec)
            if other is None:
                stats.unmatched += 1
                continue
            todo.append((rec, other))
        else:
            todo.append((rec, None))
    from tqdm.auto import tqdm

    with tqdm(total=len(todo), desc=f"judge ({protocol})", unit="ex", disable=not progress) as bar:
        for lo in range(0, len(todo), BATCH):
            batch = todo[lo: lo + BATCH]
            if protocol == "pairwise":
                results = j.pairwise(batch)
            else:
                summaries = [rec for rec, _ in batch if _is_summary(rec.get("spec") or rec["task"])]
                qa = [rec for rec, _ in batch if not _is_summary(rec.get("spec") or rec["task"])]
                results = j.score_summaries(summaries) + j.score_qa(qa)
            for res in results:
                rec = res.record
                log.append({"task": rec["task"], "id": rec["id"], "config_hash": rec["config_hash"],
                            "compressor": rec["compressor"], "reader": rec["reader"], "protocol": protocol,
                            "judge": j.identity, "against": against,
                            "status": "ok" if res.reason is None else "failed", "value": res.value,
                            "parts": res.parts, "reason": res.reason})
                stats.judged += res.reason is None
                stats.failed += res.reason is not None
            bar.update(len(batch))
    j.reader.close()
    return stats


@dataclass
class JudgedCell:
    """A judged rate for one (task, config): the value x 100 with its 95% interval, n and failures."""

    task: str
    reader: str
    compressor: str
    config_hash: str
    protocol: str
    judge: str
    against: str
    value: float
    ci95: tuple[float, float]
    n: int
    n_failed: int


def judged_cells(run_dir: str | Path) -> list[JudgedCell]:
    """Judgement rates per cell (the latest judgement of each prediction wins), 0-100 with 95% intervals."""
    latest: dict[tuple[str, ...], dict[str, Any]] = {}
    for r in JsonlLog(Path(run_dir) / JUDGEMENTS).recover():
        latest[judgement_key(r)] = r
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in latest.values():
        groups[(r["task"], r["config_hash"], r["protocol"], r["judge"], r["against"])].append(r)
    cells = []
    for (task, config_hash, protocol, judge, against), recs in groups.items():
        ok = [float(r["value"]) for r in recs if r["status"] == "ok"]
        mi = mean_interval(ok)
        cells.append(JudgedCell(task, recs[0]["reader"], recs[0]["compressor"], config_hash, protocol, judge, against,
                                mi.mean, (mi.lo, mi.hi), mi.n, len(recs) - len(ok)))
    return cells


def judged_table(cells: Sequence[JudgedCell]) -> tuple[list[str], list[list[str]]]:
    header = ["task", "reader", "compressor", "protocol", "against", "judge", "value [95% CI]", "n", "failed"]
    fmt = lambda c: "—" if not c.n else f"{c.value:.1f} [{c.ci95[0]:.1f}, {c.ci95[1]:.1f}]"  # noqa: E731
    body = [[c.task, c.reader, c.compressor, c.protocol, c.against, c.judge, fmt(c), str(c.n), str(c.n_failed)]
            for c in cells]
    return header, body
