"""Which mean a task's differences estimate, said wherever a verdict is printed.

A paired difference is tested over documents: each document's summed differences against its questions, so
the mean under test is the question-weighted mean of the questions read.  What that stands for depends on how
they were drawn: a whole file (or its first ``limit`` questions) is its own question-weighted mean; a sample of
questions (``by: none``) or of whole documents (``deal: whole``, what ``--until-decided`` draws) estimates the
question-weighted mean of the task's pool; a round-robin sample by document (``by: document``) that reads one
question of each document it draws estimates the document-weighted mean (every document counts once, however
many questions it holds), and one that reads several questions of some documents and not all of them
weights each document by the questions it took: neither mean.  The two differ when long documents differ
(losses in 10 long documents of a pool can be -5 points question-weighted and -0.4 document-weighted).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from experiments.data.records import Prediction

QUESTION_WEIGHTED = "the question-weighted mean"
DOCUMENT_WEIGHTED = "the document-weighted mean"


def estimand(task: Mapping[str, Any], documents: int, questions: int) -> str:
    """What the differences of one task estimate, from its entry in ``grid.json`` and the documents and
    questions its predictions come from."""
    sample, pool = task.get("sample"), ("generated questions" if task.get("generated") else "file")
    if not sample:
        limit = task.get("limit")
        return f"{QUESTION_WEIGHTED} of the {pool}" + (f"'s first {limit} questions" if limit else "")
    if sample.get("by") == "none":
        return f"{QUESTION_WEIGHTED} of the task's pool (a seeded sample of its questions)"
    if sample.get("deal") == "whole":
        return f"{QUESTION_WEIGHTED} of the task's pool (a seeded sample of its documents, each read whole)"
    if documents >= min(int(sample.get("n", 0)), questions):  # round-robin: one question a document so far
        return (f"{DOCUMENT_WEIGHTED} of the task's pool (`sample: {{by: document}}` read one question of each "
                "document it drew: every document counts once, however many questions it holds)")
    return ("each document of the task's pool weighted by the questions the sample took from it (`sample: {by: "
            "document}` read several questions of some documents but not all of them: neither the question- nor "
            "the document-weighted mean; `deal: whole` or n at most the documents names one)")


def estimands(manifest: Mapping[str, Any], predictions: Sequence[Prediction]) -> dict[str, str]:
    """Per task key of a run's ``grid.json``: what its differences estimate."""
    documents: dict[str, set[str]] = defaultdict(set)
    questions: dict[str, set[str]] = defaultdict(set)
    for p in predictions:
        documents[p.task].add(p.cluster_key)
        questions[p.task].add(p.id)
    return {t["key"]: estimand(t, len(documents[t["key"]]), len(questions[t["key"]]))
            for t in manifest.get("tasks", [])}


def estimand_text(by_task: Mapping[str, str]) -> str:
    """One sentence for a report or console: the estimand, or each task's where they differ."""
    said = list(dict.fromkeys(by_task.values()))
    if not said:
        return ""
    if len(said) == 1:
        return f"every Δ and verdict estimates {said[0]}"
    return "each Δ and verdict estimates, per task: " + "; ".join(f"{t}: {e}" for t, e in by_task.items())


__all__ = ["DOCUMENT_WEIGHTED", "QUESTION_WEIGHTED", "estimand", "estimand_text", "estimands"]
