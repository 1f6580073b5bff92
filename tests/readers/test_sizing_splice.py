"""A dry run counts the prompt of a whole context from the context's count and its two ends
(``CountingTokenizer.splice``): exact with the reader's real tokenizer on real text, and switched off for a
tokenizer that merges across spaces."""
from __future__ import annotations

from pathlib import Path

import pytest

from core.registry import ComponentSpec
from readers.sizing import CountingTokenizer, ReaderSizing, reader_sizing

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _contexts(shift: int = 0) -> list[str]:
    """Long real texts with digits, punctuation, tables and non-ASCII: the project's own docs, in slices."""
    text = (DOCS / "findings.md").read_text(encoding="utf-8") + (DOCS / "metrics.md").read_text(encoding="utf-8")
    return [text[shift + i: shift + i + 6000 + 1500 * k] for k, i in enumerate(range(0, 60000, 9000))]


@pytest.mark.slow  # extracts SmolLM2's tokenizer from its GGUF on a fresh machine
def test_a_spliced_count_is_the_whole_count_with_smollm2s_tokenizer():
    sizing = reader_sizing(ComponentSpec("smollm2", {}))
    if not sizing.same_tokens:
        pytest.skip("SmolLM2's tokenizer file is not on this machine")
    count = CountingTokenizer(sizing)
    spliced = 0
    for context in _contexts():
        count.count_all([context], keep=True)
        prompt = f"Read the document and answer.\n\nDocument: {context}\n\nQuestion: what is n?\nAnswer:"
        if count.splice(prompt, context):
            spliced += 1
            assert count(prompt) == len(sizing.tokenizer.encode(prompt))
    assert spliced == len(_contexts()) and count.splices_ok


class _ThreeCharacters:
    """A tokenizer whose tokens run across spaces: a splice cannot be exact with it."""

    def encode(self, text: str) -> list[int]:
        return [hash(text[i: i + 3]) % 1000 for i in range(0, len(text), 3)]

    def decode(self, ids):  # pragma: no cover - never asked
        raise NotImplementedError


@pytest.mark.parametrize("shift", range(0, 60, 3))
def test_a_tokenizer_that_merges_across_spaces_turns_splicing_off(shift):
    """Whatever the texts: the docs sliced at 20 offsets.  A check at one pair of cuts let a wrong count through
    when both checked splices hit the right total by chance (11 of 60 offsets before each check tried three)."""
    count = CountingTokenizer(ReaderSizing(_ThreeCharacters(), None, "t", "t", True))
    wrong = 0
    for context in _contexts(shift):
        count.count_all([context])
        prompt = f"Q{context}xx"
        count.splice(prompt, context)
        wrong += count(prompt) != len(_ThreeCharacters().encode(prompt))
    assert wrong == 0 and not count.splices_ok
