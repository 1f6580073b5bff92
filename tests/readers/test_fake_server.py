"""The fake OpenAI server speaks the wire format and injects the faults it is told to."""
from __future__ import annotations

import base64
import math
import struct

import httpx
import openai
import pytest

from testkit.fake_openai import FAULT_KINDS, FakeOpenAIServer, hashed_embedding

AUTH = {"Authorization": "Bearer sk-test-fake"}
HTTP = httpx.Client()  # one client: building an SSL context per call costs ~50 ms


def test_chat_completion_with_openai_client_answers_from_context():
    prompt = "Paris is the capital of France.\nBerlin is a city in Germany.\nQuestion: What is the capital of France?"
    with FakeOpenAIServer() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test-fake", max_retries=0)
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}], max_tokens=20)
        assert reply.choices[0].message.content == "Paris is the capital of France."
        assert reply.usage.prompt_tokens == len(prompt.split())
        done = client.completions.create(model="m", prompt=prompt, max_tokens=3)
        assert done.choices[0].text == "Paris is the"  # trimmed to max_tokens words
        assert [m.id for m in client.models.list()] == ["fake-model"]
        assert server.stats["ok"] == 2


def test_embeddings_float_and_base64_agree_and_are_normalised():
    with FakeOpenAIServer(embedding_dim=32) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test-fake", max_retries=0)
        via_b64 = client.embeddings.create(model="e", input=["apple banana", "apple"]).data  # client asks for base64
        raw = HTTP.post(server.base_url + "/embeddings", json={"model": "e", "input": "apple banana"}, headers=AUTH)
        floats = raw.json()["data"][0]["embedding"]
    assert len(floats) == 32 and math.isclose(sum(v * v for v in floats), 1.0, rel_tol=1e-6)
    assert via_b64[0].embedding == pytest.approx(floats, abs=1e-6)
    # a single word hashes to one signed bucket: exactly one non-zero entry of magnitude 1
    single = via_b64[1].embedding
    assert sorted(abs(v) for v in single)[-2:] == pytest.approx([0.0, 1.0])


def test_hashed_embedding_is_a_bag_of_words():
    assert hashed_embedding("Apple apple", 16) == hashed_embedding("apple", 16)
    assert hashed_embedding("...", 16) == [0.0] * 16
    packed = base64.b64encode(struct.pack("<2f", 0.5, -0.25)).decode()
    assert struct.unpack("<2f", base64.b64decode(packed)) == (0.5, -0.25)


def test_missing_bearer_is_rejected():
    with FakeOpenAIServer() as server:
        assert HTTP.post(server.base_url + "/completions", json={"prompt": "x"}).status_code == 401
        assert HTTP.get(server.base_url + "/models").status_code == 401
        assert server.stats["requests"] == 0


@pytest.mark.parametrize("fault", ["429", "500", "502", "503"])
def test_status_faults(fault):
    with FakeOpenAIServer(fault_rate=1.0, faults=[fault]) as server:
        resp = HTTP.post(server.base_url + "/completions", json={"prompt": "x"}, headers=AUTH)
        assert resp.status_code == int(fault)
        assert server.stats["faults_injected"] == {fault: 1}


def test_retry_after_drop_malformed_empty_and_hang():
    with FakeOpenAIServer(fault_rate=1.0, faults=["429_retry_after"], retry_after_s=2.5) as server:
        resp = HTTP.post(server.base_url + "/completions", json={"prompt": "x"}, headers=AUTH)
        assert (resp.status_code, resp.headers["Retry-After"], resp.headers["retry-after-ms"]) == (429, "3", "2500")
    with FakeOpenAIServer(fault_rate=1.0, faults=["drop"]) as server, pytest.raises(httpx.RemoteProtocolError):
        HTTP.post(server.base_url + "/completions", json={"prompt": "x"}, headers=AUTH)
    with FakeOpenAIServer(fault_rate=1.0, faults=["malformed_json"]) as server:
        resp = HTTP.post(server.base_url + "/chat/completions", json={"messages": []}, headers=AUTH)
        with pytest.raises(ValueError):
            resp.json()
    with FakeOpenAIServer(fault_rate=1.0, faults=["empty_choices"]) as server:
        assert HTTP.post(server.base_url + "/completions", json={"prompt": "x"}, headers=AUTH).json()["choices"] == []
        assert HTTP.post(server.base_url + "/embeddings", json={"input": "x"}, headers=AUTH).json()["data"] == []
    with FakeOpenAIServer(fault_rate=1.0, faults=["hang"], hang_s=5) as server, pytest.raises(httpx.ReadTimeout):
        HTTP.post(server.base_url + "/completions", json={"prompt": "x"}, headers=AUTH, timeout=0.2)


def test_faults_are_a_deterministic_function_of_seed_and_body():
    def kinds(seed):
        with FakeOpenAIServer(fault_rate=0.5, faults=["500", "503"], seed=seed) as server:
            codes = [HTTP.post(server.base_url + "/completions", json={"prompt": f"p{i}"}, headers=AUTH).status_code
                     for i in range(20)]
        return codes

    first = kinds(1)
    assert first == kinds(1)
    assert {500, 503, 200} >= set(first) and len(set(first)) > 1


def test_max_requests_stops_the_server():
    with FakeOpenAIServer(max_requests=2) as server:
        for _ in range(2):
            assert HTTP.post(server.base_url + "/completions", json={"prompt": "x"}, headers=AUTH).status_code == 200
        server._thread.join(timeout=5)
        assert not server.running
        with pytest.raises(httpx.TransportError):
            HTTP.post(server.base_url + "/completions", json={"prompt": "x"}, headers=AUTH, timeout=2)


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError):
        FakeOpenAIServer(fault_rate=1.5)
    with pytest.raises(ValueError, match="unknown fault"):
        FakeOpenAIServer(faults=["teapot"])
    assert "hang" in FAULT_KINDS
