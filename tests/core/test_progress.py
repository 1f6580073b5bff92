"""A progress bar on a stream that is not a terminal writes plain lines: a redirected log gets no cursor escapes."""
from __future__ import annotations

import io
import sys

from core.progress import progress_bar


def test_a_bar_on_a_redirected_stderr_writes_plain_lines(monkeypatch):
    sink = io.StringIO()  # not a terminal, as stderr redirected to a file
    monkeypatch.setattr(sys, "stderr", sink)
    monkeypatch.delenv("CTXCOMP_NO_PROGRESS", raising=False)
    with progress_bar(100, "store corpus", unit="passage", leave=False) as bar:
        for _ in range(10):
            bar.update(10)
    written = sink.getvalue()
    assert "store corpus" in written and "\r" not in written and "\x1b" not in written
    assert all(line.strip() for line in written.splitlines())
