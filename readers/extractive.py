"""A model-free, deterministic lexical-overlap reader (the classic sliding-window QA baseline).

It answers with the sentence of the prompt's context that shares the most
question words (stop words dropped), ties broken by the earlier sentence,
trimmed to ``max_new_tokens`` words.  It needs no model and runs in
microseconds, so pipeline tests and quick looks exercise every stage except
a real LLM.

How the question is found: the last occurrence of a question marker
(default ``Question:``, ``Query:``, ``Key:``, ``Instruction:``, ``问题：``;
case-insensitive, anywhere in a line) starts it, and the first answer cue
after it ends it (a line break, ``Answer:``, ``Output:``, ``Corresponding
value:``, ``回答：``, ``Please directly give answer``).  That covers every
shipped template: LongBench's ``Question: {input}\\nAnswer:``, L-Eval's
``... Instruction: {input} Output:``, Lost in the Middle's QA and KV prompts,
M4LE's question before the passages and the query-focused summary prompt.
Without any marker the last non-empty line that is not a bare answer cue is
the question.

Where the answer comes from: when the request marks the context
(``GenerationRequest.context_span``, set by the prompt builder), only the
sentences inside that span are candidates, and the question is looked for in
the rest of the prompt; the task's instructions and template are never an
answer.  An unmarked request (a summarizer's prompt, a hand-written one) falls
back to the prompt without the question.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Sequence

from readers.base import Generation, GenerationRequest, Reader
from readers.tokenizers import WordTokenizer
from readers.truncation import cut_at_stop

DEFAULT_MARKERS = ("Question:", "Query:", "Key:", "Instruction:", "问题：")
_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?。？！；;])\s+|\n+")
_ANSWER_CUE = re.compile(r"\n|\b(?:answer|output|corresponding value)\s*:|回答\s*[:：]|please directly give answer",
                         re.IGNORECASE)
_BARE_CUE = re.compile(r"^\s*(answer|response|value|output|summary)\s*:?\s*$", re.IGNORECASE)

# A short English stop-word list: overlap on these words says nothing about relevance.
STOP_WORDS = frozenset(
    """a an the of in on at to for from by with and or but is are was were be been being do does did
    what which who whom whose when where why how that this these those it its as into than then there
    their they them he she his her you your we our i me my not no yes can could would should will shall
    has have had about after before over under between any all some""".split()
)


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS}


@dataclass(frozen=True)
class Extraction:
    """The pieces the baseline found in a prompt (kept for tests and debugging)."""

    question: str
    answer: str
    score: int


def _marker_pattern(markers: Sequence[str]) -> re.Pattern[str]:
    parts = []
    for marker in markers:
        body = re.escape(marker.rstrip(":： "))
        parts.append(rf"{body}\s*[:：]")
    return re.compile("|".join(parts), re.IGNORECASE)


def split_prompt(prompt: str, markers: Sequence[str] = DEFAULT_MARKERS) -> tuple[str, str]:
    """Return (question, context) following the rule in the module docstring."""
    found = list(_marker_pattern(markers).finditer(prompt))
    for match in reversed(found):
        rest = prompt[match.end():]
        cue = _ANSWER_CUE.search(rest)
        question = (rest[: cue.start()] if cue else rest).strip()
        end = match.end() + (cue.start() if cue else len(rest))
        if not question:  # the marker stands alone on its line: the question is the next line
            lines = [ln for ln in rest.splitlines() if ln.strip() and not _BARE_CUE.match(ln)]
            if not lines:
                continue
            question = lines[0].strip()
            end = match.end() + rest.find(lines[0]) + len(lines[0])
        return question, prompt[: match.start()] + "\n" + prompt[end:]
    lines = prompt.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip() and not _BARE_CUE.match(lines[i]):
            return lines[i].strip(), "\n".join(lines[:i] + lines[i + 1 :])
    return "", prompt


def extract_answer(prompt: str, max_words: int, markers: Sequence[str] = DEFAULT_MARKERS,
                   context_span: tuple[int, int] | None = None) -> Extraction:
    """The best-overlap sentence of ``prompt``'s context (``prompt[start:end]`` when ``context_span`` marks it),
    trimmed to ``max_words`` words."""
    if context_span is not None and 0 <= context_span[0] <= context_span[1] <= len(prompt):
        start, end = context_span
        question, _ = split_prompt(f"{prompt[:start]}\n{prompt[end:]}", markers)
        context = prompt[start:end]
    else:
        question, context = split_prompt(prompt, markers)
    q_words = _content_words(question)
    marker = _marker_pattern(markers)
    best, best_score = "", -1
    for unit in _SENTENCE_END.split(context):
        unit = unit.strip()
        if not unit or marker.match(unit) or _BARE_CUE.match(unit):
            continue
        unit_words = _content_words(unit)
        if not unit_words or unit_words == q_words:
            continue
        score = len(q_words & unit_words)
        if score > best_score:
            best, best_score = unit, score
    words = best.split()[: max(max_words, 0)]
    return Extraction(question=question, answer=" ".join(words), score=max(best_score, 0))


class ExtractiveReader(Reader):
    """Answers with the context sentence that overlaps the question most; see the module docstring.

    Never truncates (it reads the whole prompt); tokens are LongBench words.
    A system text is ignored (it holds instructions, not evidence).
    """

    max_context = 10**9
    truncation = "none"

    def __init__(self, question_markers: Sequence[str] = DEFAULT_MARKERS) -> None:
        if not question_markers:
            from core.errors import ParamError

            raise ParamError("extractive: question_markers must name at least one marker")
        self.question_markers = tuple(question_markers)
        self.tokenizer = WordTokenizer()

    @classmethod
    def sizing(cls, **_: Any) -> Any:
        """LongBench words and no window: it reads every prompt whole (``readers.sizing``)."""
        from readers.sizing import WORDS, ReaderSizing

        return ReaderSizing(WordTokenizer(), None, "extractive", WORDS, True, "none")

    @property
    def identity(self) -> str:
        return f"extractive:v3:markers={'|'.join(self.question_markers)}"  # v3: answers from the marked context

    @property
    def label(self) -> str:
        return "extractive"

    def answer(self, prompt: str, max_words: int, stop: Sequence[str] = (),
               context_span: tuple[int, int] | None = None) -> str:
        return cut_at_stop(extract_answer(prompt, max_words, self.question_markers, context_span).answer, stop)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out = []
        for req in requests:
            start = time.perf_counter()
            text = self.answer(req.prompt, req.max_new_tokens, req.stop, req.context_span)
            out.append(
                Generation(
                    text=text,
                    tokens_in=self.count_tokens(req.prompt),
                    tokens_out=self.count_tokens(text),
                    latency_s=time.perf_counter() - start,
                )
            )
            self._advance(1)
        return out

    def __repr__(self) -> str:
        return f"ExtractiveReader(question_markers={self.question_markers!r})"
