"""Kill a process at a chosen moment: what the resume tests of sharded encoding need."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def kill_after_shards(cmd: list[str], folder: Path, shards: int = 3, timeout_s: float = 120) -> None:
    """Run ``cmd`` from the repository root and SIGKILL it once ``shards`` shard files are in ``folder``.

    Fails when the command ends first: a test that never kills proves nothing about resuming.
    """
    proc = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None and len(list(folder.glob("shard-*.npy"))) < shards:
        time.sleep(0.005)
    assert proc.poll() is None, f"the command ended before it could be killed: {proc.communicate()}"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
