"""Generation cache, reader registry and the extractive baseline."""
from __future__ import annotations

import pytest

from core.errors import UnknownComponentError
from readers.base import GenerationRequest, Reader
from readers.cache import CachedReader, generation_key
from readers.extractive import ExtractiveReader, extract_answer, split_prompt
from readers.openai_compat import OpenAICompatReader
from readers.registry import READERS, make_reader
from testkit.fake_openai import FakeOpenAIServer

FAST = dict(retry={"backoff_base_s": 0.005, "backoff_max_s": 0.02}, timeout_s=0.5)


def requests(n):
    return [GenerationRequest(prompt=f"Fact {i} is lemon{i}.\nOther fact.\nQuestion: fact {i}?", max_new_tokens=4)
            for i in range(n)]


def test_second_run_is_all_hits_and_sends_nothing(tmp_path):
    with FakeOpenAIServer() as server:
        inner = OpenAICompatReader("fake-model", base_url=server.base_url, **FAST)
        first = CachedReader(inner, tmp_path / "gen")
        cold = first.generate(requests(20))
        assert (first.hits, first.misses, server.stats["requests"]) == (0, 20, 20)
        again = CachedReader(OpenAICompatReader("fake-model", base_url=server.base_url, **FAST), tmp_path / "gen")
        warm = again.generate(requests(20))
        assert server.stats["requests"] == 20  # no model call on the re-run
    assert (again.hits, again.misses) == (20, 0)
    assert [g.text for g in warm] == [g.text for g in cold] and cold[3].text == "Fact 3 is lemon3."
    assert all(g.cached for g in warm) and not any(g.cached for g in cold)
    assert warm[0].tokens_in == cold[0].tokens_in and again.max_context == inner.max_context


def test_failures_are_not_cached_and_keys_separate_settings(tmp_path):
    with FakeOpenAIServer(fault_rate=1.0, faults=["500"]) as server:
        reader = CachedReader(OpenAICompatReader("fake-model", base_url=server.base_url, timeout_s=0.5,
                                                 retry={"max_retries": 0}),
                              tmp_path)
        assert not reader.generate(requests(2))[0].ok
        assert not reader.generate(requests(2))[0].ok
        assert server.stats["requests"] == 4 and reader.misses == 4
    base = GenerationRequest(prompt="p")
    variants = [GenerationRequest(prompt="p", max_new_tokens=1), GenerationRequest(prompt="p", temperature=0.5),
                GenerationRequest(prompt="p", stop=("\n",)), GenerationRequest(prompt="p", chat=False)]
    keys = {generation_key("r", base), generation_key("r2", base), *(generation_key("r", v) for v in variants)}
    assert len(keys) == 6


def test_cache_mixes_hits_and_misses_in_input_order(tmp_path):
    reader = CachedReader(ExtractiveReader(), tmp_path)
    reqs = requests(6)
    reader.generate(reqs[::2])
    out = reader.generate(reqs)
    assert [g.cached for g in out] == [True, False] * 3
    assert [g.text for g in out] == [f"Fact {i} is lemon{i}." for i in range(6)]


def test_registry_names_paths_and_typos():
    assert READERS.get("extractive") is ExtractiveReader
    assert READERS.get("readers.extractive:ExtractiveReader") is ExtractiveReader
    assert isinstance(make_reader("extractive", question_markers=["Q:"]), ExtractiveReader)
    assert isinstance(make_reader({"name": "extractive", "params": {"question_markers": ["Q:"]}}), ExtractiveReader)
    for name in ("hf", "smollm2", "openai"):
        assert issubclass(READERS.get(name), Reader)
    with pytest.raises(UnknownComponentError, match="Did you mean 'openai'"):
        READERS.get("opnai")
    with pytest.raises(KeyError):  # also a KeyError, for callers that look names up
        READERS.get("nothing-like-it")
    with pytest.raises(UnknownComponentError, match="not a Reader"):
        READERS.get("readers.cache:generation_key")


def test_extractive_finds_the_question_and_the_best_sentence():
    prompt = ("Answer the question from the passages.\n"
              "Question: Who wrote Hamlet around 1600?\n"  # query-aware repeat: must not be the answer
              "Hamlet is a tragedy. It was written by William Shakespeare around 1600. Ophelia drowns.\n"
              "Macbeth is another play.\n"
              "Question: Who wrote Hamlet around 1600?\nAnswer:")
    found = extract_answer(prompt, 50)
    assert found.question == "Who wrote Hamlet around 1600?"
    # content words {wrote, hamlet, around, 1600}: "Hamlet is a tragedy." shares 1, the second sentence 2
    assert found.answer == "It was written by William Shakespeare around 1600."
    assert found.score == 2
    assert ExtractiveReader().generate([GenerationRequest(prompt=prompt, max_new_tokens=3)])[0].text == "It was written"


def test_extractive_question_rules():
    assert split_prompt("ctx line\nKey:\n1234-abcd\nAnswer:", ("Key:",))[0] == "1234-abcd"
    assert split_prompt("a\nb\nwhat is c\nAnswer:", ("Question:",)) == ("what is c", "a\nb\nAnswer:")
    kv = 'Key "aa11" value "bb22".\nKey "cc33" value "dd44".\nKey: "cc33"'
    assert extract_answer(kv, 10, ("Key:",)).answer == 'Key "cc33" value "dd44".'
