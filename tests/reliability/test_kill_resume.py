"""Kill and resume: SIGKILL ``ctxcomp run`` mid-generation, between a cache write and its prediction lines,
and while the report is written; resume each time; nothing is lost, duplicated, torn or asked twice.
"""
from __future__ import annotations

import json
import random
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable

import pytest
import yaml

from experiments.run.worker import prompt_hash
from readers.extractive import ExtractiveReader
from testkit.fake_openai import FakeOpenAIServer

N_QA, N_KV = 48, 16
TOTAL = N_QA + N_KV


class PromptLog:
    """A fake-server responder that remembers when each prompt was answered (the extractive answer)."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, str]] = []  # (monotonic time, prompt hash)
        self._lock = threading.Lock()
        self._reader = ExtractiveReader()

    def __call__(self, prompt: str, body: dict) -> str:
        with self._lock:
            self.calls.append((time.monotonic(), prompt_hash(prompt)))
        return self._reader.answer(prompt, int(body.get("max_tokens") or 128))


def _complete_lines(path: Path) -> list[dict]:
    """Records of the newline-terminated lines, read without repairing the file (a torn tail is skipped)."""
    if not path.exists():
        return []
    data = path.read_bytes()
    return [json.loads(line) for line in data[: data.rfind(b"\n") + 1].splitlines()]


def _cache_entries(cache_dir: Path) -> int:
    db = cache_dir / "generations" / "cache.db"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.05) as con:
            return con.execute("SELECT COUNT(*) FROM Cache").fetchone()[0]
    except sqlite3.Error:
        return 0


def _wait_for(proc, condition: Callable[[], bool], limit_s: float = 120.0) -> bool:
    """Poll ``condition`` every ~2 ms until it holds (True) or the process exits (False)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if condition():
            return True
        time.sleep(0.002)
    raise AssertionError("the run neither reached the kill point nor finished")


@pytest.mark.slow
def test_sigkill_at_random_points_then_resume_loses_and_repeats_nothing(tmp_path, rel, cli, figures):
    rng = random.Random(20240611)
    log = PromptLog()
    server = FakeOpenAIServer(responder=log, service_time_s=0.06, max_concurrency=2).start()
    try:
        # batches (16) much larger than concurrency (2): each answer must reach the cache as it returns
        config = rel.synthetic_config(rel.openai_reader(server.base_url, concurrency=2), n_qa=N_QA, n_kv=N_KV,
                                      batch_size=16)
        config_path = tmp_path / "config.yaml"
        config_path.write_text(yaml.safe_dump(config), encoding="utf-8")

        # The uninterrupted reference run, with its own cache.
        ref_dir = tmp_path / "ref"
        ref = cli("run", config_path, "--out", ref_dir, CTXCOMP_CACHE_DIR=str(tmp_path / "ref-cache"))
        assert ref.returncode == 0, ref.stderr
        ref_calls = len(log.calls)
        assert ref_calls == TOTAL

        run_dir = tmp_path / "killed"
        preds_path = run_dir / "predictions.jsonl"
        lines = lambda: len(_complete_lines(preds_path))  # noqa: E731
        # Kill points, in order: three mid-generation (random progress), one right after a batch reached
        # the generation cache but before its prediction lines, one while the report is being written.
        # Each entry makes its condition when its attempt starts (the cache write is judged against that moment).
        plan: list[tuple[str, Callable[[], Callable[[], bool]]]] = []
        for stop_at in sorted(rng.sample(range(2, TOTAL - 12), 3)):
            plan.append(("generation", lambda s=stop_at: lambda: lines() >= s))

        def after_next_cache_write() -> Callable[[], bool]:
            base = _cache_entries(cli.cache_dir)
            return lambda: (n := _cache_entries(cli.cache_dir)) > base and n > lines()

        plan.append(("cache_write", after_next_cache_write))
        plan.append(("report", lambda: lambda: lines() >= TOTAL))

        kills: list[dict] = []
        for attempt, (point, make_condition) in enumerate(plan):
            condition = make_condition()
            args = ("run", config_path, "--out", run_dir) if attempt == 0 else ("run", "--resume", run_dir)
            proc = cli.popen(*args)
            landed = _wait_for(proc, condition)
            if landed and point == "report":
                time.sleep(rng.uniform(0.05, 0.4))  # into report.md / plots
            if landed and proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                killed_at = time.monotonic()
            _, err = proc.communicate(timeout=60)
            if not landed or proc.returncode != -signal.SIGKILL:
                assert proc.returncode == 0, err
                kills.append({"point": point, "landed": False})
                continue
            torn_by_test = point == "generation" and not any(k.get("torn_by_test") for k in kills)
            if torn_by_test:  # as if the kill had landed inside the last line's write: keep half of it
                data = preds_path.read_bytes()
                start = data.rfind(b"\n", 0, len(data) - 1) + 1
                preds_path.write_bytes(data[: start + (len(data) - start) // 2])
            recorded = {r["prompt_hash"] for r in _complete_lines(preds_path)}
            kills.append({"point": point, "landed": True, "at": killed_at, "recorded": recorded,
                          "cached": _cache_entries(cli.cache_dir), "torn_tail": not preds_path.read_bytes().endswith(b"\n"),
                          "torn_by_test": torn_by_test})

        final = cli("run", "--resume", run_dir)
        assert final.returncode == 0, final.stderr
        assert "Traceback" not in final.stderr
        report = cli("report", run_dir, "--no-plots")
        assert report.returncode == 0, report.stderr
        calls = log.calls[ref_calls:]
    finally:
        server.stop()

    landed = [k for k in kills if k["landed"]]
    assert sum(k["point"] == "generation" for k in landed) == 3, kills
    assert sum(k["torn_tail"] for k in landed) >= 1, "the torn-line case was not exercised"

    # Exactly one whole line per (task, id, config); nothing torn; every example recorded.
    raw = preds_path.read_bytes()
    assert raw.endswith(b"\n")
    records = [json.loads(line) for line in raw.splitlines()]
    keys = [(r["task"], r["id"], r["config_hash"]) for r in records]
    assert len(keys) == len(set(keys)) == TOTAL

    # Same predictions and same scores as the uninterrupted run.
    ref_records = rel.read_jsonl(ref_dir / "predictions.jsonl")
    assert {k: r["prediction"] for k, r in zip(keys, records)} == {
        (r["task"], r["id"], r["config_hash"]): r["prediction"] for r in ref_records
    }
    cells = lambda d: sorted((c["task"], c["config_hash"], c["score"], c["n"], c["n_failed"])  # noqa: E731
                             for c in json.loads((d / "scores.json").read_text())["cells"])
    assert cells(run_dir) == cells(ref_dir)

    # No model call whose prediction was recorded before a kill was made again after it.
    for k in landed:
        again = {h for t, h in calls if t > k["at"] and h in k["recorded"]}
        assert not again, f"after the {k['point']} kill, {len(again)} recorded prompt(s) were requested again"
    per_prompt: dict[str, int] = {}
    for _, h in calls:
        per_prompt[h] = per_prompt.get(h, 0) + 1
    assert set(per_prompt) == {r["prompt_hash"] for r in records}
    repeated = sum(per_prompt.values()) - len(per_prompt)
    # a prompt is asked again only if its request was in flight when a kill landed: at most concurrency (2) per kill
    assert repeated <= len(landed) * 2, per_prompt
    assert len(calls) == len(per_prompt) + repeated and len(per_prompt) <= TOTAL

    figures["kill_resume"] = {
        "examples": TOTAL,
        "kills_attempted": len(kills),
        "kills_survived": len(landed),
        "kills_by_point": {p: sum(k["point"] == p for k in landed) for p in dict.fromkeys(k["point"] for k in kills)},
        "kills_between_cache_write_and_record": sum(k["cached"] > len(k["recorded"]) for k in landed),
        "torn_tails_repaired": sum(k["torn_tail"] for k in landed),
        "torn_tails_made_by_the_test": sum(k["torn_by_test"] for k in landed),
        "model_calls_total": len(calls),
        "model_calls_repeated_in_flight_at_kill": repeated,
        "recorded_predictions_requested_again": 0,
        "predictions_lost": TOTAL - len(set(keys)),
        "predictions_duplicated": len(keys) - len(set(keys)),
    }


@pytest.mark.slow
def test_a_killed_judge_asks_again_only_what_was_in_flight(tmp_path, rel, cli, figures):
    """The judge follows the run's rule: each verdict reaches the generation cache as it returns, so a SIGKILL in
    the middle of a batch (16 predictions, 32 prompts) costs at most ``concurrency`` repeated calls."""
    from experiments.run.api import evaluate

    n = 24
    config = rel.synthetic_config({"name": "extractive"}, n_qa=n)
    run_dir = tmp_path / "run"
    evaluate(config, run_dir, report=False, progress=False)
    asked: list[str] = []
    lock = threading.Lock()

    def verdict(prompt: str, body: dict) -> str:
        with lock:
            asked.append(prompt_hash(prompt))
        return "Both are fine, A a little more. [[A]]"

    server = FakeOpenAIServer(responder=verdict, service_time_s=0.05, max_concurrency=2).start()
    try:
        judge = tmp_path / "judge.yaml"
        judge.write_text(yaml.safe_dump(rel.openai_reader(server.base_url, concurrency=2)), encoding="utf-8")
        proc = cli.popen("judge", run_dir, "--judge", judge)
        assert _wait_for(proc, lambda: len(asked) >= 10), "the judge finished before the kill point"
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        assert not (run_dir / "judgements.jsonl").exists() or not _complete_lines(run_dir / "judgements.jsonl"), \
            "the kill was meant to land inside the first batch"
        before_kill = len(asked)
        again = cli("judge", run_dir, "--judge", judge)
        assert again.returncode == 0, again.stderr
    finally:
        server.stop()
    judged = _complete_lines(run_dir / "judgements.jsonl")
    assert len(judged) == n and all(j["status"] == "ok" for j in judged)
    repeated = len(asked) - len(set(asked))
    assert len(set(asked)) == 2 * n  # both orders of every prediction
    assert repeated <= 2, f"{repeated} verdicts were asked again after one kill (concurrency 2)"
    figures["judge_kill"] = {"predictions": n, "judge_calls_before_kill": before_kill, "judge_calls_total": len(asked),
                             "judge_calls_repeated": repeated}
