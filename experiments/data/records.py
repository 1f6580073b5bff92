"""The records of ctxcomp: the example every loader produces, and the typed lines of a run directory."""
from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, TypeVar

from core.errors import UserError
from indexes.types import Passage

R = TypeVar("R")


@dataclass(frozen=True)
class Example:
    """One evaluation item.

    ``context`` is the full long text, byte for byte as published (for
    multi-document tasks, the passages rendered in order).  ``passages`` is
    set for multi-document tasks so compressors can treat each passage as a
    unit.  ``source`` is ``"path:line"`` so every score traces back to input.
    ``cluster`` names the source document the example shares with others (L-Eval's several questions on one
    document; the positions of one swept question): paired statistics resample and sign-flip whole clusters,
    because questions on one document are not independent.  Left empty, it is the example's own id, and an
    example derived with ``dataclasses.replace`` (a sweep position, a chunked copy) stays in its parent's cluster.
    """

    id: str
    task: str
    query: str
    context: str
    answers: tuple[str, ...]
    passages: tuple[Passage, ...] = ()
    lang: str = "en"
    all_classes: tuple[str, ...] = ()
    length: int = 0
    source: str = ""
    meta: dict = field(default_factory=dict, compare=False)
    cluster: str = ""

    def __post_init__(self) -> None:
        if not self.cluster:
            object.__setattr__(self, "cluster", self.id)


def document_cluster(text: str) -> str:
    """The cluster key of every question asked on ``text``: a digest of the document itself, so questions that
    share a document share a cluster whichever record, line or file they come from."""
    import hashlib

    return "doc:" + hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def render_litm_documents(passages: Iterable[Passage]) -> str:
    """Documents as Lost in the Middle's QA prompt shows them: ``Document [i](Title: t) text``, 1-based, one per line."""
    return "\n".join(f"Document [{i}](Title: {p.title}) {p.text}" for i, p in enumerate(passages, start=1))


def render_litm_kv(pairs: Iterable[str]) -> str:
    """Key-value pairs (each ``"key": "value"``) as Lost in the Middle renders its JSON object."""
    return "{" + ",\n ".join(pairs) + "}"


_SWEPT_ID = re.compile(r"@(?:gold|key)(\d+)$")


def swept_id(base_id: str, kind: str, position: int) -> str:
    """The id of ``base_id`` asked with its gold document (``kind="gold"``) or key (``"key"``) at ``position``:
    one convention, so the report can pair the positions of one question."""
    return f"{base_id}@{kind}{position}"


def split_swept_id(example_id: str) -> tuple[str, int] | None:
    """``("q7", 4)`` for ``"q7@gold4"`` or ``"q7@key4"``; ``None`` for an id no sweep made."""
    m = _SWEPT_ID.search(example_id)
    return (example_id[: m.start()], int(m.group(1))) if m else None


def budget_text(budget: dict[str, Any] | None) -> str:
    """A budget axis point as rows name it: ``"512"`` (tokens), ``"1/4"`` (a ratio of each context); ``""``: none."""
    if not budget:
        return ""
    if budget.get("tokens") is not None:
        return str(int(budget["tokens"]))
    return f"1/{float(budget['ratio']):g}"


BUDGET_MARK = " @"  # a row on a budget axis is labelled "<line> @<budget>": truncate(middle) @512


def budget_row_label(line: str, budget: dict[str, Any] | None) -> str:
    """The row label of a compressor line at one budget (the line alone when there is none)."""
    return f"{line}{BUDGET_MARK}{budget_text(budget)}" if budget else line


# -- the records of a run directory -----------------------------------------------------------------------------------
#
# One line of predictions.jsonl, traces.jsonl, failures.jsonl or judgements.jsonl is one of the dataclasses below,
# written with its fields in declaration order and read back by ``parse_record``, which names the file, the line and
# the missing field when a line is not what it should be.  Fields added after a run was written have defaults, so an
# older run directory still reads.


class RunFileError(UserError):
    """A line of a run directory's log is not a record: ``FILE:LINE: missing field 'score'``."""


RecordKey = tuple[str, str, str]


@dataclass(kw_only=True, slots=True)
class Keyed:
    """The fields that key a prediction, trace or failure line and name it in reports."""

    task: str
    spec: str = ""
    id: str
    config_hash: str
    compressor: str
    compressor_kind: str = ""
    reader: str

    @property
    def key(self) -> RecordKey:
        """(task, example id, config hash): what a resumed run skips and a report pairs on."""
        return (self.task, self.id, self.config_hash)

    @property
    def spec_name(self) -> str:
        """The task spec behind ``task`` (a task ``label`` may rename it)."""
        return self.spec or self.task

    def as_dict(self) -> dict[str, Any]:
        """The JSON object of one line, fields in declaration order (optional empty ones left out)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in _OMITTED_WHEN_EMPTY.get(type(self).__name__, ()):
            if out[name] is None or (not out[name] and name not in _KEPT_WHEN_ZERO):
                del out[name]
        return out


@dataclass(kw_only=True, slots=True)
class Prediction(Keyed):
    """One scored prediction: what the reader saw and said, its score, and what it cost."""

    query: str = ""
    prompt_hash: str = ""
    prediction: str
    answers: list[str] = field(default_factory=list)
    metric: str
    score: float
    answer_in_context: bool | None = None
    length: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    budget: int | None = None  # the token budget the compressor was given (None: none)
    over_budget: bool = False  # tokens_out > budget (only a best-effort compressor may)
    tokens_seen: int | None = None  # context tokens left after the reader's own truncation (None: tokens_out)
    reader_tokens_in: int = 0
    reader_tokens_out: int = 0
    truncated: bool = False
    latency_s: float = 0.0
    compress_s: float = 0.0
    # the compressor's own model work (compressors.base.ModelWork); compress_s counts cache-served work at the
    # time it took when it was made, like latency_s
    compress_calls: int = 0
    compress_cache_hits: int = 0
    compress_tokens_in: int = 0
    compress_tokens_out: int = 0
    compress_model_s: float = 0.0
    embed_calls: int = 0
    embed_texts: int = 0
    embed_hits: int = 0
    cost_usd: float = 0.0
    cached: bool = False
    retries: int = 0
    kept_chunks: list[str] = field(default_factory=list)
    chunk_scores: list[float | None] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    score_parts: dict[str, float] = field(default_factory=dict)
    # the example's cluster (``Example.cluster``) when it is not the example's own id; empty: a cluster of one
    cluster: str = ""
    # a growing run's (``--until-decided``) look that read this prediction, and the document it belongs to, so
    # anyone can check which data each look saw; None and "" in a fixed-n run
    look: int | None = None
    document: str = ""

    @property
    def cluster_key(self) -> str:
        """The cluster this prediction's example belongs to (its own id when it shares no document)."""
        return self.cluster or self.id

    @property
    def context_seen(self) -> int:
        """Tokens of the kept context the reader saw: ``tokens_out`` less what its own truncation cut."""
        return self.tokens_out if self.tokens_seen is None else self.tokens_seen


@dataclass(kw_only=True, slots=True)
class Trace(Keyed):
    """A compressor's intermediates for one prediction (ranking with scores, summaries, kept text).

    ``kept_spans`` is what the compressor said it kept (``CompressedContext.kept_spans``): ``[start, end]``
    character spans of the example's context, which the view highlights; None where the text is rewritten, or
    the trace was written before compressors said it (the line then has no such key)."""

    compressor_identity: str = ""
    kept_chunks: list[str] = field(default_factory=list)
    trace: dict[str, Any] = field(default_factory=dict)
    kept_spans: list[list[int]] | None = None


# failure kinds (the exception's name, as a failure's reason gives it first) that fail again on every resume: a
# compressor's refusal (a budget below the best chunk, no query) and a request the server rejected; the others
# (remote faults after their retries) may succeed
NOT_FIXED_BY_RESUME = ("CompressionError", "RequestRejected")


@dataclass(kw_only=True, slots=True)
class Failure(Keyed):
    """An example that could not be predicted (compression refused, a remote fault after retries)."""

    stage: str
    reason: str
    retries: int = 0
    time: float = 0.0

    @property
    def kind(self) -> str:
        """What the reason names first: the exception's name (``CompressionError``), as ``stats.json`` counts it."""
        return self.reason.split(":", 1)[0][:80]

    @property
    def resume_repeats(self) -> bool:
        """Whether ``ctxcomp run --resume`` would only fail again (``NOT_FIXED_BY_RESUME``): change the config."""
        return self.kind in NOT_FIXED_BY_RESUME


@dataclass(kw_only=True, slots=True)
class Judgement:
    """A judge's verdict on one prediction, under one protocol, judge and opponent."""

    task: str
    id: str
    config_hash: str
    compressor: str
    reader: str
    protocol: str
    judge: str
    against: str
    status: str
    value: float | None = None
    parts: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None

    @property
    def key(self) -> tuple[str, ...]:
        return (self.task, self.id, self.config_hash, self.protocol, self.judge, self.against)

    as_dict = Keyed.as_dict


# fields a line leaves out when they hold nothing (a run without a budget axis or compressor models writes none)
_OMITTED_WHEN_EMPTY = {"Prediction": ("score_parts", "cluster", "budget", "over_budget", "tokens_seen", "compress_calls",
                                      "compress_cache_hits", "compress_tokens_in", "compress_tokens_out",
                                      "compress_model_s", "embed_calls", "embed_texts", "embed_hits", "look",
                                      "document"),
                      "Trace": ("kept_spans",)}
# a reader that cut the whole context saw 0 tokens of it, and a compressor may keep nothing: neither is "none"
_KEPT_WHEN_ZERO = ("tokens_seen", "kept_spans")
_REQUIRED: dict[type, tuple[str, ...]] = {}
TEXT_FIELDS = ("task", "id", "config_hash", "compressor", "reader")


def _required(cls: type) -> tuple[str, ...]:
    if cls not in _REQUIRED:
        _REQUIRED[cls] = tuple(f.name for f in fields(cls)
                               if f.default is MISSING and f.default_factory is MISSING)  # type: ignore[misc]
    return _REQUIRED[cls]


def parse_record(cls: type[R], obj: Any, where: str) -> R:
    """``obj`` (one parsed JSON line) as a ``cls`` record; a ``RunFileError`` naming ``where`` and the field otherwise.

    Keys the record does not know (written by a newer ctxcomp) are ignored.
    """
    check_record(cls, obj, where)
    names = _field_names(cls)
    return cls(**{k: v for k, v in obj.items() if k in names})


def record_key(cls: type, obj: Any, where: str) -> tuple[str, ...]:
    """The key of ``obj`` as a ``cls`` record would have it, after the same checks, without building the record
    (a run that continues needs only the keys of what it holds)."""
    check_record(cls, obj, where)
    return tuple(obj[name] for name in record_shape(cls)[2])


_KEY_FIELDS = {"Keyed": ("task", "id", "config_hash"),
               "Judgement": ("task", "id", "config_hash", "protocol", "judge", "against")}


def check_record(cls: type, obj: Any, where: str) -> None:
    """A ``RunFileError`` naming ``where`` and the field unless ``obj`` can be a ``cls`` record."""
    if not isinstance(obj, dict):
        raise RunFileError(f"{where}: not a JSON object but {type(obj).__name__}")
    missing = [name for name in _required(cls) if name not in obj]
    if missing:
        raise RunFileError(f"{where}: missing field {', '.join(map(repr, missing))}")
    for name in TEXT_FIELDS:
        if name in obj and not isinstance(obj[name], str):
            raise RunFileError(f"{where}: field {name!r} must be a string, got {obj[name]!r}")
    score = obj.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
        raise RunFileError(f"{where}: field 'score' must be a number, got {score!r}")


@functools.lru_cache(maxsize=None)
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


@functools.lru_cache(maxsize=None)
def record_shape(cls: type) -> tuple[frozenset[str], frozenset[str], tuple[str, ...]]:
    """(required fields, all fields, key fields) of a record type, for readers that check many lines at once."""
    return frozenset(_required(cls)), _field_names(cls), _KEY_FIELDS.get(cls.__name__, _KEY_FIELDS["Keyed"])
