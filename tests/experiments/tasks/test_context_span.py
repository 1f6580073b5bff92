"""The prompt builder marks where the context sits in every shipped task's prompt (``context_span``), without
changing a byte of any prompt or any generation-cache key; the extractive baseline answers from that span only."""
from __future__ import annotations

import json

import pytest

from compressors.base import CompressedContext
from experiments.data.records import Example
from experiments.tasks import TASKS, build_prompt, build_request, get_task
from indexes.types import Passage
from readers.base import GenerationRequest
from readers.cache import generation_key
from readers.extractive import ExtractiveReader, extract_answer

CONTEXT = "  The harbour of Quastin lies north. {context} $DOC$ stays as text.\nVelmora sailed from it in spring.  "
PASSAGES = (Passage("The harbour of Quastin lies north.", "Quastin", "d0"),
            Passage("Velmora sailed from it in spring.", "Velmora", "d1"),
            Passage("Salt and wool sold in the market.", "", "d2"))
META = {"reference_words": 4, "choice_A": "north", "choice_B": "south", "choice_C": "east", "choice_D": "west",
        "OPTION_A": "north", "OPTION_B": "south", "OPTION_C": "east", "OPTION_D": "west", "query": "Velmora",
        "type_needle_v": "numbers", "num_v": "1"}


def _example(name: str) -> Example:
    return Example(id="x", task=name, query="Where did Velmora sail from?", context=CONTEXT, answers=("Quastin",),
                   passages=PASSAGES, meta=META)


@pytest.mark.parametrize("name", sorted(name for name, _ in TASKS.items()))
def test_every_shipped_prompt_marks_its_context_and_is_unchanged(name):
    spec, example = get_task(name), _example(name)
    request = build_request(spec, CONTEXT, example)
    assert request.prompt == build_prompt(spec, CONTEXT, example)  # byte for byte what it was
    start, end = request.context_span
    if CONTEXT.strip() in request.prompt:
        assert request.prompt[start:end] in (CONTEXT, CONTEXT.strip())  # LongBench v2 strips its document
    else:  # a closed-book variant (LongBench v2 without context): nothing to read
        assert start == end
    unmarked = GenerationRequest(request.prompt, request.max_new_tokens, request.temperature, request.stop,
                                 request.chat, request.system)
    assert generation_key("any-reader", request) == generation_key("any-reader", unmarked)


@pytest.mark.parametrize("name", ["nq_multidoc", "kv_retrieval", "helmet_nq", "longbench_v2", "infinitebench_en_qa"])
def test_kept_passages_are_marked_from_the_first_to_the_last(name):
    spec, example = get_task(name), _example(name)
    texts = [p.text for p in PASSAGES]
    if spec.family == "litm_kv":
        texts = [json.dumps(t)[1:-1] for t in texts]
    kept = CompressedContext(text="\n".join(texts), kept_chunks=("d0", "d1", "d2"),
                             passages=tuple(Passage(t, p.title, p.doc_id) for t, p in zip(texts, PASSAGES)))
    request = build_request(spec, kept, example)
    start, end = request.context_span
    marked = request.prompt[start:end]
    assert marked.endswith(texts[-1]) and all(t in marked for t in texts)
    outside = request.prompt[:start] + request.prompt[end:]
    assert not any(t in outside for t in texts)


def test_a_closed_book_prompt_marks_nothing_to_read():
    spec = get_task("nq_multidoc")
    request = build_request(spec, CompressedContext(text=""), _example("nq_multidoc"))
    assert request.context_span == (0, 0)
    assert ExtractiveReader().generate([request])[0].text == ""


def test_the_extractive_baseline_never_answers_with_the_instructions():
    prompt = ("A special magic number for brave-otter is hidden within the following text.\n"
              "The grass is green. One of the special magic numbers for brave-otter is: 4417283. The sky is blue.\n"
              "What is the special magic number for brave-otter mentioned in the provided text?")
    start = prompt.index("The grass")
    end = prompt.index("\nWhat")
    assert "hidden" in extract_answer(prompt, 50).answer  # unmarked: the instruction overlaps the question most
    assert extract_answer(prompt, 50, context_span=(start, end)).answer == \
        "One of the special magic numbers for brave-otter is: 4417283."
    reader = ExtractiveReader()
    marked = GenerationRequest(prompt, 50, context_span=(start, end))
    assert reader.generate([marked])[0].text.endswith("4417283.")
    assert reader.identity != "extractive:v2:markers=Question:|Query:|Key:|Instruction:|问题："  # old answers not reused
