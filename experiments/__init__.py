"""Top floor: data, tasks, scoring, protocols, runs, reports and the CLI, each in a room of its own.

Library use: ``from experiments import evaluate``; ``evaluate("config.yaml", "runs/x")``
runs (or resumes) a grid and returns its scored cells (see ``experiments.run.api``).
"""
from __future__ import annotations

from typing import Any


def evaluate(*args: Any, **kwargs: Any) -> Any:
    """``experiments.run.api.evaluate`` (imported on first use, so ``import experiments`` stays cheap)."""
    from experiments.run.api import evaluate as _evaluate

    return _evaluate(*args, **kwargs)


__all__ = ["evaluate"]
