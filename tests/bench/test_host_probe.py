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


def test_the_probe_measures_both_rates():
    rates = host_probe.probe()
    assert set(rates) == {"gflops", "gbps"} and all(v > 0 for v in rates.values())


def test_slowdown_is_against_the_best_rates_this_machine_has_had(tmp_path):
    path = tmp_path / "probe.json"
    first = host_probe.against_best([{"gflops": 100.0, "gbps": 20.0}], "cpu A", path)
    assert first["slowdown"] == 1.0
    slowed = host_probe.against_best([{"gflops": 95.0, "gbps": 20.0}, {"gflops": 100.0, "gbps": 8.0}], "cpu A", path)
    assert slowed["slowdown"] == pytest.approx(2.5) and slowed["best"] == {"gflops": 100.0, "gbps": 20.0}
    faster = host_probe.against_best([{"gflops": 120.0, "gbps": 20.0}], "cpu A", path)
    assert faster["slowdown"] == 1.0 and json.loads(path.read_text())["cpu A"]["gflops"] == 120.0
    assert host_probe.against_best([{"gflops": 30.0, "gbps": 5.0}], "cpu B", path)["slowdown"] == 1.0
    path.write_text("not json")  # a damaged record starts again
    assert host_probe.against_best([{"gflops": 30.0, "gbps": 5.0}], "cpu A", path)["slowdown"] == 1.0


def _result(slowdown: float) -> dict:
    return {"machine": {"cpu_cores_available": 2}, "kernel_treatment": "MetaSchedule, 64 trials per distinct kernel",
            "models": [{"name": "inception_v3", "host_probe": {"slowdown": slowdown}, "configs": {}}]}


def test_a_slowed_host_is_named_in_the_run_notes():
    notes = " ".join(run.run_notes(_result(1.55)))
    assert "1.55x slower" in notes and "inception_v3" in notes
    assert "slower than the fastest" not in " ".join(run.run_notes(_result(1.1)))
