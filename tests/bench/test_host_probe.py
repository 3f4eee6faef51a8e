"""The host probe: a slowdown from outside the process, which the load average need not show, is said."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import run  # noqa: E402
from bench.harness import host_probe  # noqa: E402


def test_the_probe_times_both_workloads():
    times = host_probe.probe(repeats=2)
    assert set(times) == {"compute_ms", "memory_ms"} and all(v > 0 for v in times.values())


def test_slowdown_is_against_the_fastest_time_this_machine_has_had(tmp_path):
    path = tmp_path / "probe.json"
    first = host_probe.against_best([{"compute_ms": 10.0, "memory_ms": 5.0}], "cpu A", path)
    assert first["slowdown"] == 1.0
    slowed = host_probe.against_best([{"compute_ms": 10.5, "memory_ms": 5.0}, {"compute_ms": 10.0, "memory_ms": 9.0}],
                                     "cpu A", path)
    assert slowed["slowdown"] == pytest.approx(1.8) and slowed["best"] == {"compute_ms": 10.0, "memory_ms": 5.0}
    faster = host_probe.against_best([{"compute_ms": 8.0, "memory_ms": 5.0}], "cpu A", path)
    assert faster["slowdown"] == 1.0 and json.loads(path.read_text())["cpu A"]["compute_ms"] == 8.0
    assert host_probe.against_best([{"compute_ms": 30.0, "memory_ms": 5.0}], "cpu B", path)["slowdown"] == 1.0
    path.write_text("not json")  # a damaged record starts again
    assert host_probe.against_best([{"compute_ms": 30.0, "memory_ms": 5.0}], "cpu A", path)["slowdown"] == 1.0


def _result(slowdown: float) -> dict:
    return {"machine": {"cpu_cores_available": 2}, "kernel_treatment": "MetaSchedule, 64 trials per distinct kernel",
            "models": [{"name": "inception_v3", "host_probe": {"slowdown": slowdown}, "configs": {}}]}


def test_a_slowed_host_is_named_in_the_run_notes():
    notes = " ".join(run.run_notes(_result(1.55)))
    assert "1.55x slower" in notes and "inception_v3" in notes
    assert "slower than the fastest" not in " ".join(run.run_notes(_result(1.1)))
