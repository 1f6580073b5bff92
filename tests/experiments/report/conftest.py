"""Runs that several report tests read: every compressor's trace, and a reader whose window cuts the full context."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_lm_path(tmp_path_factory) -> str:
    from tests.support.all_arms_run import tiny_lm

    return tiny_lm(tmp_path_factory.mktemp("tiny-lm"))


@pytest.fixture(scope="session")
def all_arms_run(tmp_path_factory, tiny_lm_path):
    """A run holding every shipped compressor (longllmlingua scored by the tiny Llama), read by the extractive reader."""
    pytest.importorskip("llmlingua")
    from tests.support.all_arms_run import make_all_arms_run

    return make_all_arms_run(tmp_path_factory.mktemp("all-arms"), tiny_lm_path)


@pytest.fixture(scope="session")
def cut_run(tmp_path_factory, tiny_lm_path):
    """full and retrieval read by the tiny Llama with a 600-token window: every full prompt is cut, no retrieval one."""
    from tests.support.all_arms_run import make_cut_run

    return make_cut_run(tmp_path_factory.mktemp("cut"), tiny_lm_path)
