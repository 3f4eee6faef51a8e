"""Whether other work competed for the CPUs while a kernel was timed.

A kernel timed beside another job reads slow (TVM's threads wait for busy cores;
a hundred times slow was seen beside a test run), and the cost cache would hand
that time to every later search. So each local timing is stamped with its
contention: the share of the timing window in which some task waited for a CPU
(Linux's pressure stall information: this process's cgroup where the kernel keeps
it there, else the whole machine's), or, where the kernel keeps none, the 1-minute
load average beyond the cores, per core. A time stamped contended is measured
again once the machine is quiet, unless TASO_RELAY_TRUST_CACHE is set to a true
value (the test suite sets it, where a rerun must reuse what the first run
measured). Only CPU kernels are stamped: a GPU kernel's time does not hinge on
CPU pressure.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from ..graph.interpreter import usable_cores

CONTENDED = 0.25  # a timing with at least this contention is not trusted once the machine is quiet
PSI_CPU = Path("/proc/pressure/cpu")
CGROUP_ROOT = Path("/sys/fs/cgroup")
FALSE_WORDS = ("", "0", "false", "no", "off")


def trust_cache() -> bool:
    """TASO_RELAY_TRUST_CACHE set to a true value: cached times are used however they were taken."""
    return os.environ.get("TASO_RELAY_TRUST_CACHE", "").strip().lower() not in FALSE_WORDS


def _psi_files() -> list[Path]:
    """This process's cgroup's cpu.pressure (cgroup v2, or v1 beside a unified hierarchy), then the machine's."""
    files = []
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::/"):
                rel = line[4:].strip()
                if rel:  # the root cgroup keeps no cpu.pressure of its own
                    files += [CGROUP_ROOT / rel / "cpu.pressure", CGROUP_ROOT / "unified" / rel / "cpu.pressure"]
    except OSError:
        pass
    return files + [PSI_CPU]


def _read_field(path: Path, field: str) -> float | None:
    """A field of a pressure file's "some" line, as a number (None where it cannot be read)."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith("some "):
                return float(dict(kv.split("=", 1) for kv in line.split()[1:])[field])
    except (OSError, ValueError, KeyError):
        pass
    return None


def _psi_path() -> Path | None:
    """The first pressure file that can be read (None without PSI)."""
    return next((p for p in _psi_files() if _read_field(p, "total") is not None), None)


def _psi_field(field: str) -> float | None:
    path = _psi_path()
    return _read_field(path, field) if path is not None else None


def _stall_seconds(path: Path) -> float | None:
    """Seconds, since boot, in which some runnable task waited for a CPU, from the pressure file `path`."""
    total = _read_field(path, "total")  # microseconds
    return total / 1e6 if total is not None else None


def _load_share() -> float | None:
    """The 1-minute load average beyond this process's usable cores, per core."""
    cores = usable_cores()
    try:
        return max(0.0, os.getloadavg()[0] - cores) / cores
    except (OSError, AttributeError):  # no load average (Windows)
        return None


def now() -> float | None:
    """Recent contention: PSI's 10-second average, else the 1-minute load average beyond the cores.

    None where neither can be read, or when the cache is trusted (trust_cache()).
    """
    if trust_cache():
        return None
    avg10 = _psi_field("avg10")  # percent
    return avg10 / 100 if avg10 is not None else _load_share()


class Window:
    """Contention over a stretch of time: `with Window() as w: ...`, then `w.share`."""

    share: float | None = None

    def __enter__(self) -> "Window":
        self._path = _psi_path()  # both ends read one file: a cgroup's total and the machine's do not subtract
        self._stall = _stall_seconds(self._path) if self._path is not None else None
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter() - self._start
        stall = _stall_seconds(self._path) if self._path is not None else None
        if self._stall is not None and stall is not None and wall > 0:
            self.share = min(1.0, (stall - self._stall) / wall)
        else:
            self.share = _load_share()


def contended(share: float | None) -> bool:
    return share is not None and share >= CONTENDED
