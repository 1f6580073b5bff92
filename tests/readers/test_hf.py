"""HFReader on tiny locally built models: determinism, order under batching, truncation bounds, chat template."""
from __future__ import annotations

import pytest

from readers.base import GenerationRequest, ReaderError
from readers.hf import HFReader

PROMPTS = [
    "the cat sat on the mat",
    "a much longer prompt about rivers mountains valleys and the sea that keeps going on and on",
    "short",
    "medium length prompt about apples",
    "another one about the weather today in the city",
]


@pytest.fixture(scope="module")
def causal(tiny_causal_dir):
    return HFReader(str(tiny_causal_dir), batch_size=1, device="cpu")


def reqs(n_new=6):
    return [GenerationRequest(prompt=p, max_new_tokens=n_new) for p in PROMPTS]


def test_greedy_is_deterministic_and_batching_keeps_input_order(causal, tiny_causal_dir):
    one_by_one = [causal.generate([r])[0] for r in reqs()]
    assert [g.text for g in causal.generate(reqs())] == [g.text for g in one_by_one]
    batched = HFReader(str(tiny_causal_dir), batch_size=4, device="cpu").generate(reqs())
    # left padding + attention mask: each row decodes as it would alone (greedy, float32, tiny model)
    assert [g.text for g in batched] == [g.text for g in one_by_one]
    assert [g.tokens_in for g in batched] == [len(causal.hf_tokenizer(p)["input_ids"]) for p in PROMPTS]
    assert all(0 < g.tokens_out <= 6 and g.ok and not g.truncated for g in batched)
    assert {g.meta["batch_size"] for g in batched} == {4, 1}
    assert {g.meta["prefill"] for g in batched if g.meta["batch_size"] == 4} == {"apart"}


def test_prefilling_apart_decodes_as_the_padded_batch_and_as_one_by_one(tiny_causal_dir, monkeypatch):
    """Each prompt prefilled alone, its cache left-padded into the batch's: the same tokens as batch 1 and as
    the padded prefill, over enough steps for any misplaced key, value or position to show."""
    prompts = [" ".join(["river stone", "blue", "north wind"][: 1 + i % 3] * (1 + i)) for i in range(6)]
    requests = [GenerationRequest(prompt=p, max_new_tokens=16) for p in prompts]
    reader = HFReader(str(tiny_causal_dir), batch_size=6, device="cpu")
    apart = reader.generate(requests)
    assert {g.meta["prefill"] for g in apart} == {"apart"} and len({g.tokens_in for g in apart}) > 3
    monkeypatch.setattr(HFReader, "_prefill_apart", lambda self, enc: None)
    together = reader.generate(requests)
    assert {g.meta["prefill"] for g in together} == {"together"}
    alone = [reader.generate([r])[0] for r in requests]
    assert [g.text for g in apart] == [g.text for g in together] == [g.text for g in alone]
    assert all(g.tokens_out > 3 for g in apart)


def test_truncation_bounds_the_input(causal):
    long = " ".join(["river", "stone"] * 100)
    [gen] = causal.generate([GenerationRequest(prompt=long, max_new_tokens=8)])
    assert causal.max_context == 64  # from max_position_embeddings
    assert gen.truncated and gen.tokens_in + 8 <= 64
    assert gen.tokens_in >= 64 - 8 - 3  # the budget is used, minus [CLS]/[SEP] and LongBench's floor(M/2)*2


def test_truncation_none_sends_everything(tiny_causal_dir):
    reader = HFReader(str(tiny_causal_dir), truncation="none", max_context=48, device="cpu")
    [gen] = reader.generate([GenerationRequest(prompt="word " * 30, max_new_tokens=2)])
    assert not gen.truncated and gen.tokens_in == 32


def test_chat_template_is_applied_once(tiny_causal_dir, wordpiece_tokenizer):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_causal_dir))
    tok.chat_template = "{% for m in messages %}<user> {{ m['content'] }} </user>{% endfor %}<bot>"
    reader = HFReader(str(tiny_causal_dir), tokenizer=tok, device="cpu")
    rendered = tok.decode(reader._render("hello there", chat=True))
    assert rendered.count("< user >") == 1 and rendered.endswith("< bot >")
    chat, plain = reader.generate([GenerationRequest(prompt="hello there", max_new_tokens=2),
                                   GenerationRequest(prompt="hello there", max_new_tokens=2, chat=False)])
    assert chat.tokens_in == len(tok("<user> hello there </user><bot>", add_special_tokens=False)["input_ids"])
    assert plain.tokens_in == len(tok("hello there")["input_ids"])


def test_the_template_overhead_is_what_the_window_loses_to_the_chat_turns(tiny_causal_dir):
    """``prompt_overhead`` is the rendered template's share of the window, so a run can tell how many of the prompt's
    own tokens the cut removed (``tokens_seen``): the tokens kept of the prompt are the window less the answer
    and exactly that overhead."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_causal_dir))
    tok.chat_template = "{% for m in messages %}<user> {{ m['content'] }} </user>{% endfor %}<bot>"
    reader = HFReader(str(tiny_causal_dir), tokenizer=tok, device="cpu")
    chat = GenerationRequest(prompt=" ".join(["river", "stone"] * 100), max_new_tokens=8)
    plain = GenerationRequest(prompt=chat.prompt, max_new_tokens=8, chat=False)
    assert reader.prompt_overhead(chat) == len(tok("<user>  </user><bot>", add_special_tokens=False)["input_ids"]) > 0
    assert reader.prompt_overhead(plain) == len(tok("")["input_ids"])  # [CLS] [SEP] around a raw prompt
    for req in (chat, plain):
        [gen] = reader.generate([req])
        kept = gen.tokens_in - reader.prompt_overhead(req)
        room = reader.max_context - 8 - reader.prompt_overhead(req)
        assert gen.truncated and room - 1 <= kept <= room  # LongBench's middle cut keeps 2 * (M // 2)


def test_chat_without_template_is_an_error(causal):
    with pytest.raises(ReaderError, match="no chat template"):
        causal.generate([GenerationRequest(prompt="x", chat=True)])


def test_seq2seq_model(tiny_t5_dir):
    reader = HFReader(str(tiny_t5_dir), batch_size=3, device="cpu", max_context=40)
    assert reader.is_encoder_decoder
    gens = reader.generate(reqs(4))
    alone = [reader.generate([r])[0].text for r in reqs(4)]
    assert [g.text for g in gens] == alone
    assert all(g.tokens_out <= 4 for g in gens)
    [long] = reader.generate([GenerationRequest(prompt="tide " * 100, max_new_tokens=4)])
    assert long.truncated and long.tokens_in <= 36


def test_identity_changes_with_output_relevant_settings(tiny_causal_dir, causal):
    other = HFReader(str(tiny_causal_dir), truncation="left", device="cpu")
    assert causal.identity != other.identity and str(tiny_causal_dir) in causal.identity
    assert ":dtype=float32:" in causal.identity  # bf16 on a GPU would be another cache key


def test_cpu_defaults_are_unchanged(causal, tiny_causal_dir):
    """On a CPU: 4 prompts a batch, no token budget, each prompt prefilled alone; the identity names no batching."""
    reader = HFReader(str(tiny_causal_dir), device="cpu")
    assert (reader.batch_size, reader.batch_tokens, reader.prefill_apart) == (4, None, True)
    assert reader.identity == (f"hf:{tiny_causal_dir}:gguf=None:rev=None:tokenizer={tiny_causal_dir}:dtype=float32"
                               ":chat=None:max_context=64:truncation=middle")


def test_batches_are_sized_in_padded_tokens_longest_first(tiny_causal_dir):
    """``batch_tokens`` bounds prompts x (longest prompt + new tokens) per batch; a prompt over it runs alone."""
    reader = HFReader(str(tiny_causal_dir), device="cpu", batch_size=100, batch_tokens=60)
    requests = [GenerationRequest(prompt=" ".join(["word"] * n), max_new_tokens=4) for n in (3, 40, 9, 10, 2, 11)]
    lengths = [len(reader._prepare(r)[0]) for r in requests]
    batches = reader._batches(requests, lengths)
    assert [i for b in batches for i in b] == sorted(range(6), key=lambda i: -lengths[i])
    assert batches[0] == [1]  # 42 + 4 tokens: one fits, two would not
    for batch in batches[1:]:
        assert len(batch) * (max(lengths[i] for i in batch) + 4) <= 60
    assert len(batches) < len(requests) - 1  # short prompts do share batches
    got = reader.generate(requests)
    alone = [reader.generate([r])[0] for r in requests]
    assert [g.text for g in got] == [g.text for g in alone]
    assert sorted(g.meta["batch_size"] for g in got) == sorted(len(b) for b in batches for _ in b)


def test_gpu_defaults_from_the_models_shapes():
    """On cuda the padded prefill, and a token budget from free memory over the KV + activation bytes a token
    takes: Llama-3.2-1B's shapes in bfloat16 hold 32 KiB of keys and values per token."""
    from transformers import LlamaConfig

    from readers.hf_model import default_batch_tokens, default_prefill_apart, kv_bytes_per_token

    assert default_prefill_apart("cpu") and not default_prefill_apart("cuda") and not default_prefill_apart("cuda:1")
    config = LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                         num_key_value_heads=8, head_dim=64)
    assert kv_bytes_per_token(config, 2) == 2 * 16 * 8 * 64 * 2 == 32768
    per_token = 32768 + (4 * 2048 + 3 * 8192) * 2
    assert default_batch_tokens(config, 2, 80 << 30) == (40 << 30) // per_token
    assert default_batch_tokens(config, 2, 0) == 1
