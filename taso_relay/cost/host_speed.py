"""How fast this host runs numpy's matmul and copy now, against the best rates it has shown.

Something outside the VM can slow every kernel unevenly without showing in the load average or the
steal counter: full Inception-v3 measured 0.98x under TASOPass while the host ran it 1.5x slower
(onnxruntime 2.6x), and 1.32-1.38x on a quiet host (bench/README.md, sessions 30 and 31). The
analytic model's peak measurement, taken quickly beside a timing and compared with the best rates
this machine has shown in the same measurement, shows it. The best rates are kept in the user cache
per CPU model and the cores this process may use (a CPU limit is another machine, not a slow one).
"""
from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

SLOW = 1.3  # this much below the best rates: a timing taken now is named as taken on a slowed host
RECORD = "host_speed.json"


def probe() -> dict[str, float]:
    """GFLOP/s of a 1024^3 float32 matmul and GB/s of a 64 MiB copy, best of a few runs (0.3 s in all)."""
    from .analytic import measure_peaks

    time.sleep(0.05)  # a TVM run just before: its pool's threads spin a moment before they sleep
    peaks = measure_peaks(seconds=0.1, repeats=3)
    return {"gflops": peaks.gflops, "gbps": peaks.gbps}


def against_best(probes: list[dict[str, float]], key: str | None = None, path: Path | None = None) -> dict:
    """`probes` (rates measured now) with the machine's best rates, updated with them, and the worst
    slowdown: best rate over a probe's. A record that cannot be read starts again."""
    path = path or _default_path()
    key = key or machine_key()
    try:
        records = json.loads(path.read_text())
    except (OSError, ValueError):
        records = {}
    records = records if isinstance(records, dict) else {}
    mine = records.get(key)
    best = {n: float(v) for n, v in mine.items() if _rate(v)} if isinstance(mine, dict) else {}
    for now in probes:
        for name, rate in now.items():
            if _rate(rate):
                best[name] = max(float(rate), best.get(name, 0.0))
    records[key] = best
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(records, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache: the ratio still stands for this run
    ratios = [best[n] / now[n] for now in probes for n in now if _rate(now[n]) and n in best]
    return {"probes": probes, "best": best, "slowdown": max(ratios, default=1.0)}


def probe_or_none() -> dict[str, float] | None:
    """probe(), or None where it cannot be measured: only ever a note beside a timing, never a failure."""
    try:
        return probe()
    except Exception:  # noqa: BLE001
        return None


def slowdown_now() -> float | None:
    """One probe against the best rates (recorded with it); None where it cannot be measured."""
    now = probe_or_none()
    try:
        return round(against_best([now])["slowdown"], 3) if now else None
    except Exception:  # noqa: BLE001 - a record that cannot be written or read is no reason to fail either
        return None


def machine_key() -> str:
    """CPU model and the cores this process may use."""
    from ..graph.interpreter import usable_cores

    return f"{cpu_model()} | {usable_cores()} cores"


def cpu_model() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo, else what the platform says)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _rate(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _default_path() -> Path:
    from .paths import cache_dir

    return cache_dir() / RECORD
