"""Tiny token classifiers built here (no download), of the two kinds LLMLingua-2 publishes: XLM-RoBERTa with a
SentencePiece Unigram tokenizer and BERT with a WordPiece one, each trained on the given texts, seeded weights."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def _tokenizer(kind: str, texts: Sequence[str], vocab_size: int):
    if kind == "xlm-roberta":
        from tokenizers import SentencePieceUnigramTokenizer
        from transformers import XLMRobertaTokenizerFast

        unigram = SentencePieceUnigramTokenizer()
        unigram.train_from_iterator(list(texts), vocab_size=vocab_size, unk_token="<unk>", show_progress=False,
                                    special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
        return XLMRobertaTokenizerFast(tokenizer_object=unigram._tokenizer, bos_token="<s>", eos_token="</s>",
                                       unk_token="<unk>", pad_token="<pad>", mask_token="<mask>", cls_token="<s>",
                                       sep_token="</s>")
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    wordpiece = BertWordPieceTokenizer(lowercase=False, strip_accents=False)
    wordpiece.train_from_iterator(list(texts), vocab_size=vocab_size, show_progress=False)
    return BertTokenizerFast(tokenizer_object=wordpiece._tokenizer, unk_token="[UNK]", sep_token="[SEP]",
                             pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]", do_lower_case=False)


def build_tiny_encoder(folder: Path, kind: str, texts: Sequence[str], vocab_size: int = 400) -> str:
    """Save a 2-layer token classifier (2 labels, drop / keep) of ``kind`` (``xlm-roberta`` or ``bert``) and its
    tokenizer in ``folder``; returns the folder as a string (a ``model:`` parameter)."""
    import torch
    from transformers import BertConfig, BertForTokenClassification, XLMRobertaConfig, XLMRobertaForTokenClassification

    tokenizer = _tokenizer(kind, texts, vocab_size)
    sizes = dict(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, num_labels=2, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    if kind == "xlm-roberta":
        model = XLMRobertaForTokenClassification(XLMRobertaConfig(max_position_embeddings=514, **sizes))
    else:
        model = BertForTokenClassification(BertConfig(max_position_embeddings=512, **sizes))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)
