"""One cache root, read at call time; user strings as safe file names."""
from __future__ import annotations

from core.paths import model_cache_root


def test_model_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("CTXCOMP_MODEL_CACHE_DIR", raising=False)
    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path))
    assert model_cache_root() == tmp_path / "models"
    monkeypatch.setenv("CTXCOMP_MODEL_CACHE_DIR", str(tmp_path / "m"))
    assert model_cache_root() == tmp_path / "m"
