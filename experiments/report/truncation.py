"""The reader's own truncation, said where results are read.

A reader whose window is shorter than a prompt cuts the prompt itself (``readers.truncation``): the
``full`` arm is then not the full context for that reader, and a compressed arm may be cut again.
The prediction lines record it (``truncated``, ``tokens_seen``); this module turns them into the
one warning line per (reader, task) that the report prints, and that ``--dry-run`` can print
from its own estimate with the same wording (``cut_warning``).
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from compressors.registry import is_reference
from experiments.data.records import Prediction


@dataclass(frozen=True)
class ReaderCut:
    """How often one reader's window cut the full-context prompts of one task, and what it saw of them."""

    reader: str
    task: str
    n_cut: int
    n: int
    tokens_seen: float  # mean context tokens the reader saw, over the n examples
    tokens_kept: float  # mean context tokens of the full context, over the n examples

    @property
    def share(self) -> float:
        """The share of the n examples the reader cut, in [0, 1]."""
        return self.n_cut / self.n if self.n else 0.0


def is_full_context(r: Prediction) -> bool:
    """Whether a prediction is of the full-context arm (by component, so a custom label does not hide it)."""
    return is_reference(r.compressor_kind or r.compressor)


def full_context_cuts(predictions: Sequence[Prediction]) -> list[ReaderCut]:
    """Per (reader, task) with a full-context arm, in the order first met: how many of its examples the reader's
    window cut, and the mean context tokens it saw against the full context's."""
    groups: dict[tuple[str, str], list[Prediction]] = defaultdict(list)
    for r in predictions:
        if is_full_context(r):
            groups[(r.reader, r.task)].append(r)
    return [ReaderCut(reader, task, sum(r.truncated for r in recs), len(recs),
                      statistics.fmean(r.context_seen for r in recs), statistics.fmean(r.tokens_out for r in recs))
            for (reader, task), recs in groups.items()]


def cut_warning(cut: ReaderCut) -> str:
    """One line: the reader, the task, the share of full-context examples its window cuts, what it saw of them."""
    return (f"reader {cut.reader} cuts the full context of task {cut.task} on {cut.n_cut} of {cut.n} example(s) "
            f"({100 * cut.share:.0f}%): its window saw {cut.tokens_seen:,.0f} of {cut.tokens_kept:,.0f} context "
            "tokens on average, so `full` is not the full context for this reader")


def truncation_warnings(predictions: Sequence[Prediction]) -> list[str]:
    """One warning per (reader, task) where the reader's window cut the full context of any example."""
    return [cut_warning(c) for c in full_context_cuts(predictions) if c.n_cut]
