"""What one session ran on, as ``manifest.json`` records it (``experiments.data.provenance``): the command line
(secrets masked), ctxcomp's source (version, git commit, changed files), the machine (CPU and flags, cores,
memory, threads, GPUs and driver) and the time.
"""
from __future__ import annotations

import datetime
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.versions import package_version

_SECRET_OPTION = re.compile(r"key|token|secret|password", re.IGNORECASE)


def command_line(argv: Sequence[str]) -> list[str]:
    """``argv`` with the program as its bare name and anything that looks like a secret replaced by ``***``."""
    from core.openai_client import redact

    out: list[str] = []
    for i, arg in enumerate(argv):
        if i == 0:
            arg = Path(arg).name
        elif out and out[-1].startswith("-") and _SECRET_OPTION.search(out[-1]):
            arg = "***"
        name, eq, value = arg.partition("=")
        if eq and _SECRET_OPTION.search(name):
            arg = f"{name}=***"
        out.append(redact(arg))
    return out


def ctxcomp_source() -> dict[str, Any]:
    """ctxcomp's installed version and, when it runs from a git checkout, the commit and the files changed."""
    root = Path(__file__).resolve().parents[2]
    out: dict[str, Any] = {"version": package_version("ctxcomp"), "path": str(root)}
    if (root / ".git").exists() and shutil.which("git"):
        head = _git(root, "rev-parse", "HEAD")
        changed = _git(root, "status", "--porcelain", "--untracked-files=no")
        if head:
            files = [line[3:] for line in (changed or "").splitlines() if line.strip()]
            out.update(commit=head.strip(), dirty=bool(files), changed=files[:100])
    return out


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def machine() -> dict[str, Any]:
    """CPU model and flags, cores (the machine's and this process's), memory, GPUs with their driver."""
    info = _cpuinfo()
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "platform": platform.platform(),
        "cpu": info.get("model name") or info.get("Model") or platform.processor() or platform.machine(),
        "cpu_flags": sorted((info.get("flags") or info.get("Features") or "").split()),
        "cores": os.cpu_count(),
        "cores_usable": affinity,
        "memory_gb": _memory_gb(),
        "gpus": gpus(),
        "threads": threads_used(),
    }


def threads_used() -> dict[str, Any]:
    """The threads compute libraries use in this process: torch's (when it is loaded) and the settings that cap them."""
    torch = sys.modules.get("torch")
    return {"torch": torch.get_num_threads() if torch is not None else None,
            **{k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}}


def _cpuinfo() -> dict[str, str]:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in out:
            out[key.strip()] = value.strip()
    return out


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def gpus() -> list[dict[str, Any]]:
    """Each NVIDIA GPU's name, memory and driver (from ``nvidia-smi``; torch's view when it is loaded and
    ``nvidia-smi`` is not there); empty without one."""
    if shutil.which("nvidia-smi"):
        try:
            done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                   "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            done = None
        if done is not None and done.returncode == 0:
            rows = [[part.strip() for part in line.split(",")] for line in done.stdout.splitlines() if line.strip()]
            return [{"name": r[0], "driver": r[1], "memory_mb": _int(r[2])} for r in rows if len(r) >= 3]
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        driver = _nvidia_driver()
        return [{"name": torch.cuda.get_device_name(i), "driver": driver, "memory_mb": None}
                for i in range(torch.cuda.device_count())]
    return []


def _nvidia_driver() -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    found = re.search(r"Kernel Module\s+([\d.]+)", text)
    return found.group(1) if found else None


def _int(text: str) -> int | None:
    try:
        return int(float(text))
    except ValueError:
        return None


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


__all__ = ["command_line", "ctxcomp_source", "gpus", "machine", "threads_used"]
