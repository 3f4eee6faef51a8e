"""How fast this host runs two fixed workloads now, against the fastest it has run them.

Session 30 timed full Inception-v3 while something outside the VM slowed it: every configuration
ran 1.5x slower than on a quiet host and onnxruntime 2.6x, unevenly enough that TASOPass's 1.32x
read 0.98x, and neither the load average (1.3 on 2 cores) nor the steal counter showed it. A probe
timed beside each model's rounds and compared with this machine's best shows it: a float32 matmul
that stays in cache (compute) and a pass over 64 MB (memory bandwidth, which co-tenants share).
The best times are kept in the user cache, per CPU model and core count.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

SLOW = 1.3  # a probe this much slower than the machine's best: the run's note says so
RECORD = "host_probe.json"


def probe(repeats: int = 7) -> dict[str, float]:
    """Median milliseconds of each workload (numpy's own threads, as the process has them)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((384, 384), dtype=np.float32), rng.standard_normal((384, 384), dtype=np.float32)
    big = np.ones(16 << 20, dtype=np.float32)  # 64 MB: well past any cache
    out = np.empty_like(big)

    def timed(work) -> float:
        work()  # warm: pages touched, BLAS threads up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            work()
            times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times)

    return {"compute_ms": timed(lambda: [np.dot(a, b) for _ in range(2)]),
            "memory_ms": timed(lambda: np.add(big, 1.0, out=out))}


def against_best(probes: list[dict[str, float]], machine_key: str, path: Path | None = None) -> dict:
    """`probes` (times taken now) with the machine's best times, updated with them, and the worst
    ratio of a probe's time to the best."""
    path = path or _default_path()
    try:
        records = json.loads(path.read_text())
    except (OSError, ValueError):
        records = {}
    best = dict(records.get(machine_key) or {})
    for now in probes:
        for name, ms in now.items():
            if ms > 0:
                best[name] = min(ms, best.get(name, ms))
    records[machine_key] = best
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(records, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache: the ratio still stands for this run
    ratios = [now[n] / best[n] for now in probes for n in now if best.get(n)]
    return {"probes": probes, "best": {n: best[n] for n in best}, "slowdown": max(ratios, default=1.0)}


def machine_key(machine: dict) -> str:
    """The record's key: CPU model and cores (bench.harness.env.machine's fields)."""
    return f"{machine.get('cpu_model', '?')} | {machine.get('cpu_cores_available', '?')} cores"


def _default_path() -> Path:
    from taso_relay.cost.paths import cache_dir

    return cache_dir() / RECORD
