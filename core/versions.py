"""The versions that decide what a run computes: ctxcomp's own prompt building and scoring, and the installed
libraries that do the arithmetic.

``PROMPT_VERSION`` and ``SCORING_VERSION`` are bumped by hand whenever a change to ctxcomp's shared code changes the
prompts it builds from every task's examples (``experiments.tasks``: truncation of the question, rendering of
documents and chunks, follow-up requests) or the score a metric gives a prediction (``experiments.scoring``).  A
change to one task's own prompts bumps that task's ``prompt_version`` instead (``TaskSpec``), which re-asks only
that task's generations.
They go into every generation cache key, so a fix in either never hides behind a generation cached before it,
and into every run's manifest, so ``ctxcomp compare`` can say when two runs were made by different versions.
``tests/core/test_versions.py`` records a digest of the prompts and scores ctxcomp gives a fixed set of
examples of every task family, per version: a change to either that is not bumped here fails it.
"""
from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError, version

PROMPT_VERSION = 1
SCORING_VERSION = 1

# The libraries whose versions a run's manifest records and ``ctxcomp compare`` checks (distribution names).
OUTPUT_PACKAGES = ("torch", "transformers", "sentence-transformers", "faiss-cpu", "faiss-gpu", "bm25s", "openai",
                   "llmlingua", "llama-cpp-python")


def output_versions() -> dict[str, int]:
    """ctxcomp's own versions of what it computes: ``{"prompt": N, "scoring": M}``."""
    return {"prompt": PROMPT_VERSION, "scoring": SCORING_VERSION}


@functools.lru_cache(maxsize=None)
def package_version(distribution: str) -> str | None:
    """The installed version of a distribution (``sentence-transformers``), or None when it is not installed."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def versions_tag(packages: tuple[str, ...] = (), *, own: bool = True) -> str:
    """A short string of versions for a cache key: ``prompt=1,scoring=1,torch=2.13.0`` (a package that is not
    installed reads ``none``)."""
    parts = [f"{k}={v}" for k, v in output_versions().items()] if own else []
    parts += [f"{p}={package_version(p) or 'none'}" for p in packages]
    return ",".join(parts)


__all__ = ["OUTPUT_PACKAGES", "PROMPT_VERSION", "SCORING_VERSION", "output_versions", "package_version",
           "versions_tag"]
