"""Summarize-then-concat with real (model-free) readers: order, trace, budget, failures."""
from __future__ import annotations

from typing import Sequence

import pytest

from compressors.base import CompressionError
from compressors.registry import make_compressor
from compressors.summarize import SummarizeCompressor
from core.errors import ParamError
from readers.base import Generation, GenerationRequest, Reader
from readers.cache import CachedReader
from readers.extractive import ExtractiveReader

PARAGRAPHS = [
    "Alpha opens the report. It has more words after that.",
    "Bravo comes second here. Some filler follows it.",
    "Charlie closes the text. The end is near now.",
]
CONTEXT = "\n".join(PARAGRAPHS)  # 10 + 8 + 9 words; chunk_size=10 makes one chunk per paragraph


class LeadSentenceReader(Reader):
    """A real (if naive) summarizer: the first sentence of its prompt.  Records each batch it gets."""

    def __init__(self, fail_on: str | None = None, empty_on: str | None = None) -> None:
        self.batches: list[list[GenerationRequest]] = []
        self.fail_on, self.empty_on = fail_on, empty_on

    @property
    def identity(self) -> str:
        return "lead-sentence"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        self.batches.append(list(requests))
        out = []
        for r in requests:
            if self.fail_on and self.fail_on in r.prompt:
                out.append(Generation(text="", error="HTTP 500 after 3 retries"))
            elif self.empty_on and self.empty_on in r.prompt:
                out.append(Generation(text="  "))
            else:
                lead = r.prompt.strip().split(". ")[0].rstrip(".") + "."
                out.append(Generation(text=lead, tokens_in=len(r.prompt.split()), tokens_out=len(lead.split()), cost_usd=0.5))
        return out


def _summarize(reader: Reader, **params) -> SummarizeCompressor:
    return SummarizeCompressor(reader=reader, chunk_size=10, prompt=params.pop("prompt", "{chunk}"), **params)


def test_summaries_are_concatenated_in_document_order(make_item):
    reader = LeadSentenceReader()
    out = _summarize(reader).compress(make_item(CONTEXT, id="doc"))
    assert out.text == "Alpha opens the report.\n\nBravo comes second here.\n\nCharlie closes the text."
    assert out.kept_chunks == ("doc#0", "doc#1", "doc#2")
    assert len(reader.batches) == 1 and len(reader.batches[0]) == 3  # one batched call per example
    assert [s["summary"] for s in out.trace["summaries"]] == [
        "Alpha opens the report.",
        "Bravo comes second here.",
        "Charlie closes the text.",
    ]
    assert [s["chunk_id"] for s in out.trace["summaries"]] == ["doc#0", "doc#1", "doc#2"]
    assert [s["tokens_out"] for s in out.trace["summaries"]] == [4, 4, 4]
    assert out.tokens_in == 27 and out.tokens_out == 12
    assert out.cost_usd == pytest.approx(1.5)
    assert out.model_calls == 3


def test_cached_summaries_make_no_model_call(make_item, tmp_path):
    reader = LeadSentenceReader()
    comp = _summarize(CachedReader(reader, directory=tmp_path / "gen"))
    first = comp.compress(make_item(CONTEXT))
    second = comp.compress(make_item(CONTEXT))
    assert (first.model_calls, second.model_calls) == (3, 0)
    assert second.text == first.text
    assert second.cost_usd == 0.0
    assert len(reader.batches) == 1


def test_summarizer_failure_raises_naming_example_and_chunk(make_item):
    with pytest.raises(CompressionError, match=r"ex-9.*ex-9#1.*HTTP 500"):
        _summarize(LeadSentenceReader(fail_on="Bravo")).compress(make_item(CONTEXT, id="ex-9"))
    with pytest.raises(CompressionError, match=r"empty summary.*ex-9#2"):
        _summarize(LeadSentenceReader(empty_on="Charlie")).compress(make_item(CONTEXT, id="ex-9"))


def test_default_prompt_asks_for_the_word_limit_and_the_question(make_item):
    # the lead sentence of these prompts is their instruction, which the compressor refuses as a summary
    reader = LeadSentenceReader()
    with pytest.raises(CompressionError, match="own instruction"):
        SummarizeCompressor(reader=reader, chunk_size=10, max_summary_words=50).compress(make_item(CONTEXT, "Who closes?"))
    prompt = reader.batches[0][0].prompt
    assert "at most 50 words" in prompt and PARAGRAPHS[0] in prompt and "Who closes?" not in prompt
    assert reader.batches[0][0].max_new_tokens == 300

    with pytest.raises(CompressionError, match="own instruction"):
        SummarizeCompressor(reader=reader, chunk_size=10, query_focused=True).compress(make_item(CONTEXT, "Who closes?"))
    assert "Question: Who closes?" in reader.batches[1][0].prompt

    with pytest.raises(CompressionError):
        SummarizeCompressor(reader=reader, chunk_size=10).compress(make_item("我爱北京。天安门很大。", lang="zh"))
    assert "总结" in reader.batches[2][0].prompt


def test_token_budget_scales_summary_length_and_truncates(make_item):
    reader = LeadSentenceReader()
    comp = _summarize(reader, prompt="In {max_words} words: {chunk}", token_budget=9, max_summary_words=200, max_new_tokens=300)
    out = comp.compress(make_item(CONTEXT))
    # 9 tokens over 3 chunks -> 3 words each; new tokens ceil(300 * 3 / 200) = 5, floored at 16.
    assert [r.prompt.split(":")[0] for r in reader.batches[0]] == ["In 3 words"] * 3
    assert [r.max_new_tokens for r in reader.batches[0]] == [16, 16, 16]
    # Summaries are "In 3 words: <lead>" (7 words each): far over 9 -> middle-truncated by LongBench's rule,
    # int(9 / 2) = 4 words from each end.
    assert out.tokens_out == 8
    assert out.trace["truncated"] is True
    assert out.text.startswith("In 3 words: Alpha")
    assert out.text.endswith("text.")


def test_extractive_reader_as_query_focused_summarizer(make_item):
    comp = SummarizeCompressor(reader=ExtractiveReader(), chunk_size=10, query_focused=True)
    out = comp.compress(make_item(PARAGRAPHS[0], query="Which report does Alpha open?"))
    assert out.trace["summaries"][0]["summary"] == "Alpha opens the report."
    # a chunk that shares no word with the question: the baseline reads only the chunk (the prompt marks it), so
    # it quotes one of the chunk's sentences, never the prompt's instruction
    other = comp.compress(make_item(CONTEXT, query="Which report does Alpha open?"))
    assert all(s["summary"] in CONTEXT for s in other.trace["summaries"])


def test_summarizer_section_builds_a_cached_reader(make_item):
    comp = SummarizeCompressor(summarizer={"name": "extractive"}, chunk_size=10, query_focused=True)
    assert isinstance(comp.summarizer, CachedReader)
    assert comp.summarizer.identity.startswith("extractive")


@pytest.mark.parametrize(
    "params, message",
    [
        ({}, "needs a reader"),
        ({"reader": ExtractiveReader(), "prompt": "no chunk here"}, r"\{chunk\}"),
        ({"reader": ExtractiveReader(), "prompt": "{chunk} {title}"}, "unknown field"),
        ({"reader": ExtractiveReader(), "prompt": "{chunk}", "query_focused": True}, r"\{question\}"),
    ],
)
def test_bad_settings_are_refused(params, message):
    with pytest.raises(ParamError, match=message):
        SummarizeCompressor(**params)


def test_bad_values_are_refused_before_anything_is_built():
    with pytest.raises(ParamError, match="compressor 'summarize': max_summary_words must be greater than 0, got 0"):
        make_compressor({"name": "summarize", "params": {"max_summary_words": 0}}, reader=ExtractiveReader())


def test_empty_context_names_the_example(make_item):
    with pytest.raises(CompressionError, match="blank-3"):
        _summarize(LeadSentenceReader()).compress(make_item("  \n", id="blank-3"))


class EchoReader(Reader):
    """A summarizer that cannot summarize: it answers with a fixed text per prompt (its instruction, a loop)."""

    def __init__(self, answer) -> None:
        self.answer = answer

    @property
    def identity(self) -> str:
        return "echo"

    def generate(self, requests):
        return [Generation(text=self.answer(r.prompt)) for r in requests]


@pytest.mark.parametrize("answer, reason", [
    (lambda p: p.split("\n")[0], "own instruction"),  # the extractive baseline's failure mode on summary prompts
    (lambda p: "report " * 40, "degenerate"),
    (lambda p: "   ", "empty"),
])
def test_a_summarizer_that_cannot_summarize_fails_the_example(make_item, answer, reason):
    comp = SummarizeCompressor(reader=EchoReader(answer), chunk_size=10)
    with pytest.raises(CompressionError, match=reason):
        comp.compress(make_item(CONTEXT, id="doc-4"))


def test_a_summarizer_that_echoes_its_instruction_is_refused(make_item):
    """A reader that returns the summarize instruction as its 'summary' (what a lexical baseline that reads the
    whole prompt does on L-Eval) is refused, not kept as a summary."""
    from readers.base import Generation, Reader

    class Echo(Reader):
        identity = "echo"

        def generate(self, requests):
            return [Generation(text=r.prompt.splitlines()[0]) for r in requests]

    comp = SummarizeCompressor(reader=Echo(), chunk_size=10)
    with pytest.raises(CompressionError, match="own instruction"):
        comp.compress(make_item(CONTEXT, id="doc-5"))


def test_the_extractive_reader_summarizes_from_the_chunk_not_from_the_instruction(make_item):
    """The summarize prompt marks where the chunk sits, so the lexical baseline returns a sentence of the chunk,
    not the instruction (which the compressor would refuse)."""
    text = ("The committee met on Tuesday. It approved the harbour budget of nine million. "
            "The mayor praised the vote. Work starts in spring.")
    out = SummarizeCompressor(reader=ExtractiveReader(), chunk_size=1000).compress(make_item(text))
    assert out.text and all(s["summary"] in text for s in out.trace["summaries"])
