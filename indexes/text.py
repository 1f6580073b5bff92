"""Text normalisation shared by answer matching in retrieval recall and in reader metrics."""
from __future__ import annotations

import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_DROP_PUNCT = str.maketrans("", "", string.punctuation)  # the same characters, deleted in one C pass


def normalize_answer(text: str) -> str:
    """SQuAD v1.1 answer normalisation: lowercase, drop punctuation and English articles, squeeze spaces.

    This is the normalisation that LongBench's qa_f1, the SQuAD evaluator and
    Lost in the Middle's ``best_subspan_em`` / ``hasanswer`` all use, so recall@k
    and reader accuracy agree on what "contains the answer" means.
    """
    text = text.lower()
    text = text.translate(_DROP_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def contains_answer(text: str, answers: list[str] | tuple[str, ...]) -> bool:
    """True when any normalised answer is a substring of the normalised text.

    This is the reader-side rule of Lost in the Middle's ``best_subspan_em``;
    being a raw substring test it is loose ("s" is in almost every text), so
    retrieval relevance uses :func:`has_answer` instead.
    """
    norm = normalize_answer(text)
    return any(normalize_answer(a) and normalize_answer(a) in norm for a in answers)


def has_answer(text: str, answers: list[str] | tuple[str, ...]) -> bool:
    """True when any answer's normalised tokens occur as a contiguous run of the text's tokens.

    The retrieval-side rule: DPR's ``has_answer`` (token-level match), which
    produced the ``hasanswer`` flags of the Lost in the Middle data, and which
    recall@k and distractor selection use.  Unlike a substring test, the
    answer "S" does not match every passage with an "s" in it.
    """
    norm = normalize_answer(text)
    tokens: list[str] | None = None
    for answer in answers:
        wanted = normalize_answer(answer)
        # tokens that run in the text, joined by single spaces, are a substring of its normal form: most texts
        # are ruled out by this one C search, before any token is compared
        if not wanted or wanted not in norm:
            continue
        tokens = norm.split() if tokens is None else tokens
        target = wanted.split()
        n = len(target)
        if any(tokens[i : i + n] == target for i in range(len(tokens) - n + 1)):
            return True
    return False
