"""OpenAICompatReader against the real local fake server: retries, faults, order, key hygiene."""
from __future__ import annotations

import logging
import time

import pytest

from core.errors import ParamError
from core.openai_client import ServerRefused, redact
from core.retry import parse_retry_after
from readers.base import GenerationRequest
from readers.openai_compat import OpenAICompatReader
from testkit.fake_openai import FakeOpenAIServer

KEY = "sk-test-Zq9v8Xw7Yt6Rs5Pq4Lm3"
KEY_ENV = "CTXCOMP_TEST_OPENAI_KEY"
def fast(max_retries: int = 6, **extra) -> dict:
    """Short timeouts and backoffs, so fault tests take milliseconds."""
    retry = {"max_retries": max_retries, "backoff_base_s": 0.005, "backoff_max_s": 0.05}
    return {"timeout_s": 0.5, "api_key_env": KEY_ENV, "retry": retry, **extra}


@pytest.fixture(autouse=True)
def _api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def prompts(n):
    """Item i's code word sits in its own sentence; the extractive responder must pick that sentence."""
    out = []
    for i in range(n):
        facts = "\n".join(f"The code word for item {j} is w{j * 7 + i}." for j in range(i, i + 5))
        out.append(GenerationRequest(prompt=f"{facts}\nQuestion: What is the code word for item {i + 2}?",
                                     max_new_tokens=16))
    return out


def texts(gens):
    return [g.text for g in gens]


def test_answers_in_input_order_and_usage():
    reqs = prompts(12)
    with FakeOpenAIServer() as server:
        reader = OpenAICompatReader("fake-model", base_url=server.base_url, concurrency=4, **fast())
        gens = reader.generate(reqs)
    assert texts(gens) == [f"The code word for item {i + 2} is w{(i + 2) * 7 + i}." for i in range(12)]
    assert all(g.ok and g.retries == 0 for g in gens)
    assert gens[0].tokens_in == len(reqs[0].prompt.split())  # from the server's usage block
    assert gens[0].tokens_out == 8


def test_thirty_percent_faults_of_every_kind_change_nothing():
    reqs = prompts(60)
    with FakeOpenAIServer() as clean:
        expected = OpenAICompatReader("fake-model", base_url=clean.base_url, **fast()).generate(reqs)
    with FakeOpenAIServer(fault_rate=0.3, seed=7, hang_s=3.0, retry_after_s=0.01) as faulty:
        # a timeout well under the hang but far above a clean answer, so a loaded machine (xdist on 2 cores)
        # cannot time out a healthy request and add a retry that no fault caused
        reader = OpenAICompatReader("fake-model", base_url=faulty.base_url, concurrency=8,
                                    **fast(8, timeout_s=1.5))
        got = reader.generate(reqs)
        injected = faulty.stats["faults_injected"]
    assert all(g.ok for g in got), [g.error for g in got if not g.ok]
    assert texts(got) == texts(expected)
    assert sum(injected.values()) >= 10 and len(injected) >= 6  # many faults, of many kinds
    assert sum(g.retries for g in got) == sum(injected.values())


def test_persistent_faults_give_errors_never_empty_successes():
    reqs = prompts(6)
    faults = ["429", "500", "502", "503", "drop", "malformed_json", "empty_choices"]
    with FakeOpenAIServer(fault_rate=1.0, faults=faults) as server:
        reader = OpenAICompatReader("fake-model", base_url=server.base_url, **fast(2))
        gens = reader.generate(reqs)
        assert server.stats["requests"] == 6 * 3
    for g in gens:
        assert not g.ok and g.text == "" and g.retries == 2
        assert g.error.startswith("gave up after 3 attempts")


def test_retry_after_is_honoured():
    waits = []
    with FakeOpenAIServer(fault_rate=1.0, faults=["429_retry_after"], retry_after_s=0.2) as server:
        reader = OpenAICompatReader("fake-model", base_url=server.base_url, **fast(2))
        reader._sleep = lambda s: (waits.append(s), time.sleep(s))
        [gen] = reader.generate(prompts(1))
        arrivals = [t for t, _ in server.arrivals]
    assert "429" in gen.error
    assert len(waits) == 2 and min(waits) >= 0.2  # backoff alone would be at most 0.05 s
    assert min(b - a for a, b in zip(arrivals, arrivals[1:])) >= 0.2


def test_order_is_kept_when_later_requests_finish_first():
    def slow_first(prompt, body):
        n = int(prompt.rsplit(" ", 1)[-1])
        time.sleep(0.02 * (8 - n))
        return f"answer {n}"

    reqs = [GenerationRequest(prompt=f"Question: number {i}") for i in range(8)]
    with FakeOpenAIServer(responder=slow_first) as server:
        gens = OpenAICompatReader("fake-model", base_url=server.base_url, concurrency=8, **fast()).generate(reqs)
    assert texts(gens) == [f"answer {i}" for i in range(8)]


def test_completions_endpoint_stop_strings_and_cost():
    req = GenerationRequest(prompt="x\nQuestion: y", max_new_tokens=5, stop=("STOP",))
    with FakeOpenAIServer(responder=lambda p, b: "one two STOP three") as server:
        reader = OpenAICompatReader("fake-model", base_url=server.base_url, endpoint="completions",
                                    price_in_per_1k=1.0, price_out_per_1k=2.0, **fast())
        [gen] = reader.generate([req])
    assert gen.text == "one two "  # the server cut at the stop string it was sent
    assert gen.cost_usd == pytest.approx(3 / 1000 * 1.0 + 2 / 1000 * 2.0)


def test_prompt_is_truncated_to_max_context_before_sending():
    seen = []
    words = " ".join(f"w{i}" for i in range(100))
    with FakeOpenAIServer(responder=lambda p, b: seen.append(p) or "ok") as server:
        # completions: the raw prompt gets 30 - 10 = 20 tokens, the first and last 10
        raw = OpenAICompatReader("fake-model", base_url=server.base_url, max_context=30, endpoint="completions", **fast())
        [gen] = raw.generate([GenerationRequest(prompt=words, max_new_tokens=10)])
        assert gen.truncated and seen[0].split() == [f"w{i}" for i in range(10)] + [f"w{i}" for i in range(90, 100)]
        # chat: the message format's own tokens (chat_overhead_tokens=8) come off too: 30 - 10 - 8 = 12
        chat = OpenAICompatReader("fake-model", base_url=server.base_url, max_context=30, **fast())
        [gen] = chat.generate([GenerationRequest(prompt=words, max_new_tokens=10)])
    assert gen.truncated and seen[1].split() == [f"w{i}" for i in range(6)] + [f"w{i}" for i in range(94, 100)]


def test_api_key_never_leaks(caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    key_file = tmp_path / "key.txt"
    key_file.write_text(KEY + "\n")
    with FakeOpenAIServer(fault_rate=1.0, faults=["500", "drop", "429"],
                          responder=lambda p, b: "never") as server:
        reader = OpenAICompatReader("fake-model", base_url=server.base_url, api_key_file=key_file,
                                    **{k: v for k, v in fast(3).items() if k != "api_key_env"})
        gens = reader.generate(prompts(3))
    for text in [caplog.text, repr(reader), reader.identity, *(g.error for g in gens)]:
        assert KEY not in text and KEY[:12] not in text
    with pytest.raises(ValueError) as err:
        OpenAICompatReader("gpt-4o-mini", base_url=None, api_key_env="CTXCOMP_NO_SUCH_KEY_VAR")
    assert KEY not in str(err.value)


def test_a_rejected_request_fails_its_example_at_once_and_a_refused_route_stops_the_run():
    def responder(prompt, body):
        if "item 3?" in prompt:
            raise ValueError("the prompt is too long for this model")  # the fake server answers HTTP 400
        return "fine"

    with FakeOpenAIServer(responder=responder) as server:
        reader = OpenAICompatReader("fake-model", base_url=server.base_url, **fast())
        gens = reader.generate(prompts(3))
        assert [g.ok for g in gens] == [True, False, True]
        assert gens[1].error.startswith("HTTP 400") and gens[1].retries == 0 and gens[1].text == ""
        assert server.stats["requests"] == 3  # the 400 was not retried
        lost = OpenAICompatReader("fake-model", base_url=server.base_url + "/no-such-route", **fast())
        with pytest.raises(ServerRefused, match=r"no-such-route/chat/completions refused the request \(HTTP 404"):
            lost.generate(prompts(1))


def test_redact_and_retry_after_parsing():
    assert redact(f"Authorization: Bearer {KEY} failed", KEY) == "Authorization: Bearer *** failed"
    assert redact("Incorrect API key provided: sk-abcdefgh1234") == "Incorrect API key provided: sk-***"
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "3"}) == 0.25
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({}) is None
    in_10s = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 10))
    assert 8.0 <= parse_retry_after({"retry-after": in_10s}) <= 10.0
    # A garbled header means "no hint", never an exception that would abort the whole batch.
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "  "}) is None


def test_identity_names_what_changes_output():
    a = OpenAICompatReader("m1", base_url="http://127.0.0.1:1/v1", max_context=100, **fast())
    b = OpenAICompatReader("m1", base_url="http://127.0.0.1:1/v1", max_context=200, **fast())
    c = OpenAICompatReader("m1", base_url="http://127.0.0.1:1/v1", max_context=100, truncation="left", **fast())
    assert len({a.identity, b.identity, c.identity}) == 3
    same = OpenAICompatReader("m1", base_url="http://127.0.0.1:1/v1", max_context=100, **fast())
    assert isinstance(a.identity, str) and a.identity == same.identity  # equal settings share cache entries
    assert KEY not in a.identity


def test_extra_body_reaches_the_server_and_the_identity():
    bodies = []
    with FakeOpenAIServer(responder=lambda p, b: bodies.append(b) or "ok") as server:
        reader = OpenAICompatReader("m1", base_url=server.base_url, extra_body={"repeat_penalty": 1.0, "top_k": 1},
                                    **fast())
        [gen] = reader.generate([GenerationRequest(prompt="hello", max_new_tokens=3, temperature=0.0)])
    assert gen.ok and bodies[0]["repeat_penalty"] == 1.0 and bodies[0]["top_k"] == 1
    assert bodies[0]["max_tokens"] == 3 and bodies[0]["model"] == "m1"
    plain = OpenAICompatReader("m1", base_url=server.base_url, **fast())
    assert plain.identity != reader.identity and '"repeat_penalty": 1.0' in reader.identity
    with pytest.raises(ParamError, match="extra_body may not set max_tokens"):
        OpenAICompatReader("m1", base_url=server.base_url, extra_body={"max_tokens": 5}, **fast())
