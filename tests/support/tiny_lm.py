"""A tiny causal LM built here (no download): a 2-layer Llama with seeded random weights and a byte-level BPE
tokenizer trained on a few sentences, which round-trips any text as llmlingua requires."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def build_tiny_lm(folder: Path, texts: Sequence[str], vocab_size: int = 300) -> str:
    """Save the model and its tokenizer in ``folder``; returns the folder as a string (a ``model:`` parameter).
    A larger ``vocab_size`` trained on real text makes tokens about words, so long contexts cost fewer steps."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(list(texts), trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<s>", "</s>", "<pad>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                  clean_up_tokenization_spaces=False)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)
