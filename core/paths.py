"""Where ctxcomp keeps things on disk, and how a user's string becomes a safe file name.

One cache root for every cache (embeddings, generations, converted models,
fetched data): ``$CTXCOMP_CACHE_DIR``, else ``~/.cache/ctxcomp``, read at call
time so tests and workers can point it elsewhere.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

MAX_NAME = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]+")


def cache_root() -> Path:
    """``$CTXCOMP_CACHE_DIR`` or ``~/.cache/ctxcomp``."""
    return Path(os.environ.get("CTXCOMP_CACHE_DIR") or Path.home() / ".cache" / "ctxcomp")


def model_cache_root() -> Path:
    """Converted model weights: ``$CTXCOMP_MODEL_CACHE_DIR``, else ``<cache root>/models``."""
    explicit = os.environ.get("CTXCOMP_MODEL_CACHE_DIR")
    return Path(explicit) if explicit else cache_root() / "models"


def safe_name(text: str, *, max_len: int = MAX_NAME) -> str:
    """``text`` as one file-name component that cannot leave its folder.

    Anything but letters, digits and ``._+=-`` becomes ``_`` (so ``/``, ``..``
    separators, NUL and spaces go); a leading dot is dropped (no hidden or
    ``..`` names); a long or emptied name is cut and given a short hash of the
    original, so two labels never collide into one file.
    """
    cleaned = _UNSAFE.sub("_", text).strip("._")
    if cleaned == text and len(text) <= max_len:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cleaned[: max_len - 9] or '_'}-{digest}"


__all__ = ["cache_root", "model_cache_root", "safe_name"]
