"""Scale-out, as ratios from one run (results are recorded in docs/benchmarks.md, "Scale-out").

(a) A CPU-bound grid (BM25 retrieval compression at three top-N plus full
    context, extractive reader, long synthetic multi-document QA): the local
    executor vs the Ray executor with ``--workers`` actors on this machine;
    throughput ratio, target >= 1.6x with 2 workers on 2 cores.  Each run gets
    a fresh generation cache and new examples, so nothing is served from an
    earlier run; both sides load their examples (and Ray starts its actors)
    before the clock starts, so this is steady-state throughput.
(b) The OpenAI-compatible reader against 1 and against 3 fake servers, each
    with a fixed service time and a concurrency cap (capacity ``cap /
    service_time`` requests/s per server); targets: the fleet >= 2.5x one
    server's throughput and >= 0.8 of the fleet's capacity.
(c) Ray's start-up overhead: the wall time of a 10-example run with the Ray
    executor (start a local instance, start and prepare the actors, run, shut
    down) minus the same run with the local executor.

Usage: ``python benchmarks/bench_scale.py [--only a|b|c] [--examples 240] [--workers 2]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.run.config import parse_config
from experiments.run.driver import Runner
from readers.base import GenerationRequest
from readers.openai_compat import OpenAICompatReader
from testkit.fake_openai import FakeOpenAIServer


def grid(n: int, seed: int = 3) -> dict:
    return {
        "name": "bench-scale",
        "tasks": [{"name": "nq_multidoc",
                   "synthetic": {"kind": "multidoc_qa", "n": n, "num_docs": 40, "words_per_doc": 200, "seed": seed}}],
        "compressors": ["full", {"name": "retrieval", "params": {"retriever": "bm25", "chunk_size": 100,
                                                                 "top_n": [1, 3, 5]}}],
        "readers": ["extractive"],
        "batch_size": 4,
    }


def timed_run(config: dict, folder: Path, executor=None, warm: bool = False) -> tuple[float, int]:
    """(wall seconds of Runner.run, predictions) with a fresh generation cache.

    ``warm``: examples loaded and Ray actors started and prepared before the clock starts (steady-state
    throughput; start-up is what (c) measures)."""
    os.environ["CTXCOMP_CACHE_DIR"] = str(folder / "cache")
    cfg = parse_config(config)
    runner = Runner(cfg, folder / "run", progress=False, executor=executor)
    if executor is not None:
        executor.share_examples(runner.worker)
    if warm:
        for task in cfg.tasks:
            runner.worker.examples(task)
        if executor is not None:
            executor.start(cfg)
    start = time.perf_counter()
    stats = runner.run()
    wall = time.perf_counter() - start
    runner.close() if executor is None else runner.worker.close()
    return wall, stats.predicted


def bench_grid(n: int, workers: int, rounds: int) -> None:
    from experiments.run.executors import RayExecutor

    t0 = time.perf_counter()
    pool = RayExecutor(workers=workers, progress=False)
    print(f"(a) Ray local instance up in {time.perf_counter() - t0:.1f}s; {workers} workers")
    local_walls, ray_walls = [], []
    try:
        for r in range(rounds):  # alternate, so a neighbour's load hits both sides alike
            config = grid(n, seed=r)  # new examples each round: nothing can come from a worker's earlier cache
            with tempfile.TemporaryDirectory() as tmp:
                wall, done = timed_run(config, Path(tmp), warm=True)
                local_walls.append(wall)
            with tempfile.TemporaryDirectory() as tmp:
                wall_r, done_r = timed_run(config, Path(tmp), pool, warm=True)
                ray_walls.append(wall_r)
            assert done == done_r, (done, done_r)
            print(f"(a) round {r + 1}: {done} predictions; local {wall:.2f}s ({done / wall:.1f}/s), "
                  f"ray {wall_r:.2f}s ({done / wall_r:.1f}/s), ratio {wall / wall_r:.2f}x")
    finally:
        pool.close()
    best_local, best_ray = min(local_walls), min(ray_walls)
    print(f"(a) CPU-bound grid, best of {rounds}: local {best_local:.2f}s, ray x{workers} {best_ray:.2f}s; "
          f"throughput ratio {best_local / best_ray:.2f}x (target >= 1.6x); "
          f"median ratio {sorted(l / r for l, r in zip(local_walls, ray_walls))[rounds // 2]:.2f}x")


def qa_requests(n: int) -> list[GenerationRequest]:
    return [GenerationRequest(prompt=f"Fact {i}: the door code is {i * 37 % 1000}.\nQuestion: what is fact {i}?",
                              max_new_tokens=16) for i in range(n)]


def bench_fleet(service_time_s: float, cap: int, per_server_requests: int, reader_concurrency: int) -> None:
    os.environ.setdefault("CTXCOMP_BENCH_KEY", "sk-bench")

    def measure(n_servers: int) -> float:
        n = per_server_requests * n_servers
        servers = [FakeOpenAIServer(service_time_s=service_time_s, max_concurrency=cap, max_requests=n + 10).start()
                   for _ in range(n_servers)]
        try:
            reader = OpenAICompatReader("fake-model", base_urls=[s.base_url for s in servers],
                                        concurrency=reader_concurrency, api_key_env="CTXCOMP_BENCH_KEY")
            reader.generate(qa_requests(4))  # warm the connection pool
            start = time.perf_counter()
            gens = reader.generate(qa_requests(n))
            elapsed = time.perf_counter() - start
            reader.close()
            spread = [s.stats["requests"] for s in servers]
        finally:
            for s in servers:
                s.stop()
        assert all(g.ok for g in gens)
        capacity = n_servers * cap / service_time_s
        print(f"(b) {n_servers} server(s): {n} requests in {elapsed:.2f}s = {n / elapsed:.1f} req/s; capacity "
              f"{capacity:.0f} req/s ({n / elapsed / capacity:.2f} of it); requests per server {spread}")
        return n / elapsed

    one, three = measure(1), measure(3)
    print(f"(b) fleet of 3 vs 1 server: {three / one:.2f}x (target >= 2.5x); fleet at "
          f"{three / (3 * cap / service_time_s):.2f} of its capacity (target >= 0.8)")


def bench_startup(workers: int) -> None:
    from experiments.run.executors import RayExecutor

    config = grid(10)
    config["compressors"] = ["full"]
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        wall_run, done = timed_run(config, Path(tmp) / "local")
        local = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        pool = RayExecutor(workers=workers, progress=False)
        up = time.perf_counter() - start
        wall_ray_run, done_r = timed_run(config, Path(tmp) / "ray", pool)
        pool.close()
        total = time.perf_counter() - start
    assert done == done_r == 10
    print(f"(c) 10-example run: local {local:.2f}s; ray {total:.2f}s (instance start {up:.2f}s, run incl. actor start "
          f"{wall_ray_run:.2f}s, shutdown {total - up - wall_ray_run:.2f}s); Ray overhead {total - local:.2f}s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", choices=["a", "b", "c"], default=None)
    p.add_argument("--examples", type=int, default=240, help="(a) examples per grid point")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3, help="(a) alternating local / Ray rounds")
    p.add_argument("--service-time-s", type=float, default=0.2)
    p.add_argument("--cap", type=int, default=8, help="(b) requests each fake server serves at once")
    p.add_argument("--requests", type=int, default=200, help="(b) requests per server")
    args = p.parse_args()
    os.environ["CTXCOMP_NO_PROGRESS"] = "1"
    if args.only in (None, "b"):
        bench_fleet(args.service_time_s, args.cap, args.requests, reader_concurrency=args.cap)
    if args.only in (None, "c"):
        bench_startup(args.workers)
    if args.only in (None, "a"):
        bench_grid(args.examples, args.workers, args.rounds)


if __name__ == "__main__":
    main()
