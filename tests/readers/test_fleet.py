"""OpenAICompatReader over a fleet of servers (``base_urls``): routing, failover, ejection, probes, one cache.

Three real local fake servers; one is killed while requests are in flight.
Expected answers come from a one-server run (the servers answer with the
extractive baseline, a pure function of the prompt), so a fleet that lost,
repeated or mixed up a request would differ.
"""
from __future__ import annotations

import logging
import threading
import time

import pytest

from core.errors import ParamError
from readers.base import GenerationRequest
from readers.cache import CachedReader
from readers.fleet import Fleet
from readers.openai_compat import OpenAICompatReader
from readers.registry import READERS
from testkit.fake_openai import FakeOpenAIServer

KEY = "sk-fleet-Xq8w7Ev6Rt5Yu4Io3Pa2"
KEY_ENV = "CTXCOMP_TEST_FLEET_KEY"


@pytest.fixture(autouse=True)
def _api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def settings(max_retries: int = 6, **extra) -> dict:
    retry = {"max_retries": max_retries, "backoff_base_s": 0.005, "backoff_max_s": 0.05}
    return {"timeout_s": 2.0, "api_key_env": KEY_ENV, "retry": retry, **extra}


def requests(n: int) -> list[GenerationRequest]:
    """Request i asks for item i + 2's code word, which sits in its own sentence among five."""
    out = []
    for i in range(n):
        facts = " ".join(f"The code word for item {j} is w{j * 11 + i}." for j in range(i, i + 5))
        out.append(GenerationRequest(prompt=f"{facts}\nQuestion: What is the code word for item {i + 2}?",
                                     max_new_tokens=16))
    return out


def expected_texts(n: int) -> list[str]:
    return [f"The code word for item {i + 2} is w{(i + 2) * 11 + i}." for i in range(n)]


class Clock:
    """A clock the test moves by hand, so cool-downs end exactly when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- parameters -------------------------------------------------------------------------------


@pytest.mark.parametrize("params, needle", [
    ({"base_url": "http://127.0.0.1:1/v1", "base_urls": ["http://127.0.0.1:2/v1"]}, "not both"),
    ({"base_urls": []}, "base_urls is empty"),
    ({"base_urls": ["http://127.0.0.1:1/v1", "127.0.0.1:8000/v1"]}, "'127.0.0.1:8000/v1' in base_urls"),
    ({"base_urls": ["ftp://example.org/v1"]}, "'ftp://example.org/v1' in base_urls is not an http"),
    ({"base_urls": ["http://127.0.0.1:port/v1"]}, "'http://127.0.0.1:port/v1'"),
    ({"base_urls": "http://127.0.0.1:1/v1"}, "must be a list"),
    ({"base_urls": ["http://a:1/v1", "http://a:1/v1/"]}, "more than once"),
    ({"base_url": "localhost:8000"}, "'localhost:8000' (base_url) is not an http"),
    ({"base_urls": ["http://a:1/v1"], "eject_after": 0}, "eject_after"),
])
def test_bad_server_lists_are_one_line_param_errors(params, needle):
    with pytest.raises(ParamError) as err:
        READERS.check({"name": "openai", "params": {"model": "fake-model", **params, **settings()}})
    message = str(err.value)
    assert needle in message and "\n" not in message


@pytest.mark.parametrize("params, needle", [
    ({"base_urls": ["http://a:1/v1", "gopher://b/v1"]}, "'gopher://b/v1' in base_urls"),
    ({"base_url": "http://a:1/v1", "base_urls": ["http://b:1/v1"]}, "not both"),
])
def test_check_config_refuses_what_the_constructor_refuses_without_building(params, needle):
    with pytest.raises(ParamError, match=needle):
        OpenAICompatReader.check_config(model="m", **params)
    with pytest.raises(ParamError, match=needle):
        OpenAICompatReader("m", **params, **settings())
    for bad, said in (({"endpoint": "embeddings"}, "endpoint must be"), ({"cooldown_s": -1}, "cooldown_s must be")):
        with pytest.raises(ParamError, match=said):  # values: the registry's one check, before anything is built
            READERS.check({"name": "openai", "params": {"model": "m", **bad}})
    OpenAICompatReader.check_config(model="m", base_urls=["http://a:1/v1", "https://b/v1"], concurrency=4)
    with pytest.raises(ParamError, match="flat list of server URLs"):  # base_urls is one list, never an axis
        OpenAICompatReader("m", base_urls=[["http://a:1/v1", "https://b/v1"]], **settings())


def test_identity_names_the_model_not_the_servers():
    one = OpenAICompatReader("m", base_url="http://127.0.0.1:1/v1", max_context=100, **settings())
    fleet = OpenAICompatReader("m", base_urls=["http://127.0.0.1:2/v1", "http://127.0.0.1:3/v1"], max_context=100,
                               **settings())
    other_model = OpenAICompatReader("m2", base_url="http://127.0.0.1:1/v1", max_context=100, **settings())
    other_endpoint = OpenAICompatReader("m", base_url="http://127.0.0.1:1/v1", max_context=100,
                                        endpoint="completions", **settings())
    assert one.identity == fleet.identity
    assert len({one.identity, other_model.identity, other_endpoint.identity}) == 3
    assert "127.0.0.1" not in one.identity
    # without a tokenizer spec, OpenAI's API counts with tiktoken and other servers count words: not the same reader
    official = OpenAICompatReader("m", max_context=100, **settings())
    assert official.identity != one.identity


def test_the_same_model_behind_another_server_is_served_from_the_cache(tmp_path):
    reqs = requests(8)
    with FakeOpenAIServer() as a, FakeOpenAIServer() as b, FakeOpenAIServer() as c:
        first = CachedReader(OpenAICompatReader("fake-model", base_url=a.base_url, **settings()), tmp_path)
        cold = first.generate(reqs)
        first.close()
        again = CachedReader(OpenAICompatReader("fake-model", base_urls=[b.base_url, c.base_url], **settings()),
                             tmp_path)
        warm = again.generate(reqs)
        again.close()
        assert (a.stats["requests"], b.stats["requests"], c.stats["requests"]) == (8, 0, 0)
    assert [g.text for g in cold] == [g.text for g in warm] == expected_texts(8)
    assert all(g.cached for g in warm) and again.hits == 8


# -- routing (pure bookkeeping, no network) ---------------------------------------------------


def test_least_in_flight_routing_and_ties_by_fewest_sent():
    fleet = Fleet(["http://a", "http://b", "http://c"], probe=lambda url: True)
    a, b, c = fleet.servers
    assert [fleet.acquire() for _ in range(3)] == [a, b, c]  # all idle: fewest sent, then list order
    fleet.release(b, ok=True)
    assert fleet.acquire() is b  # b is the only one with nothing in flight
    fleet.release(a, ok=True)
    fleet.release(c, ok=True)
    assert fleet.acquire() is a  # a and c are idle and were sent one each: list order
    assert fleet.acquire() is c
    assert fleet.acquire(exclude=[a, b]) is c and fleet.acquire(exclude=[a, b, c]) is None
    assert [s["in_flight"] for s in fleet.snapshot()] == [1, 1, 2]


def test_ejection_counts_consecutive_health_faults_only_and_probes_before_readmission():
    clock, verdict = Clock(), {"http://b": False}
    fleet = Fleet(["http://a", "http://b"], probe=lambda url: verdict[url], eject_after=2, cooldown_s=30,
                  clock=clock)
    a, b = fleet.servers
    for _ in range(5):  # 429s say "busy", not "broken"
        fleet.release(fleet.acquire(exclude=[a]), ok=False, health_fault=False)
    fleet.release(fleet.acquire(exclude=[a]), ok=False, health_fault=True)
    fleet.release(fleet.acquire(exclude=[a]), ok=True)  # a success resets the count
    fleet.release(fleet.acquire(exclude=[a]), ok=False, health_fault=True)
    assert b.state == "up"
    fleet.release(fleet.acquire(exclude=[a]), ok=False, health_fault=True, reason="connection error")
    assert (b.state, b.ejections, b.last_error) == ("ejected", 1, "connection error")
    assert all(fleet.acquire() is a for _ in range(3))  # b gets nothing while ejected

    clock.now += 29.9
    fleet.acquire()
    assert b.state == "ejected" and b.probes == 0  # still cooling down
    clock.now += 0.2
    assert fleet.acquire() is a  # the cool-down is over: a probe starts, traffic still goes to a
    fleet.wait_for_probes()
    assert (b.state, b.probes) == ("ejected", 1)  # the probe failed: another cool-down
    verdict["http://b"] = True
    clock.now += 30.1
    fleet.acquire()
    fleet.wait_for_probes()
    assert (b.state, b.probes, b.failures) == ("up", 2, 0)
    assert fleet.acquire() is b  # a has 6 in flight, b none


def test_with_every_server_ejected_each_is_still_tried_and_a_success_readmits_it():
    fleet = Fleet(["http://a", "http://b"], probe=lambda url: False, eject_after=1, cooldown_s=60)
    a, b = fleet.servers
    fleet.release(fleet.acquire(), ok=False, health_fault=True)
    fleet.release(fleet.acquire(), ok=False, health_fault=True)
    assert a.state == b.state == "ejected"
    first = fleet.acquire()
    assert first is a and fleet.acquire(exclude=[a]) is b  # nowhere else to go: try them all
    fleet.release(a, ok=True)
    assert a.state == "up" and fleet.acquire(exclude=[]) is a


# -- against real servers -------------------------------------------------------------------


def test_requests_go_to_the_least_busy_server():
    """A slow server keeps its requests in flight longer, so it is sent fewer; round robin would send it a third."""
    n = 60
    with FakeOpenAIServer(service_time_s=0.005) as a, FakeOpenAIServer(service_time_s=0.005) as b, \
            FakeOpenAIServer(service_time_s=1.0) as slow:
        reader = OpenAICompatReader("fake-model", base_urls=[a.base_url, b.base_url, slow.base_url], concurrency=2,
                                    **settings())
        gens = reader.generate(requests(n))
        counts = [s.stats["requests"] for s in (a, b, slow)]
        reader.close()
    assert [g.text for g in gens] == expected_texts(n)
    assert sum(counts) == n  # no request was sent twice
    # the slow server gets far fewer than round robin's 20; how the two fast ones split the rest depends on
    # scheduling on a loaded machine (41/17 seen on 2 busy cores), so only "both served" is asserted there
    assert counts[2] <= 6 and min(counts[:2]) >= 10, counts
    assert [s["sent"] for s in reader.fleet.snapshot()] == counts


def test_a_server_killed_mid_run_loses_nothing_and_changes_nothing(caplog):
    caplog.set_level(logging.DEBUG)
    n = 90
    with FakeOpenAIServer() as solo:
        expected = OpenAICompatReader("fake-model", base_url=solo.base_url, **settings()).generate(requests(n))
    assert [g.text for g in expected] == expected_texts(n)

    servers = [FakeOpenAIServer(service_time_s=0.03).start() for _ in range(3)]
    victim = servers[1]
    killed_with = {}

    def kill_when_busy():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            stats = victim.stats
            if stats["requests"] >= 6 and stats["in_flight"] >= 1:
                killed_with.update(stats)
                victim.kill()
                return
            time.sleep(0.001)

    try:
        reader = OpenAICompatReader("fake-model", base_urls=[s.base_url for s in servers], concurrency=2,
                                    cooldown_s=600, **settings())
        killer = threading.Thread(target=kill_when_busy)
        killer.start()
        gens = reader.generate(requests(n))
        killer.join()
        reader.close()
    finally:
        for s in servers:
            s.stop()
    assert killed_with, "the victim never had a request in flight"
    assert all(g.ok for g in gens), [g.error for g in gens if not g.ok]
    assert [g.text for g in gens] == [g.text for g in expected]
    assert sum(g.retries for g in gens) >= 1  # the cut requests were sent elsewhere
    survivors = [servers[0].stats["ok"], servers[2].stats["ok"]]
    assert sum(survivors) + victim.stats["ok"] == n and victim.stats["ok"] < n / 3
    snap = reader.fleet.snapshot()
    assert snap[1]["state"] == "ejected" and snap[1]["ejections"] == 1
    assert [s["ejections"] for s in (snap[0], snap[2])] == [0, 0]
    assert "ejected" in caplog.text and victim.base_url in caplog.text
    for text in (caplog.text, repr(reader), reader.identity, str(snap)):
        assert KEY not in text and KEY[:10] not in text


def test_failing_over_to_another_server_spends_no_retry():
    """One attempt of the retry policy tries each admitted server: with no retries at all, a dead server
    among live ones costs no request."""
    with FakeOpenAIServer() as dead, FakeOpenAIServer() as live1, FakeOpenAIServer() as live2:
        dead.kill()
        reader = OpenAICompatReader("fake-model", base_urls=[dead.base_url, live1.base_url, live2.base_url],
                                    concurrency=1, **settings(max_retries=0))
        gens = reader.generate(requests(12))
        reader.close()
        served = live1.stats["ok"] + live2.stats["ok"]
    assert all(g.ok for g in gens), [g.error for g in gens if not g.ok]
    assert [g.text for g in gens] == expected_texts(12) and served == 12
    # each try of the dead server is one failed call a generation reports; three consecutive failures eject it,
    # so it is tried at least once and at most three times (how often before the ejection depends on how the
    # three request threads interleave on a loaded machine)
    assert 1 <= sum(g.retries for g in gens) <= 3


def test_an_ejected_server_is_probed_and_readmitted_once_healthy():
    clock = Clock()
    with FakeOpenAIServer() as sick, FakeOpenAIServer() as well:
        reader = OpenAICompatReader("fake-model", base_urls=[sick.base_url, well.base_url], concurrency=1,
                                    **settings())
        reader.fleet = Fleet(reader.base_urls, probe=lambda url: reader._clients[url].healthy(), eject_after=2, cooldown_s=30, clock=clock)
        sick.unhealthy = True
        gens = [reader.generate([r])[0] for r in requests(6)]  # one at a time: 1 and 2 try the sick server first
        assert [g.text for g in gens] == expected_texts(6) and [g.retries for g in gens] == [1, 1, 0, 0, 0, 0]
        assert sick.stats["requests"] == 2 and well.stats["requests"] == 6
        assert reader.fleet.servers[0].state == "ejected" and sick.stats["probes"] == 0

        clock.now += 31  # cool-down over, still sick: the probe fails and no request reaches it
        reader.generate(requests(1))
        reader.fleet.wait_for_probes()
        assert (sick.stats["probes"], sick.stats["requests"], reader.fleet.servers[0].state) == (1, 2, "ejected")

        sick.unhealthy = False
        clock.now += 31
        reader.generate(requests(1))  # starts the probe; the request itself goes to the admitted server
        reader.fleet.wait_for_probes()
        assert (sick.stats["probes"], reader.fleet.servers[0].state) == (2, "up")
        before = sick.stats["requests"]
        gens = [reader.generate([r])[0] for r in requests(6)]
        assert [g.text for g in gens] == expected_texts(6)
        assert sick.stats["requests"] - before >= 2  # back in the rotation
        reader.close()


def test_with_every_server_down_each_request_errors_with_the_reason(caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    servers = [FakeOpenAIServer().start() for _ in range(3)]
    urls = [s.base_url for s in servers]
    for s in servers:
        s.kill()
    # eject_after=1: every server is ejected at its first failure, so each attempt tries all three
    # (with none admitted there is nowhere else to go) and the reason names each of them
    reader = CachedReader(OpenAICompatReader("fake-model", base_urls=urls, eject_after=1, **settings(max_retries=2)),
                          tmp_path)
    gens = reader.generate(requests(4))
    reader.close()
    for g in gens:
        assert not g.ok and g.text == ""
        assert g.error.startswith("gave up after 3 attempts: all 3 servers failed: ")
        assert all(f"{url}: connection error" in g.error for url in urls)
        assert g.retries == 3 * 3 - 1
    assert reader.hits == 0 and len(reader.store) == 0  # failures are never cached
    for text in (caplog.text, *(g.error for g in gens)):
        assert KEY not in text


def test_one_server_keeps_its_old_error_text():
    with FakeOpenAIServer(fault_rate=1.0, faults=["503"]) as server:
        reader = OpenAICompatReader("fake-model", base_url=server.base_url, eject_after=1, **settings(max_retries=2))
        [gen] = reader.generate(requests(1))
        assert server.stats["requests"] == 3  # an ejected lone server is still tried: there is nowhere else to go
    assert gen.error.startswith("gave up after 3 attempts: HTTP 503") and gen.retries == 2
