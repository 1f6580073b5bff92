"""Summarize-then-concat compression (LongBench paper, section 4, Table 5).

Each chunk of the context is summarized by a reader -- by default the reader
under evaluation, as in the paper -- and the summaries are concatenated in
document order.  The released LongBench script never did this: a caught
``NameError`` made it return the original context, so its "summary" numbers
are full-context numbers.  We do what the paper describes.

Summaries are cached only through the reader: the runner hands in a
``readers.cache.CachedReader``, so a re-run or a new grid point reuses every
summary and ``model_calls`` counts only the calls the cache did not serve.
"""
from __future__ import annotations

import hashlib
import math
import re
import string
from typing import ClassVar, Sequence

from pydantic import PositiveInt

from compressors.base import (
    BudgetSupport,
    CompressedContext,
    Compressible,
    CompressionError,
    Compressor,
    ModelWork,
    Sizing,
)
from compressors.retrieval import split_context
from core.checks import Nested
from core.errors import ParamError
from core.progress import progress_note
from core.registry import ComponentSpec, SpecLike
from core.text import count_words, word_pieces
from indexes.chunking import CHUNKERS, make_chunker
from indexes.types import Chunk
from readers.base import Generation, GenerationRequest, Reader, Tokenizer
from readers.registry import READERS, make_reader
from readers.truncation import truncate_text

PROMPTS: dict[tuple[str, bool], str] = {
    ("en", False): "Write a brief summary of the following text in at most {max_words} words.\n\nText:\n{chunk}\n\nSummary:",
    ("en", True): (
        "Write a brief summary of the following text in at most {max_words} words, "
        "keeping what is needed to answer the question.\n\nText:\n{chunk}\n\nQuestion: {question}\n\nSummary:"
    ),
    ("zh", False): "请用不超过{max_words}字简要总结以下文本。\n\n文本：\n{chunk}\n\n总结：",
    ("zh", True): "请用不超过{max_words}字简要总结以下文本，保留回答问题所需的信息。\n\n文本：\n{chunk}\n\n问题：{question}\n\n总结：",
}
PROMPT_FIELDS = frozenset({"chunk", "question", "max_words"})
MIN_NEW_TOKENS = 16
# On a budget axis each summary may take an equal share of the budget in tokens; the prompt asks for this many
# words per token of that share (about 3 words to 4 tokens in English BPE vocabularies), so most summaries end
# on their own before the generation cap cuts them.
WORDS_PER_TOKEN = 0.75
# A summary is degenerate when most of its words repeat: fewer distinct words than this share of all words
# (a model stuck in a loop), checked only on summaries of at least MIN_WORDS_FOR_REPEAT_CHECK words.
MIN_DISTINCT_SHARE = 0.25
MIN_WORDS_FOR_REPEAT_CHECK = 20


def prompt_fields(template: str) -> set[str]:
    """The ``{field}`` names a template uses; unknown or positional fields are an error."""
    fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    bad = fields - PROMPT_FIELDS
    if bad:
        raise ParamError(f"summarize: prompt uses unknown field(s) {sorted(bad)}; allowed: {sorted(PROMPT_FIELDS)}")
    return fields


class SummarizeCompressor(Compressor):
    """Summarize every chunk, concatenate the summaries in document order.

    Parameters
    ----------
    chunker, chunk_size: how the context is split (default LongBench's splitter, 500 words).
    max_summary_words: the length the prompt asks for, per chunk.
    max_new_tokens: the generation cap per chunk.
    query_focused: give the question to the summarizer (the paper's summaries are generic).
    token_budget: target total size in ``count_tokens`` units; the per-chunk
        length is scaled to ``budget / n_chunks`` (at most ``max_summary_words``),
        and the concatenation is middle-truncated if it still overflows.
        A budget axis instead gives each summary an equal share of the budget
        (separators taken out) as its generation cap, asks for
        ``WORDS_PER_TOKEN`` words per token of it, and cuts whatever still
        overflows with the one truncation (``trace.truncated`` flags it), so the
        concatenation never counts more tokens than the budget.
    summarizer: a reader section ``{name, params}``, wrapped in the shared
        generation cache; default: ``reader``, the reader under evaluation
        (already cached by the runner).
    prompt: a template with ``{chunk}`` and optionally ``{question}``, ``{max_words}``.
    separator: placed between summaries.
    """

    nested = {"summarizer": Nested(READERS), "chunker": Nested(CHUNKERS, injected=("size", "overlap"))}
    budget_support: ClassVar[BudgetSupport] = "guaranteed"
    replaced_by_budget: ClassVar[tuple[str, ...]] = ("token_budget",)
    color, marker = "#2ca02c", "^"

    def __init__(
        self,
        reader: Reader | None = None,
        chunker: SpecLike = "longbench",
        chunk_size: PositiveInt = 500,
        max_summary_words: PositiveInt = 200,
        max_new_tokens: PositiveInt = 300,
        query_focused: bool = False,
        token_budget: PositiveInt | None = None,
        summarizer: SpecLike | None = None,
        prompt: str | None = None,
        separator: str = "\n\n",
        tokenizer: Tokenizer | None = None,
    ) -> None:
        super().__init__(tokenizer)
        if prompt is not None:
            fields = prompt_fields(prompt)
            if "chunk" not in fields:
                raise ParamError("summarize: prompt must contain {chunk}")
            if query_focused and "question" not in fields:
                raise ParamError("summarize: query_focused=True but the prompt has no {question}")
        self.chunk_size = chunk_size
        self.max_summary_words = max_summary_words
        self.max_new_tokens = max_new_tokens
        self.query_focused = query_focused
        self.token_budget = token_budget
        self.prompt = prompt
        self.separator = separator
        self._chunker_spec = ComponentSpec.parse(chunker, "summarize: chunker")
        self._chunker = make_chunker(self._chunker_spec, chunk_size)
        self.summarizer = self._build_summarizer(reader, summarizer)

    @staticmethod
    def _build_summarizer(reader: Reader | None, section: SpecLike | None) -> Reader:
        if section is None:
            if reader is None:
                raise ParamError(
                    "summarize needs a reader: the runner passes the reader under evaluation, "
                    "or give summarizer={name: ..., params: {...}}"
                )
            return reader
        from readers.cache import CachedReader

        # A summarizer of our own goes through the same generation cache as the runner's reader.
        return CachedReader(make_reader(ComponentSpec.parse(section, "summarize: summarizer")))

    @property
    def label(self) -> str:
        focus = "query-focused, " if self.query_focused else ""
        return f"summarize({focus}{self._chunker_spec.name}:{self.chunk_size})"

    @property
    def identity(self) -> str:
        budget = f",budget={self.token_budget}" if self.token_budget else ""
        custom = f",prompt={hashlib.sha256(self.prompt.encode()).hexdigest()[:12]}" if self.prompt else ""
        return (
            f"summarize({self.summarizer.identity},{self._chunker_spec.name}:{self.chunk_size},"
            f"words={self.max_summary_words},new={self.max_new_tokens},query_focused={self.query_focused}{budget}{custom})"
        )

    def sizing(self, item: Compressible, budget: int | None = None) -> Sizing:
        """A dry run's bound without the summarizer: ``max_new_tokens`` a chunk and the separators between, within
        the budget; each distinct (chunk, focus) is one summarizer call (the cache serves repeats)."""
        chunks = split_context(self._chunker, item)
        focus = item.query if self.query_focused else ""
        bound = len(chunks) * self.max_new_tokens + (len(chunks) - 1) * self.count_tokens(self.separator)
        limit = budget if budget is not None else self.token_budget
        return Sizing(bound if limit is None else min(bound, limit), False,
                      "summaries at most max_new_tokens per chunk", frozenset((c.text, focus) for c in chunks))

    def _lengths(self, n_chunks: int) -> tuple[int, int]:
        """Per-chunk (words asked for, max new tokens): scaled down so n summaries fit the budget."""
        if self.token_budget is None:
            return self.max_summary_words, self.max_new_tokens
        words = max(1, min(self.max_summary_words, self.token_budget // n_chunks))
        new_tokens = max(MIN_NEW_TOKENS, math.ceil(self.max_new_tokens * words / self.max_summary_words))
        return words, min(new_tokens, self.max_new_tokens)

    def _fitted_lengths(self, n_chunks: int, budget: int) -> tuple[int, int]:
        """Per-chunk (words asked for, max new tokens) on a budget axis: an equal share of the budget each."""
        share = max(1, (budget - (n_chunks - 1) * self.count_tokens(self.separator)) // n_chunks)
        words = max(1, min(self.max_summary_words, math.floor(share * WORDS_PER_TOKEN)))
        return words, max(1, min(self.max_new_tokens, share))

    def _requests(self, item: Compressible, chunks: Sequence[Chunk], budget: int | None = None) -> list[GenerationRequest]:
        words, new_tokens = self._lengths(len(chunks)) if budget is None else self._fitted_lengths(len(chunks), budget)
        template = self.prompt or PROMPTS[("zh" if item.lang == "zh" else "en", self.query_focused)]
        # where the chunk sits in the prompt, so a reader that extracts (the lexical baseline) reads the chunk and
        # never the instruction (``GenerationRequest.context_span``); the prompt itself is unchanged
        head = template.format(chunk="\ue000", question=item.query, max_words=words).index("\ue000")
        return [
            GenerationRequest(
                prompt=template.format(chunk=chunk.text, question=item.query, max_words=words),
                max_new_tokens=new_tokens,
                temperature=0.0,
                context_span=(head, head + len(chunk.text)),
            )
            for chunk in chunks
        ]

    def _check(self, item: Compressible, chunk: Chunk, request: GenerationRequest, generation: Generation) -> str:
        """The summary, or a ``CompressionError`` saying why it cannot stand in for the chunk.

        A summarizer that cannot summarize (a lexical baseline, a broken model)
        returns nothing, echoes the instruction, or loops on a few words; such an
        arm would otherwise be scored as if it had read a summary.
        """
        where = f"example {item.id!r}: summarizer"
        if generation.error is not None:
            raise CompressionError(f"{where} failed on chunk {chunk.chunk_id}: {generation.error}")
        summary = generation.text.strip()
        if not summary:
            raise CompressionError(f"{where} returned an empty summary for chunk {chunk.chunk_id}")
        if _echoes_instruction(summary, request.prompt, chunk.text):
            raise CompressionError(f"{where} returned its own instruction instead of a summary for chunk "
                                   f"{chunk.chunk_id}: {summary[:80]!r}")
        words = [w.strip().lower() for w in word_pieces(summary)]
        if len(words) >= MIN_WORDS_FOR_REPEAT_CHECK and len(set(words)) < MIN_DISTINCT_SHARE * len(words):
            raise CompressionError(f"{where} returned a degenerate summary for chunk {chunk.chunk_id} "
                                   f"({len(set(words))} distinct of {len(words)} words): {summary[:80]!r}")
        return summary

    def compress(self, item: Compressible, budget: int | None = None) -> CompressedContext:
        chunks = split_context(self._chunker, item)
        requests = self._requests(item, chunks, budget)
        note, summarized = progress_note(), [0]

        def count(n: int) -> None:  # how far this example's summaries are, beside the run's bar
            summarized[0] += n
            note(f"summarizing example {item.id}: {summarized[0]}/{len(requests)} chunks")

        with self.summarizer.reporting(count):
            generations = self.summarizer.generate(requests)
        if len(generations) != len(chunks):
            raise RuntimeError(f"summarizer {self.summarizer!r} returned {len(generations)} generations "
                               f"for {len(chunks)} requests")  # a reader that breaks its contract is a bug
        summaries = [self._check(item, c, r, g) for c, r, g in zip(chunks, requests, generations)]
        text = self.separator.join(summaries)
        truncated = False
        if budget is not None:
            text, truncated = self.fit(text, budget, "middle")
        elif self.token_budget is not None:
            text, truncated = truncate_text(text, self.tokenizer, self.token_budget, "middle")
        return CompressedContext(
            text=text,
            kept_chunks=tuple(c.chunk_id for c in chunks),
            tokens_in=self.count_tokens(item.context),
            tokens_out=self.count_tokens(text),
            cost_usd=sum(g.cost_usd for g in generations),
            model_calls=sum(1 for g in generations if not g.cached),
            trace={
                "summaries": [
                    {"chunk_id": c.chunk_id, "start": c.start, "end": c.end, "summary": s, "tokens_in": g.tokens_in,
                     "tokens_out": g.tokens_out}
                    for c, s, g in zip(chunks, summaries, generations)
                ],
                "n_chunks": len(chunks),
                "chunker": f"{self._chunker_spec.name}:{self.chunk_size}",
                "summarizer": self.summarizer.identity,
                "truncated": truncated,
            },
            budget=budget,
            work=ModelWork.of_generations(generations),
        )


def _echoes_instruction(summary: str, prompt: str, chunk: str) -> bool:
    """Whether ``summary`` repeats the prompt's own instruction (a sentence of the prompt that is not in the chunk).

    The instruction sentences are the prompt's sentences with the chunk taken
    out; a summary that contains one of them word for word (case and spaces
    ignored), and that the chunk itself does not contain, echoes the prompt.
    """
    instruction = prompt.replace(chunk, "\n")
    norm = lambda text: " ".join(text.lower().split())  # noqa: E731
    summary_n, chunk_n = norm(summary), norm(chunk)
    for sentence in _SENTENCES.split(instruction):
        sentence_n = norm(sentence)
        if count_words(sentence_n) >= 4 and sentence_n in summary_n and sentence_n not in chunk_n:
            return True
    return False


_SENTENCES = re.compile(r"(?<=[.!?:。？！：])\s+|\n+")
