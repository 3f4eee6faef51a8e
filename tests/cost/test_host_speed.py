"""The host's speed against the best it has shown: a slowdown from outside the process, which the load
average need not show, is said beside a timing."""
from __future__ import annotations

import json

import pytest

from taso_relay.cost import host_speed


def test_the_probe_measures_both_rates():
    rates = host_speed.probe()
    assert set(rates) == {"gflops", "gbps"} and all(v > 0 for v in rates.values())


def test_slowdown_is_against_the_best_rates_this_machine_has_shown(tmp_path):
    path = tmp_path / "speed.json"
    first = host_speed.against_best([{"gflops": 100.0, "gbps": 20.0}], "cpu A", path)
    assert first["slowdown"] == 1.0
    slowed = host_speed.against_best([{"gflops": 95.0, "gbps": 20.0}, {"gflops": 100.0, "gbps": 8.0}], "cpu A", path)
    assert slowed["slowdown"] == pytest.approx(2.5) and slowed["best"] == {"gflops": 100.0, "gbps": 20.0}
    faster = host_speed.against_best([{"gflops": 120.0, "gbps": 20.0}], "cpu A", path)
    assert faster["slowdown"] == 1.0 and json.loads(path.read_text())["cpu A"]["gflops"] == 120.0
    assert host_speed.against_best([{"gflops": 30.0, "gbps": 5.0}], "cpu B", path)["slowdown"] == 1.0


@pytest.mark.parametrize("record", ["not json", "[]", '{"cpu A": 5}', '{"cpu A": {"gflops": "fast", "gbps": true}}'])
def test_a_record_that_cannot_be_read_starts_again(tmp_path, record):
    """A benchmark's timings must never be lost to its note: any record of the wrong shape is ignored."""
    path = tmp_path / "speed.json"
    path.write_text(record)
    result = host_speed.against_best([{"gflops": 30.0, "gbps": 5.0}], "cpu A", path)
    assert result["slowdown"] == 1.0 and json.loads(path.read_text())["cpu A"] == {"gflops": 30.0, "gbps": 5.0}


def test_the_key_counts_the_cores_this_process_may_use(monkeypatch):
    """A process held to one core runs the matmul at half the rate: another machine, not a slow one."""
    from taso_relay.graph import interpreter

    monkeypatch.setattr(interpreter, "usable_cores", lambda: 1)
    one = host_speed.machine_key()
    monkeypatch.setattr(interpreter, "usable_cores", lambda: 2)
    assert one != host_speed.machine_key() and one.endswith("| 1 cores")


def test_slowdown_now_records_and_compares(monkeypatch, tmp_path):
    monkeypatch.setattr(host_speed, "_default_path", lambda: tmp_path / "speed.json")
    rates = iter([{"gflops": 100.0, "gbps": 20.0}, {"gflops": 100.0, "gbps": 10.0}])
    monkeypatch.setattr(host_speed, "probe", lambda: next(rates))
    assert host_speed.slowdown_now() == 1.0 and host_speed.slowdown_now() == 2.0
    monkeypatch.setattr(host_speed, "probe", lambda: 1 / 0)
    assert host_speed.slowdown_now() is None  # only ever a note: a failure is no figure, not an error
