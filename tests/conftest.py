"""Shared fixtures: where the real public data lives, and an isolated cache per test session."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The real public data, laid out as `ctxcomp data get` leaves it: $CTXCOMP_DATA_DIR when set, else ../shared/data
# beside the checkout (or $CTXCOMP_SHARED_DATA).  When it exists, data names in configs resolve there too.
SHARED_DATA = Path(os.environ.get("CTXCOMP_DATA_DIR") or os.environ.get("CTXCOMP_SHARED_DATA")
                   or REPO.parent / "shared" / "data")
# the files the real-data tests read (`ctxcomp data get NAME...` fetches them)
SHARED_NAMES = ("leval/financial_qa", "leval/natural_question", "leval/gov_report_summ", "leval/news_summ",
                "lost_in_the_middle/nq-open-oracle", "lost_in_the_middle/kv-retrieval-75_keys")
if SHARED_DATA.is_dir():
    os.environ["CTXCOMP_DATA_DIR"] = str(SHARED_DATA)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public data folder (the data directory); tests that need it skip when a file is absent."""
    from experiments.data.catalog import catalog

    missing = [name for name in SHARED_NAMES if not catalog()[name].path(SHARED_DATA).is_file()]
    if missing:
        pytest.skip(f"real public data not found in {SHARED_DATA} (set CTXCOMP_DATA_DIR, or run: "
                    f"ctxcomp data get {' '.join(missing)})")
    return SHARED_DATA


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep test caches out of the user's ~/.cache, but share them within a session.

    Model conversions (the GGUF reader) are slow, so they may use a persistent
    cache named by CTXCOMP_MODEL_CACHE_DIR when the user sets one.
    """
    os.environ.setdefault("CTXCOMP_CACHE_DIR", str(tmp_path_factory.mktemp("ctxcomp-cache")))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
