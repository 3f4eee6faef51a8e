"""A benchmark run names a host that ran slower than its best while timing (taso_relay/cost/host_speed.py)."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import run  # noqa: E402


def _result(slowdown: float) -> dict:
    return {"machine": {"cpu_cores_available": 2}, "kernel_treatment": "MetaSchedule, 64 trials per distinct kernel",
            "models": [{"name": "inception_v3", "host_probe": {"slowdown": slowdown}, "configs": {}}]}


def test_a_slowed_host_is_named_in_the_run_notes():
    notes = " ".join(run.run_notes(_result(1.55)))
    assert "1.55x slower" in notes and "inception_v3" in notes
    assert "slower than the fastest" not in " ".join(run.run_notes(_result(1.1)))
