"""Machine, versions and memory: what a result needs to be reproducible."""

from __future__ import annotations

import os
import platform
import resource
import sys
import threading
import time
from importlib import metadata

import psutil


def cpu_count() -> int:
    from taso_relay.graph.interpreter import usable_cores  # the cores this process may use

    return usable_cores()


def cpu_model() -> str:
    from taso_relay.cost.host_speed import cpu_model as model  # the key its host-speed record uses

    return model()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict:
    out = {"python": platform.python_version()}
    for dist in ("apache-tvm", "apache-tvm-ffi", "onnx", "onnxruntime", "numpy", "xgboost"):
        out[dist] = _version(dist)
    try:
        import tvm
        out["tvm"] = tvm.__version__
    except Exception:  # pragma: no cover - tvm is a hard dependency
        pass
    return out


def gpu_name() -> str | None:
    try:
        import tvm
        dev = tvm.cuda(0)
        return dev.device_name if dev.exist else None
    except Exception:
        return None


def machine(target_kind: str) -> dict:
    info = {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_cores_available": cpu_count(),
        "cpu_cores_physical": psutil.cpu_count(logical=False),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "python_executable": sys.executable,
        "load_average_at_start": [round(v, 2) for v in os.getloadavg()],
    }
    if target_kind == "cuda":
        info["gpu"] = gpu_name()
    return info


def max_rss_mb() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class PeakRSS:
    """Samples this process's RSS in a thread; ``peak_mb`` is the maximum seen.

    The process-wide ``ru_maxrss`` only ever grows, so it cannot attribute a
    peak to one configuration; sampling inside a ``with`` block can.
    """

    def __init__(self, interval_s: float = 0.02):
        self.interval_s = interval_s
        self.peak_mb = 0.0
        self.start_mb = 0.0
        self._stop = threading.Event()
        self._proc = psutil.Process()

    def _sample(self):
        rss = self._proc.memory_info().rss / 2**20
        self.peak_mb = max(self.peak_mb, rss)

    def _run(self):
        while not self._stop.is_set():
            self._sample()
            time.sleep(self.interval_s)

    def __enter__(self):
        self.start_mb = self._proc.memory_info().rss / 2**20
        self.peak_mb = self.start_mb
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()
        return False
