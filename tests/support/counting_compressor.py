"""A compressor that stands for a slow model-calling one (LongLLMLingua at minutes an example) in the tests of
what a killed run keeps: it logs every call, and can stop its own process at a chosen call, mid-batch.

``CTXCOMP_TEST_COMPRESS_LOG``: a file each call appends the example's id to.  ``CTXCOMP_TEST_STOP_AT``: the call
(counted in this process, 1-based) at which it stops the process before compressing: ``kill`` (SIGKILL, nothing
runs after) or ``interrupt`` (KeyboardInterrupt, as Ctrl-C) with ``CTXCOMP_TEST_STOP_HOW``.  Both are read from
the environment, so the run's config, and with it the run's identity, is the same with or without them.
"""
from __future__ import annotations

import os
import signal

from compressors.base import CompressedContext, Compressible, Compressor

_calls = 0


class CountedLead(Compressor):
    """Keeps the first 30 words of the context; declares no ``calls_model = False``, so the runner keeps each
    result in the compression cache as it would a model's."""

    @property
    def label(self) -> str:
        return "counted-lead"

    def compress(self, item: Compressible) -> CompressedContext:
        global _calls
        _calls += 1
        if str(_calls) == os.environ.get("CTXCOMP_TEST_STOP_AT"):
            if os.environ.get("CTXCOMP_TEST_STOP_HOW") == "interrupt":
                raise KeyboardInterrupt
            os.kill(os.getpid(), signal.SIGKILL)
        log = os.environ.get("CTXCOMP_TEST_COMPRESS_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as f:
                f.write(item.id + "\n")
        text = " ".join(item.context.split()[:30])
        return CompressedContext(text=text, tokens_in=self.count_tokens(item.context), tokens_out=self.count_tokens(text))
