"""Reader speed, as ratios from one run (results are recorded in docs/readers.md, "Benchmarks").

1. OpenAI-compatible reader throughput against the local fake server with a
   fixed service time and concurrency cap, as a fraction of the server's
   capacity (``max_concurrency / service_time_s`` requests/s); target >= 0.8.
2. Cache-hit re-run wall time as a fraction of the cold run; target < 2%.
3. The offline SmolLM2 reader: prompt (prefill) and generated tokens/s, and
   batch 8 vs batch 1 wall time on a few short prompts (skip with --no-model).

Usage: ``python benchmarks/bench_readers.py [--no-model] [--requests 240]``.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

from readers.base import GenerationRequest
from readers.cache import CachedReader
from readers.openai_compat import OpenAICompatReader
from testkit.fake_openai import FakeOpenAIServer


def qa_requests(n: int) -> list[GenerationRequest]:
    return [GenerationRequest(prompt=f"Fact {i}: the door code is {i * 37 % 1000}.\nQuestion: what is fact {i}?",
                              max_new_tokens=16) for i in range(n)]


def bench_throughput(n: int, service_time_s: float, server_concurrency: int, reader_concurrency: int) -> float:
    os.environ.setdefault("CTXCOMP_BENCH_KEY", "sk-bench")
    with FakeOpenAIServer(service_time_s=service_time_s, max_concurrency=server_concurrency,
                          max_requests=n + 10) as server:
        reader = OpenAICompatReader("fake-model", base_url=server.base_url, concurrency=reader_concurrency,
                                    api_key_env="CTXCOMP_BENCH_KEY")
        start = time.perf_counter()
        gens = reader.generate(qa_requests(n))
        elapsed = time.perf_counter() - start
        reader.close()
    assert all(g.ok for g in gens)
    achieved, capacity = n / elapsed, server_concurrency / service_time_s
    print(f"throughput: {n} requests in {elapsed:.2f}s = {achieved:.1f} req/s; capacity {capacity:.1f} req/s; "
          f"ratio {achieved / capacity:.3f} (reader concurrency {reader_concurrency})")
    return achieved / capacity


def bench_cache(n: int, service_time_s: float) -> float:
    with FakeOpenAIServer(service_time_s=service_time_s, max_concurrency=8) as server, \
            tempfile.TemporaryDirectory() as folder:
        def run() -> float:
            reader = CachedReader(OpenAICompatReader("fake-model", base_url=server.base_url,
                                                     api_key_env="CTXCOMP_BENCH_KEY"), folder)
            start = time.perf_counter()
            reader.generate(qa_requests(n))
            reader.close()
            return time.perf_counter() - start

        cold, warm = run(), run()
        assert server.stats["requests"] == n
    print(f"cache: cold {cold:.3f}s, all-hit re-run {warm * 1000:.1f} ms; ratio {warm / cold:.4f} "
          f"({n} requests, service time {service_time_s}s)")
    return warm / cold


def bench_smollm2() -> None:
    import torch

    from readers.smollm2 import SmolLM2Reader

    start = time.perf_counter()
    reader = SmolLM2Reader(device="cpu")
    print(f"smollm2: load {time.perf_counter() - start:.1f}s (from cache: {reader.loaded_from_cache}); "
          f"torch threads {torch.get_num_threads()}")
    tok, model = reader.hf_tokenizer, reader.model
    long_ids = tok(" ".join(["The river runs past the old mill and the stone bridge."] * 48),
                   return_tensors="pt")["input_ids"][:, :512]
    with torch.inference_mode():
        model(long_ids)  # warm-up
        start = time.perf_counter()
        model(long_ids)
        prefill = time.perf_counter() - start
        short = tok("Write a long story about a dragon.", return_tensors="pt")
        timings = {}
        for n_new in (1, 65):
            start = time.perf_counter()
            model.generate(**short, max_new_tokens=n_new, min_new_tokens=n_new, do_sample=False,
                           pad_token_id=tok.pad_token_id)
            timings[n_new] = time.perf_counter() - start
    decode_rate = 64 / (timings[65] - timings[1])
    print(f"smollm2: prompt {long_ids.shape[1] / prefill:.0f} tokens/s (512-token prefill), "
          f"generation {decode_rate:.1f} tokens/s (greedy, batch 1)")
    prompts = [GenerationRequest(prompt=f"Question: What is {a} plus {b}?", max_new_tokens=16)
               for a, b in [(2, 3), (10, 5), (7, 8), (1, 1), (6, 9), (4, 4), (12, 30), (100, 1)]]
    walls = {}
    for batch in (1, 8):
        reader.batch_size = batch
        reader.generate(prompts[:1])  # warm-up
        start = time.perf_counter()
        reader.generate(prompts)
        walls[batch] = time.perf_counter() - start
    print(f"smollm2: 8 short prompts, batch 1 {walls[1]:.2f}s, batch 8 {walls[8]:.2f}s; "
          f"batch-8 time as a fraction of batch-1: {walls[8] / walls[1]:.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=240)
    p.add_argument("--service-time-s", type=float, default=0.1)
    p.add_argument("--no-model", action="store_true", help="skip the SmolLM2 measurements")
    p.add_argument("--threads", type=int, default=None, help="torch threads (a busy machine is faster with 1)")
    p.add_argument("--model-only", action="store_true", help="only the SmolLM2 measurements")
    args = p.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.model_only:
        bench_smollm2()
        return
    os.environ.setdefault("CTXCOMP_BENCH_KEY", "sk-bench")
    bench_throughput(args.requests, args.service_time_s, server_concurrency=8, reader_concurrency=8)
    bench_throughput(args.requests, args.service_time_s, server_concurrency=8, reader_concurrency=16)
    bench_cache(100, 0.2)
    if not args.no_model:
        bench_smollm2()


if __name__ == "__main__":
    main()
