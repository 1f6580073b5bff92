"""Reader speed, as ratios from one run (results are recorded in docs/readers.md, "Benchmarks").

1. OpenAI-compatible reader throughput against the local fake server with a
   fixed service time and concurrency cap, as a fraction of the server's
   capacity (``max_concurrency / service_time_s`` requests/s); target >= 0.8.
2. Cache-hit re-run wall time as a fraction of the cold run; target < 2%.
3. Offline backends of the SmolLM2 reader (``--backends``), side by side:
   float32 transformers (the reference), bfloat16 transformers, llama.cpp.
   a. Speed, each backend in its own process (so peak memory is its own), in
      ``--rounds`` rounds whose order alternates: prefill tokens/s (time to the
      first generated token) and decode tokens/s (``--decode`` forced tokens
      after it) on the study's prompts, short (Lost in the Middle, 10
      documents) and long (L-Eval, full context cut to the reader's 4,096
      tokens); peak resident memory; the ratio of each to float32.
      ``llama_cpp:TYPE`` (``f32``, ``f16``, ``q8_0``, ``q4_0``) times llama.cpp
      on the packaged Q4_1 file requantized to that type (into a temporary
      folder, by llama.cpp's own quantizer): the types its fast prompt matrix
      code covers, which Q4_1 is not.  ``f32`` holds exactly the weights the
      transformers backend reads (both dequantize the same file).
   b. Agreement, on a slice of the CPU study (experiments/configs/study_cpu.yaml:
      L-Eval financial_qa and natural_question, full context and BM25 200x7;
      Lost in the Middle 10 random documents and 75-key KV retrieval, gold
      first / middle / last), read through the project's own runner code with
      each ``--arms`` reader (BACKEND@BATCH): the slice's wall time, the
      greedy outputs' exact-match rate against float32 batch 1, and the
      score difference with its paired 95% interval (experiments/inference/paired.py).
      (The study reads SmolLM2 at batch 4: ``fp32@4`` is what it does today;
      ``fp32-padded@4`` is the reader before it prefilled batch prompts apart.)
      ``--summ N`` adds N gov_report_summ documents (256 new tokens each), where
      decoding takes most of the time.
      The arm ``gemma3`` reads the slice with the second offline reader, so
      the two readers' scores are compared on the same prompts.
   c. Batching (``--batching``): the transformers backends read short study
      prompts at batch 1, 4 and 8: wall time and outputs equal to batch 1's.

The machine's load average is printed with every section.  Usage:
``python benchmarks/bench_readers.py [--no-model | --model-only] [--backends fp32,bf16,llama_cpp]
[--arms fp32@1,fp32@4,...] [--leval 3 --litm 4 --summ 2]``.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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


STUDY = Path(__file__).resolve().parents[1] / "experiments" / "configs" / "study_cpu.yaml"
LEVAL, LITM = ("financial_qa", "natural_question"), ("litm_10docs_random", "kv_75")
SUMM = "gov_report_summ"  # --summ: long outputs (256 new tokens), where decoding takes most of the time
STUDY_READER = {"max_context": 4096}  # as study_cpu.yaml reads
BACKENDS: dict[str, dict[str, Any]] = {
    "fp32": {"backend": "transformers", "dtype": "float32", "device": "cpu"},
    "bf16": {"backend": "transformers", "dtype": "bfloat16", "device": "cpu"},
    # float32 as it was read before prompts were prefilled one at a time: a padded batch prefilled together
    "fp32-padded": {"backend": "transformers", "dtype": "float32", "device": "cpu", "prefill_apart": False},
    "llama_cpp": {"backend": "llama_cpp"},
}


def load_average() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def reader_section(backend: str, batch_size: int = 1, threads: int | None = None) -> dict[str, Any]:
    """The study's SmolLM2 reader section with this backend; ``threads`` goes to llama.cpp (torch's is process-wide)."""
    if backend == "extractive":  # the model-free baseline: a seconds-long smoke run of this script's tables
        return {"name": "extractive"}
    if backend == "gemma3":  # the second offline reader (Gemma 3 270M base, llama.cpp): another strength
        return {"name": "gemma3", "params": {**STUDY_READER, **({"n_threads": threads} if threads else {})}}
    extra = {"n_threads": threads} if threads and backend == "llama_cpp" else {}
    return {"name": "smollm2", "params": {**STUDY_READER, **BACKENDS[backend], "batch_size": batch_size, **extra}}


def set_torch_threads(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


def slice_config(n_leval: int, n_litm: int, reader: dict[str, Any], n_kv: int = 1, n_summ: int = 0) -> Any:
    """The study's own task and compressor sections for the slice, with smaller limits and one reader."""
    import yaml

    from experiments.run.config import parse_config

    study = yaml.safe_load(STUDY.read_text(encoding="utf-8"))
    limits = {"kv_75": n_kv, "litm_10docs_random": n_litm, SUMM: n_summ, **dict.fromkeys(LEVAL, n_leval)}
    tasks = [{**t, "limit": limits[t["label"]]} for t in study["tasks"] if limits.get(t["label"], 0) > 0]
    bm25 = next(c for c in study["compressors"] if isinstance(c, dict) and c.get("name") == "retrieval")
    compressors = ["full", {**bm25, "params": {**bm25["params"], "chunk_size": 200, "top_n": 7},
                            "tasks": [*LEVAL, SUMM] if n_summ else list(LEVAL)}]
    compressors[1].pop("zip", None)
    return parse_config({"name": "bench-readers", "tasks": tasks, "compressors": compressors, "readers": [reader],
                         "batch_size": 64}, str(STUDY))


def speed_prompts(n_leval: int, n_litm: int, n_tasks: int = 2) -> dict[str, list[GenerationRequest]]:
    """Short (Lost in the Middle, 10 documents) and long (L-Eval, full context; the first ``n_tasks`` tasks) study
    prompts, as the runner builds them."""
    from compressors.registry import make_compressor
    from experiments.run.examples import load_task_examples, task_spec
    from experiments.run.worker import prompt_options
    from experiments.tasks.prompts import build_request

    config = slice_config(n_leval, n_litm, reader_section("fp32"))
    full = make_compressor("full")
    out: dict[str, list[GenerationRequest]] = {"short": [], "long": []}
    for task in config.tasks:
        if task.label not in ("litm_10docs_random",) + LEVAL[:n_tasks]:
            continue
        spec, options = task_spec(task), prompt_options(task)
        examples = load_task_examples(task)[: n_leval if task.label in LEVAL else n_litm]
        out["long" if task.label in LEVAL else "short"] += [build_request(spec, full.compress(ex), ex, options)
                                                            for ex in examples]
    return out


LLAMA_TYPES = ("f32", "f16", "q8_0", "q4_0")


def requantized_reader(weight_type: str, threads: int | None) -> Any:
    """A llama.cpp reader of the packaged SmolLM2 file requantized to ``weight_type`` (``LLAMA_TYPES``)."""
    import llama_cpp

    from readers.llama_cpp import LlamaCppReader
    from readers.smollm2 import gguf_path

    if weight_type not in LLAMA_TYPES:
        raise SystemExit(f"llama_cpp:{weight_type}: the weight type must be one of {', '.join(LLAMA_TYPES)}")
    target = Path(tempfile.mkdtemp(prefix="bench-gguf-")) / f"smollm2.{weight_type}.gguf"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, "LLAMA_FTYPE_ALL_F32" if weight_type == "f32"
                           else f"LLAMA_FTYPE_MOSTLY_{weight_type.upper()}")
    params.allow_requantize = True
    if llama_cpp.llama_model_quantize(str(gguf_path()).encode(), str(target).encode(), params) != 0:
        raise SystemExit(f"llama.cpp could not requantize the packaged file to {weight_type}")
    try:
        return LlamaCppReader(target, max_context=STUDY_READER["max_context"], n_threads=threads)
    finally:  # loaded (mapped) by then: the file goes with the folder, its pages stay until the reader does
        shutil.rmtree(target.parent, ignore_errors=True)


def _time_one(reader: Any, backend: str, request: GenerationRequest, n_decode: int) -> tuple[int, float, float]:
    """(prompt tokens, seconds to the first generated token, seconds for ``n_decode`` more, forced) for one prompt."""
    if backend.startswith("llama_cpp"):
        engine = getattr(reader, "engine", reader)
        ids, _ = engine._prepare(request)
        engine.llm.reset()
        tokens = engine.llm.generate(ids, temp=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0)
        start = time.perf_counter()
        next(tokens)
        first = time.perf_counter()
        for _ in range(n_decode):
            next(tokens)
        return len(ids), first - start, time.perf_counter() - first
    import torch

    ids, _ = reader._prepare(request)
    marks: list[float] = []

    class Clock:  # a transformers streamer: the first put is the prompt, then one put per new token
        def put(self, value: Any) -> None:
            marks.append(time.perf_counter())

        def end(self) -> None:
            return None

    with torch.inference_mode():
        start = time.perf_counter()
        reader.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                              max_new_tokens=n_decode + 1, min_new_tokens=n_decode + 1, do_sample=False,
                              pad_token_id=reader.hf_tokenizer.pad_token_id, streamer=Clock())
    return len(ids), marks[1] - start, marks[-1] - marks[1]


def _speed_child(backend: str, prompts: dict[str, list[GenerationRequest]], n_decode: int, threads: int | None,
                 queue: Any) -> None:
    from readers.registry import make_reader

    set_torch_threads(threads)
    if backend.startswith("llama_cpp:"):
        reader = requantized_reader(backend.split(":", 1)[1], threads)
    else:
        section = reader_section(backend, threads=threads)
        reader = make_reader(section["name"], **section["params"])
    _time_one(reader, backend, prompts["short"][0], 2)  # warm-up
    result: dict[str, Any] = {"load_s": reader.load_s}
    for kind, requests in prompts.items():
        timed = [_time_one(reader, backend, r, n_decode) for r in requests]
        result[kind] = {"tokens": sum(t[0] for t in timed), "prefill": sum(t[0] for t in timed) / sum(t[1] for t in timed),
                        "decode": n_decode * len(timed) / sum(t[2] for t in timed)}
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put(result)


def bench_speed(backends: list[str], rounds: int, n_decode: int, prompts: dict[str, list[GenerationRequest]],
                threads: int | None) -> None:
    """Each backend in a fresh process, rounds in alternating order; the best round of each is reported."""
    context = multiprocessing.get_context("spawn")
    runs: dict[str, list[dict[str, Any]]] = {b: [] for b in backends}
    for r in range(rounds):
        for backend in backends if r % 2 == 0 else backends[::-1]:
            queue = context.Queue()
            child = context.Process(target=_speed_child, args=(backend, prompts, n_decode, threads, queue))
            child.start()
            result = queue.get()
            child.join()
            result["load"] = load_average()
            runs[backend].append(result)
            print(f"  round {r + 1} {backend}: short prefill {result['short']['prefill']:.0f} tok/s, long prefill "
                  f"{result['long']['prefill']:.0f} tok/s, decode {result['long']['decode']:.1f} tok/s ({result['load']})")
    counts = ", ".join(f"{len(v)} {k}" for k, v in prompts.items())
    print(f"speed ({counts} prompts; best of {rounds} rounds; decode = {n_decode} forced tokens after each long prompt; "
          f"threads: {threads or 'default'}):")
    ref = runs[backends[0]]
    print("| backend | prefill tok/s, short | prefill tok/s, long | x fp32 (long) | decode tok/s, long | x fp32 | "
          "peak RSS MB | load s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for b in backends:
        pre_s = max(run["short"]["prefill"] for run in runs[b])
        pre_l = max(run["long"]["prefill"] for run in runs[b])
        dec = max(run["long"]["decode"] for run in runs[b])
        ref_l = max(run["long"]["prefill"] for run in ref)
        ref_d = max(run["long"]["decode"] for run in ref)
        print(f"| {b} | {pre_s:.0f} | {pre_l:.0f} | {pre_l / ref_l:.2f} | {dec:.1f} | {dec / ref_d:.2f} | "
              f"{max(run['peak_rss_mb'] for run in runs[b]):.0f} | {min(run['load_s'] for run in runs[b]):.1f} |")


def read_slice(arm: str, n_leval: int, n_litm: int, n_kv: int, threads: int | None,
               n_summ: int = 0) -> tuple[dict[tuple[str, str, str], Any], float]:
    """The slice read by one arm (``BACKEND@BATCH``) through the runner's worker, with an empty generation cache."""
    from experiments.run.plan import pending_units
    from experiments.run.worker import Worker

    backend, batch = arm.split("@") if "@" in arm else (arm, "1")
    config = slice_config(n_leval, n_litm, reader_section(backend, int(batch), threads), n_kv, n_summ)
    from core.paths import model_cache_root

    os.environ.setdefault("CTXCOMP_MODEL_CACHE_DIR", str(model_cache_root()))  # keep the converted model
    with tempfile.TemporaryDirectory() as cache:
        os.environ["CTXCOMP_CACHE_DIR"] = cache  # no generation from an earlier arm or run
        worker = Worker(config)
        units, _ = pending_units(worker, set())
        worker.reader(worker.grid[0])  # load the model before the clock
        start = time.perf_counter()
        predictions = {}
        for unit in units:
            result = worker.process(unit)
            if result.failures:
                raise RuntimeError(f"{arm}: {result.failures[0]}")
            predictions.update({(p.task, p.id, p.compressor): p for p in result.predictions})
        elapsed = time.perf_counter() - start
        worker.close()
    return predictions, elapsed


def bench_agreement(arms: list[str], n_leval: int, n_litm: int, n_kv: int, threads: int | None,
                    n_summ: int = 0) -> None:
    """Exact match and paired score difference of each arm against the first (float32, batch 1), a row per arm as
    soon as it is read."""
    from experiments.inference.paired import paired_delta
    from experiments.inference.results import format_delta

    ref_preds, ref_s = read_slice(arms[0], n_leval, n_litm, n_kv, threads, n_summ)
    keys = sorted(ref_preds)
    groups = {"all": keys, "L-Eval": [k for k in keys if k[0] in (*LEVAL, SUMM)], "LITM": [k for k in keys if k[0] in LITM]}
    print(f"agreement with {arms[0]} on the study slice ({len(keys)} predictions; score difference = arm - reference, "
          f"x 100, paired 95% interval, strata = tasks; {load_average()}):")
    print("| arm | slice wall s | speed-up | same prompts | exact match | score | difference (all) | "
          "difference (L-Eval) | difference (LITM) | load average |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for arm in arms:
        preds, seconds = (ref_preds, ref_s) if arm == arms[0] else read_slice(arm, n_leval, n_litm, n_kv, threads, n_summ)
        same_prompt = sum(preds[k].prompt_hash == ref_preds[k].prompt_hash for k in keys) / len(keys)
        exact = sum(preds[k].prediction == ref_preds[k].prediction for k in keys) / len(keys)
        score = 100 * statistics.mean(preds[k].score for k in keys)
        deltas = [paired_delta([ref_preds[k].score for k in g], [preds[k].score for k in g],
                               strata=[k[0] for k in g]) for g in groups.values() if g]
        print(f"| {arm} | {seconds:.1f} | {ref_s / seconds:.2f} | {same_prompt:.2f} | {exact:.2f} | {score:.1f} | "
              + " | ".join(f"{format_delta(d)} (n={d.n})" for d in deltas) + f" | {load_average()[13:]} |", flush=True)


def bench_batching(backends: list[str], n_prompts: int, threads: int | None) -> None:
    """One reader per backend, ``n_prompts`` short study prompts read at batch 1, 4 and 8 (sorted by length, left
    padding, attention mask): wall time, speed-up over batch 1, and outputs equal to batch 1's."""
    from readers.registry import make_reader

    requests = speed_prompts(1, n_prompts)["short"]
    print(f"batching ({len(requests)} short prompts, {requests[0].max_new_tokens} new tokens at most; {load_average()}):")
    print("| backend | batch | wall s | speed-up vs batch 1 | outputs equal to batch 1 |")
    print("| --- | --- | --- | --- | --- |")
    for backend in backends:
        section = reader_section(backend, 1, threads)
        reader = make_reader(section["name"], **section["params"])
        reader.generate(requests[:1])  # warm-up
        base: tuple[list[str], float] | None = None
        for batch in (1, 4, 8):
            reader.batch_size = batch
            start = time.perf_counter()
            texts = [g.text for g in reader.generate(requests)]
            wall = time.perf_counter() - start
            base = base or (texts, wall)
            same = sum(a == b for a, b in zip(texts, base[0]))
            print(f"| {backend} | {batch} | {wall:.1f} | {base[1] / wall:.2f} | {same}/{len(texts)} |")
        reader.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=240)
    p.add_argument("--service-time-s", type=float, default=0.1)
    p.add_argument("--no-model", action="store_true", help="skip the offline backends (3)")
    p.add_argument("--model-only", action="store_true", help="only the offline backends (3)")
    p.add_argument("--backends", default="fp32,bf16,llama_cpp",
                   help="3a: backends to time (the first is the reference); llama_cpp:f16 etc.: requantized weights")
    p.add_argument("--arms", default="fp32@1,fp32@4,bf16@1,bf16@4,llama_cpp",
                   help="3b: BACKEND@BATCH readers of the study slice (the first is the reference); '' skips 3b")
    p.add_argument("--batching", default="fp32,bf16", help="3c: transformers backends read at batch 1, 4, 8")
    p.add_argument("--batch-prompts", type=int, default=8, help="short prompts for the batching measurement")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--decode", type=int, default=32, help="forced tokens for the decode rate")
    p.add_argument("--leval", type=int, default=2, help="L-Eval questions per task in the slice")
    p.add_argument("--litm", type=int, default=3, help="Lost in the Middle 10-document questions (x 3 positions)")
    p.add_argument("--kv", type=int, default=1, help="75-key KV retrieval examples (x 3 positions)")
    p.add_argument("--summ", type=int, default=0, help="gov_report_summ documents in the slice (256 new tokens)")
    p.add_argument("--speed-prompts", type=int, default=2, help="prompts per task for the speed measurement")
    p.add_argument("--threads", type=int, default=None,
                   help="threads for every backend (default: torch's default and llama.cpp's every core; "
                        "a busy 2-core machine is faster with 1)")
    args = p.parse_args()
    print(f"start: {load_average()}, {os.cpu_count()} cores")
    if not args.model_only:
        os.environ.setdefault("CTXCOMP_BENCH_KEY", "sk-bench")
        bench_throughput(args.requests, args.service_time_s, server_concurrency=8, reader_concurrency=8)
        bench_throughput(args.requests, args.service_time_s, server_concurrency=8, reader_concurrency=16)
        bench_cache(100, 0.2)
    if args.no_model:
        return
    backends = [b for b in args.backends.split(",") if b]
    if backends:
        bench_speed(backends, args.rounds, args.decode, speed_prompts(args.speed_prompts, args.speed_prompts, 1),
                    args.threads)
    arms = [a for a in args.arms.split(",") if a]
    if arms:
        set_torch_threads(args.threads)
        bench_agreement(arms, args.leval, args.litm, args.kv, args.threads, args.summ)
    batching = [b for b in args.batching.split(",") if b]
    if batching:
        set_torch_threads(args.threads)
        bench_batching(batching, args.batch_prompts, args.threads)
    print(f"end: {load_average()}")


if __name__ == "__main__":
    main()
