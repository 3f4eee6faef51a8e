"""Whether other work competed for the CPUs while a kernel was timed.

A kernel timed beside another job reads slow (TVM's threads wait for busy cores;
a hundred times slow was seen beside a test run), and the cost cache would hand
that time to every later search. So each local timing is stamped with its
contention: the share of the timing window in which some task waited for a CPU
(Linux's pressure stall information), or, where the kernel does not provide it,
the 1-minute load average beyond the cores, per core. A time stamped contended is
measured again once the machine is quiet, unless TASO_RELAY_TRUST_CACHE=1 (the
test suite sets it, where a rerun must reuse what the first run measured).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

CONTENDED = 0.25  # a timing with at least this contention is not trusted once the machine is quiet
PSI_CPU = Path("/proc/pressure/cpu")


def _psi_line(field: str) -> str | None:
    try:
        for line in PSI_CPU.read_text().splitlines():
            if line.startswith("some "):
                return dict(kv.split("=", 1) for kv in line.split()[1:]).get(field)
    except (OSError, ValueError):
        pass
    return None


def _stall_seconds() -> float | None:
    """Seconds, since boot, in which some runnable task waited for a CPU (None without PSI)."""
    total = _psi_line("total")
    return int(total) / 1e6 if total is not None else None


def _load_share() -> float | None:
    """The 1-minute load average beyond this process's usable cores, per core."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    try:
        return max(0.0, os.getloadavg()[0] - cores) / cores
    except (OSError, AttributeError):  # no load average (Windows)
        return None


def now() -> float | None:
    """Contention over the last 10 seconds (None where it cannot be read, or TASO_RELAY_TRUST_CACHE=1)."""
    if os.environ.get("TASO_RELAY_TRUST_CACHE", "") not in ("", "0"):
        return None
    avg10 = _psi_line("avg10")
    return float(avg10) / 100 if avg10 is not None else _load_share()


class Window:
    """Contention over a stretch of time: `with Window() as w: ...`, then `w.share`."""

    share: float | None = None

    def __enter__(self) -> "Window":
        self._stall, self._start = _stall_seconds(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter() - self._start
        stall = _stall_seconds()
        if self._stall is not None and stall is not None and wall > 0:
            self.share = min(1.0, (stall - self._stall) / wall)
        else:
            self.share = _load_share()


def contended(share: float | None) -> bool:
    return share is not None and share >= CONTENDED
