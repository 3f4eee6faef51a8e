"""How fast this host runs numpy's matmul and copy now, against the fastest it has run them.

Session 30 timed full Inception-v3 while something outside the VM slowed it: every configuration
ran 1.5x slower than on a quiet host and onnxruntime 2.6x, unevenly enough that TASOPass's 1.32x
read 0.98x, and neither the load average (1.3 on 2 cores) nor the steal counter showed it. The
analytic cost model's peak measurement (a 1024^3 float32 matmul, a 64 MiB copy), taken beside
each model's rounds and compared with this machine's best, shows it. The best figures are kept in
the user cache, per CPU model and core count.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

SLOW = 1.3  # a probe this much slower than the machine's best: the run's note says so
RECORD = "host_probe.json"


def probe() -> dict[str, float]:
    """GFLOP/s of the matmul and GB/s of the copy, best of a few runs (numpy's own threads)."""
    from taso_relay.cost.analytic import measure_peaks

    peaks = measure_peaks(seconds=0.1, repeats=3)
    return {"gflops": peaks.gflops, "gbps": peaks.gbps}


def against_best(probes: list[dict[str, float]], machine_key: str, path: Path | None = None) -> dict:
    """`probes` (rates measured now) with the machine's best rates, updated with them, and the worst
    slowdown: best rate over a probe's."""
    path = path or _default_path()
    try:
        records = json.loads(path.read_text())
    except (OSError, ValueError):
        records = {}
    best = dict(records.get(machine_key) or {})
    for now in probes:
        for name, rate in now.items():
            if rate > 0:
                best[name] = max(rate, best.get(name, rate))
    records[machine_key] = best
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(records, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache: the ratio still stands for this run
    ratios = [best[n] / now[n] for now in probes for n in now if best.get(n) and now[n] > 0]
    return {"probes": probes, "best": {n: best[n] for n in best}, "slowdown": max(ratios, default=1.0)}


def machine_key(machine: dict) -> str:
    """The record's key: CPU model and cores (bench.harness.env.machine's fields)."""
    return f"{machine.get('cpu_model', '?')} | {machine.get('cpu_cores_available', '?')} cores"


def _default_path() -> Path:
    from taso_relay.cost.paths import cache_dir

    return cache_dir() / RECORD
