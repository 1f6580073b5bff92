"""LLM-judged evaluation of a run's predictions: L-Eval's pairwise protocol and a HELMET-style rubric.

ROUGE and F1 judge open-ended answers badly; L-Eval reports pairwise
win-rates judged by GPT-4 and HELMET replaces ROUGE with model-based scores.
Both protocols here take any reader as the judge (in practice an
OpenAI-compatible endpoint or fleet) and its prompts from
``experiments/judge/prompts/`` (written out in docs/metrics.md):

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
  supports), value their F1; a task naming HELMET's rubric (``judge:``) gets
  HELMET's three requests instead, word for word with their few-shot
  examples, read as HELMET reads them (``experiments.tasks.helmet.metrics``).

Verdicts are parsed strictly: an output without exactly one verdict, or
whose JSON lacks a field or holds a value out of range, is a failed
judgement, recorded with its reason and left out of the rate -- never a tie.
A judge that cannot be reached after its retries is a failed judgement too.
Judging is a run of its own over a run directory: it takes the directory's
lock, appends to ``judgements.jsonl`` (one line per prediction, protocol,
judge and opponent), and asks the judge through the generation cache, where
each answer is kept as soon as it arrives; a re-run asks nothing the judge
has answered and resumes where a killed run stopped.  An answer that does not
parse is not kept in the cache, so the next ``ctxcomp judge`` asks again.
``report/`` only aggregates ``judgements.jsonl`` (``experiments.report.judged``).  This module runs the
judging; what is asked and how answers are parsed is ``experiments.judge.protocols``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from core.errors import UserError
from core.progress import progress_bar
from core.registry import ComponentSpec
from experiments.data.records import Judgement, Prediction
from experiments.data.store import RunDir
from experiments.judge.protocols import (
    PROTOCOLS,
    Unparseable,
    _check_precision,
    _helmet_object,
    _kind,
    _parse_precision,
    check_fields,
    parse_keypoints,
    parse_scores,
    parse_verdict,
    prompt,
    protocol_label,
)
from experiments.run.driver import exclusive
from experiments.run.plan import check_key_files
from experiments.tasks.prompts import fill_template
from experiments.tasks.specs import get_task
from readers.base import GenerationRequest, Reader
from readers.cache import CachedReader
from readers.registry import READERS, make_reader

CUT = "the judge's window cut the request (give the judge a larger max_context)"
REFERENCE = "reference"
T = TypeVar("T")

MAX_NEW_TOKENS = 1024
BATCH = 16


class Answer(NamedTuple):
    """What the judge said to one request (``text``), or why it said nothing (``error``)."""

    text: str | None
    error: str | None
    request: GenerationRequest


@dataclass
class Judged:
    """One prediction's judgement: its value in [0, 1] or the reason it failed."""

    record: Prediction
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

    def ask(self, prompts: Sequence[tuple[str | None, str]], max_new_tokens: int | None = None,
            whole: bool = False) -> list[Answer]:
        """The judge's answer to each (system, user) prompt, in order (``max_new_tokens``: the judge's by default).

        ``whole``: a prompt the judge reader had to cut to its window is no answer (a protocol whose requests
        must reach the judge word for word).
        """
        tokens = max_new_tokens or self.max_new_tokens
        requests = [GenerationRequest(user, max_new_tokens=tokens, temperature=0.0, system=system)
                    for system, user in prompts]
        return [Answer(None, CUT, r) if whole and g.truncated else
                Answer(g.text if g.ok else None, None if g.ok else (g.error or "the judge failed"), r)
                for g, r in zip(self.reader.generate(requests), requests)]

    def parse(self, answer: Answer, parser: Callable[[str], T]) -> T:
        """``parser(answer.text)``; an answer that does not parse is dropped from the generation cache, so the
        next ``ctxcomp judge`` asks again instead of reading the same unusable answer back."""
        if answer.error is not None:
            raise Unparseable(answer.error)
        try:
            return parser(answer.text or "")
        except Unparseable:
            self.reader.forget(answer.request)
            raise

    # -- pairwise ---------------------------------------------------------------
    def pairwise(self, items: Sequence[tuple[Prediction, str]], *, single_order: bool = False) -> list[Judged]:
        """Each (record, other answer) judged in both orders; the record's prediction is the first answer.

        A record whose one order failed is a failed judgement, unless ``single_order`` accepts one order.
        """
        system, user = prompt("pairwise_system"), prompt("pairwise_user")
        prompts = []
        for rec, other in items:
            reference = rec.answers[0] if rec.answers else ""
            for a, b in ((rec.prediction, other), (other, rec.prediction)):
                prompts.append((system, fill_template(user, question=rec.query, reference=reference,
                                                      answer_a=a, answer_b=b)))
        answers = self.ask(prompts)
        out = []
        for i, (rec, _) in enumerate(items):
            verdicts, reasons = [], []
            for order, answer in enumerate(answers[2 * i: 2 * i + 2]):
                try:
                    v = self.parse(answer, parse_verdict)
                except Unparseable as err:
                    reasons.append(f"order {order + 1}: {err}")
                    continue
                mine = "A" if order == 0 else "B"
                verdicts.append(0.5 if v == "C" else float(v == mine))
            parts = {"verdicts": verdicts, "failed_orders": reasons}
            if not verdicts or (reasons and not single_order):
                out.append(Judged(rec, None, parts, "; ".join(reasons)))
            else:
                out.append(Judged(rec, sum(verdicts) / len(verdicts), parts))
        return out

    # -- score ------------------------------------------------------------------
    def score_qa(self, records: Sequence[Prediction]) -> list[Judged]:
        template = prompt("score_qa")
        answers = self.ask([(None, fill_template(template, question=r.query, answers="; ".join(r.answers),
                                                 prediction=r.prediction)) for r in records])
        out = []
        for rec, answer in zip(records, answers):
            try:
                s = self.parse(answer, lambda text: parse_scores(text, {"fluency": (0, 1), "correctness": (0, 3)}))
            except Unparseable as err:
                out.append(Judged(rec, reason=str(err)))
                continue
            out.append(Judged(rec, s["fluency"] * s["correctness"] / 3, dict(s)))
        return out

    def score_summaries(self, records: Sequence[Prediction]) -> list[Judged]:
        references = list(dict.fromkeys(r.answers[0] if r.answers else "" for r in records))
        listed = self.ask([(None, fill_template(prompt("keypoints"), reference=ref)) for ref in references])
        keypoints: dict[str, list[str] | str] = {}
        for ref, answer in zip(references, listed):
            try:
                keypoints[ref] = self.parse(answer, parse_keypoints)
            except Unparseable as err:
                keypoints[ref] = err.args[0] if answer.error is not None else f"key points: {err}"
        out: list[Judged | None] = [None] * len(records)
        asks, where = [], []
        for i, rec in enumerate(records):
            points = keypoints[rec.answers[0] if rec.answers else ""]
            if isinstance(points, str):
                out[i] = Judged(rec, reason=points)
                continue
            numbered = "\n".join(f"{n}. {p}" for n, p in enumerate(points, 1))
            asks.append((None, fill_template(prompt("score_recall"), keypoints=numbered, n_keypoints=str(len(points)),
                                             prediction=rec.prediction)))
            asks.append((None, fill_template(prompt("score_precision"), reference=rec.answers[0],
                                             prediction=rec.prediction)))
            where.append((i, len(points)))
        answers = self.ask(asks)
        for j, (i, n_points) in enumerate(where):
            rec = records[i]
            try:
                recall = self.parse(answers[2 * j], lambda text: parse_scores(text, {"recall": (0, n_points)}))
                p = self.parse(answers[2 * j + 1], _parse_precision)
                recall_share, precision = recall["recall"] / n_points, p["precision"] / p["sentence_count"]
            except Unparseable as err:
                out[i] = Judged(rec, reason=str(err))
                continue
            f1 = 2 * recall_share * precision / (recall_share + precision) if recall_share + precision else 0.0
            out[i] = Judged(rec, f1, {"recall": recall_share, "precision": precision, "keypoints": n_points})
        return out  # type: ignore[return-value]


    def score_helmet(self, records: Sequence[Prediction], *, examples: bool = True) -> list[Judged]:
        """HELMET ``scripts/eval_gpt4_summ.py`` ``check_metrics``: fluency, recall of the record's key points and
        precision against its expert summary, each output read by HELMET's ``parse_json``, then checked strictly.

        A judgement that fails only the strict check, where HELMET would have scored it (a recall above the
        number of key points, say: docs/metrics.md lists the cases), keeps ``helmet_scores: true`` and HELMET's
        numbers (``helmet``) in its parts, so the report counts such failures and HELMET's mean can be rebuilt.
        ``examples=False`` drops HELMET's few-shot examples from the requests.
        """
        from experiments.tasks.helmet.metrics import (
            HELMET_JUDGE_MAX_NEW_TOKENS,
            helmet_reading,
            keypoints,
            rubric_prompts,
            rubric_score,
        )

        asks = [(None, text) for rec in records for text in rubric_prompts(
            prompt, get_task(rec.spec_name).judge or "", rec.prediction, rec.meta, rec.answers, examples=examples)]
        answers, out = self.ask(asks, max_new_tokens=HELMET_JUDGE_MAX_NEW_TOKENS, whole=True), []
        for i, rec in enumerate(records):
            n, trio = len(keypoints(rec.meta)), answers[3 * i: 3 * i + 3]
            try:
                f, r, p = [self.parse(answer, _helmet_object) for answer in trio]
            except Unparseable as err:
                out.append(Judged(rec, reason=str(err)))
                continue
            problems = []
            for name, answer, check in (("fluency", trio[0], lambda: check_fields(f, {"fluency": (0, 1)})),
                                        ("recall", trio[1], lambda: check_fields(r, {"recall": (0, n)})),
                                        ("precision", trio[2], lambda: _check_precision(p, allow_empty=True))):
                try:
                    check()
                except Unparseable as err:
                    problems.append(f"{name}: {err}")
                    self.reader.forget(answer.request)  # as parse() does: the next run asks again
            if problems:
                helmet = helmet_reading(f, r, p, n)
                parts = {"helmet_scores": helmet is not None, **({"helmet": helmet} if helmet is not None else {})}
                out.append(Judged(rec, None, parts, "; ".join(problems)))
                continue
            parts = rubric_score(f["fluency"], r["recall"], n, p["precision"], p["sentence_count"])
            out.append(Judged(rec, parts["f1"], {**parts, "keypoints": n}))
        return out


def _opponents(predictions: Sequence[Prediction], against: str) -> Callable[[Prediction], str | None]:
    """The other answer each prediction is compared with: the reference, another arm, or another run's."""
    if against == REFERENCE:
        return lambda rec: rec.answers[0] if rec.answers else None
    if against.startswith("arm:"):
        arm = against[4:]
        by = {(r.task, r.id, r.reader): r.prediction for r in predictions if r.compressor == arm}
        if not by:
            raise UserError(f"--against {against}: this run has no arm labelled {arm!r}")
        return lambda rec: None if rec.compressor == arm else by.get((rec.task, rec.id, rec.reader))
    other = {(r.task, r.id, r.reader, r.compressor): r.prediction for r in RunDir(Path(against)).require().predictions.read()}
    return lambda rec: other.get((rec.task, rec.id, rec.reader, rec.compressor))


@dataclass
class JudgeStats:
    judged: int = 0
    already_done: int = 0
    failed: int = 0
    unmatched: int = 0


def judge_run(run_dir: str | Path, judge: Any, *, protocol: str = "pairwise", against: str = REFERENCE,
              single_order: bool = False, helmet_examples: bool = True,
              reader_factory: Callable[..., Reader] = make_reader, progress: bool = True) -> JudgeStats:
    """Judge every prediction of a run not judged yet (successfully) by this judge, protocol and opponent.

    ``single_order``: a pairwise judgement with one order unusable still counts (by default it is a failure).
    ``helmet_examples=False``: HELMET's rubric is asked without its few-shot examples, recorded as
    ``score-no-examples``.
    """
    if protocol not in PROTOCOLS:
        raise UserError(f"unknown judge protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
    if protocol == "score" and against != REFERENCE:
        raise UserError("the score protocol rates each prediction against its references; --against is for pairwise")
    files = RunDir(Path(run_dir)).require()
    spec = ComponentSpec.parse(judge, "judge")
    READERS.check(spec)  # a typo costs seconds, not a model load
    check_key_files(spec.params, files.path)
    with exclusive(files.path):
        predictions = files.predictions.repair()
        log = files.judgements
        opponent = _opponents(predictions, against) if protocol == "pairwise" else None
        j = Judge(reader_factory(spec.name, **spec.params))
        try:
            done = {r.key for r in log.repair() if r.status == "ok"}
            stats = JudgeStats()
            todo: list[tuple[Prediction, str | None]] = []
            for rec in predictions:
                if (*rec.key, protocol_label(protocol, rec.spec_name, helmet_examples), j.identity, against) in done:
                    stats.already_done += 1
                    continue
                other = opponent(rec) if opponent is not None else None
                if opponent is not None and other is None:
                    stats.unmatched += 1
                    continue
                todo.append((rec, other))
            with progress_bar(len(todo), f"judge ({protocol})", enabled=progress) as bar:
                for lo in range(0, len(todo), BATCH):
                    batch = todo[lo: lo + BATCH]
                    if protocol == "pairwise":
                        results = j.pairwise(batch, single_order=single_order)  # type: ignore[arg-type]
                    else:
                        kinds = [_kind(rec.spec_name) for rec, _ in batch]
                        pick = lambda k: [rec for (rec, _), kind in zip(batch, kinds) if kind == k]  # noqa: E731
                        results = j.score_helmet(pick("helmet"), examples=helmet_examples) + \
                            j.score_summaries(pick("summary")) + j.score_qa(pick("qa"))
                    for res in results:
                        rec = res.record
                        log.append(Judgement(task=rec.task, id=rec.id, config_hash=rec.config_hash,
                                             compressor=rec.compressor, reader=rec.reader,
                                             protocol=protocol_label(protocol, rec.spec_name, helmet_examples),
                                             judge=j.identity, against=against,
                                             status="ok" if res.reason is None else "failed", value=res.value,
                                             parts=res.parts, reason=res.reason))
                        stats.judged += res.reason is None
                        stats.failed += res.reason is not None
                    bar.update(len(batch))
        finally:
            j.reader.close()
    return stats


__all__ = ["Judge", "JudgeStats", "judge_run"]
