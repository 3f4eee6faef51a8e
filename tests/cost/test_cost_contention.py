"""Kernel times taken on contended CPUs are stamped so, and measured again once the CPUs are quiet."""
from __future__ import annotations

import sqlite3
import time

import numpy as np
import pytest

import cost_graphs
from taso_relay.cost import CostCache, contention

PSI = "some avg10={avg10} avg60=0.00 avg300=0.00 total={total}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"


@pytest.fixture
def psi(tmp_path, monkeypatch):
    path = tmp_path / "cpu"
    monkeypatch.setattr(contention, "_psi_files", lambda: [tmp_path / "absent", path])
    monkeypatch.delenv("TASO_RELAY_TRUST_CACHE", raising=False)
    return lambda avg10, total: path.write_text(PSI.format(avg10=avg10, total=total))


def test_a_window_measures_the_share_of_time_other_work_waited_for_a_cpu(psi, monkeypatch):
    clock = iter([10.0, 10.2, 20.0, 20.05])
    monkeypatch.setattr(contention.time, "perf_counter", lambda: next(clock))
    psi(0.0, 5_000_000)
    with contention.Window() as w:
        psi(0.0, 5_000_000 + 150_000)  # 0.15 s of stall in a window of 0.2 s
    assert w.share == pytest.approx(0.75) and contention.contended(w.share)
    with contention.Window() as quiet:
        pass
    assert quiet.share == 0.0 and not contention.contended(quiet.share)


def test_pressure_is_read_from_this_process_cgroup_before_the_machine(tmp_path, monkeypatch):
    proc = tmp_path / "proc_cgroup"
    proc.write_text("1:cpu:/\n0::/jobs/this\n")
    real_path = contention.Path

    def path(p, *rest):  # /proc/self/cgroup is read from the fake file
        return proc if str(p) == "/proc/self/cgroup" else real_path(p, *rest)

    monkeypatch.setattr(contention, "Path", path)
    monkeypatch.setattr(contention, "CGROUP_ROOT", tmp_path / "cg")
    monkeypatch.setattr(contention, "PSI_CPU", tmp_path / "machine")
    monkeypatch.delenv("TASO_RELAY_TRUST_CACHE", raising=False)
    (tmp_path / "machine").write_text(PSI.format(avg10=90.0, total=1))
    assert contention.now() == pytest.approx(0.9)  # no cgroup file: the machine's
    mine = tmp_path / "cg" / "unified" / "jobs" / "this" / "cpu.pressure"
    mine.parent.mkdir(parents=True)
    mine.write_text(PSI.format(avg10=3.0, total=2_000_000))
    assert contention.now() == pytest.approx(0.03) and contention._stall_seconds(contention._psi_path()) == 2.0
    mine.write_text("some garbage\n")  # unreadable: the next file
    assert contention.now() == pytest.approx(0.9)


def test_a_window_reads_both_ends_from_one_pressure_file(tmp_path, monkeypatch):
    """A cgroup's file that stops being readable mid-window must not be subtracted from the machine's total."""
    mine, machine = tmp_path / "cgroup", tmp_path / "machine"
    mine.write_text(PSI.format(avg10=0.0, total=5_000_000))
    machine.write_text(PSI.format(avg10=0.0, total=900_000_000))
    monkeypatch.setattr(contention, "_psi_files", lambda: [mine, machine])
    monkeypatch.setattr(contention, "_load_share", lambda: 0.125)
    clock = iter([1.0, 2.0, 3.0, 4.0])
    monkeypatch.setattr(contention.time, "perf_counter", lambda: next(clock))
    with contention.Window() as w:
        mine.unlink()
    assert w.share == 0.125  # the load average stands in, not (900 s - 5 s) of stall in one second
    with contention.Window() as w2:
        pass
    assert w2.share == 0.0  # the machine's file, read at both ends


@pytest.mark.parametrize("value, trusted", [("1", True), ("yes", True), ("true", True), ("0", False),
                                            ("false", False), ("False", False), ("off", False), ("", False)])
def test_trust_cache_reads_the_variable_as_a_flag(value, trusted, monkeypatch):
    monkeypatch.setenv("TASO_RELAY_TRUST_CACHE", value)
    assert contention.trust_cache() is trusted


def test_without_pressure_information_the_load_average_beyond_the_cores_stands_in(psi, monkeypatch):
    psi(40.0, 1)
    assert contention.now() == pytest.approx(0.4)
    monkeypatch.setattr(contention, "_psi_files", lambda: [])
    monkeypatch.setattr(contention.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(contention.os, "getloadavg", lambda: (3.0, 0.0, 0.0))
    assert contention.now() == pytest.approx(0.5)  # one core's worth of other work on two cores
    monkeypatch.setattr(contention.os, "getloadavg", lambda: (1.5, 0.0, 0.0))
    assert contention.now() == 0.0
    monkeypatch.setenv("TASO_RELAY_TRUST_CACHE", "1")
    assert contention.now() is None


OLD_COSTS = ("CREATE TABLE costs (target TEXT NOT NULL, device TEXT NOT NULL, method TEXT NOT NULL, "
             "workload TEXT NOT NULL, label TEXT NOT NULL DEFAULT '', seconds REAL NOT NULL, "
             "std REAL NOT NULL DEFAULT 0, repeats INTEGER NOT NULL DEFAULT 0, measured_at REAL NOT NULL, "
             "tvm_version TEXT NOT NULL DEFAULT '', PRIMARY KEY (target, device, method, workload))")


def test_a_cache_file_written_before_the_stamp_is_read_and_extended(tmp_path):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(OLD_COSTS)
    conn.execute("INSERT INTO costs VALUES ('T', 'local', 'm', 'w0', 'relu', 0.5, 0, 3, 0, '')")
    conn.commit()
    conn.close()
    cache = CostCache(path)
    old = cache.get("T", "local", "m", "w0")
    assert (old.seconds, old.contention) == (0.5, None)
    cache.put("T", "local", "m", "w1", 2e-3, contention=0.6)
    assert cache.get("T", "local", "m", "w1").contention == 0.6
    assert [e.workload for e in cache.entries()] == ["w0", "w1"]


def test_stamps_that_the_first_stamped_version_kept_in_the_costs_table_are_read(tmp_path):
    """That version added a contention column to `costs` (and may still be writing it)."""
    path = tmp_path / "b6c.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(OLD_COSTS)
    conn.execute("ALTER TABLE costs ADD COLUMN contention REAL")
    conn.execute("INSERT INTO costs VALUES ('T', 'local', 'm', 'w0', 'conv', 0.4, 0, 3, 0, '', 0.97)")
    conn.commit()
    conn.close()
    cache = CostCache(path)
    assert cache.get("T", "local", "m", "w0").contention == 0.97  # contended: timed again once quiet
    cache.put("T", "local", "m", "w0", 0.004, contention=0.0)
    assert cache.get("T", "local", "m", "w0").contention == 0.0
    assert [e.contention for e in cache.entries()] == [0.0]


def test_a_full_disk_is_reported_as_such(tmp_path):
    """SQLite ends the transaction itself there: no second error about a rollback hides the first."""
    cache = CostCache(tmp_path / "full.sqlite")
    cache.put("T", "local", "m", "w0", 1.0)
    conn = cache._connection()
    conn.execute(f"PRAGMA max_page_count={conn.execute('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(sqlite3.OperationalError, match="full"):
        cache.put_many([("T", "local", "m", f"w{i}" * 50, 1.0, 0, 1, "x" * 500) for i in range(200)])
    assert not conn.in_transaction


def test_code_from_before_the_stamp_still_reads_and_writes_a_stamped_file(tmp_path):
    """An older install sharing the cache file reads rows positionally: the costs table keeps its ten columns."""
    path = tmp_path / "shared.sqlite"
    cache = CostCache(path)
    cache.put("T", "local", "m", "w0", 0.1, contention=0.9)
    cache.close()
    conn = sqlite3.connect(path)
    (row,) = conn.execute("SELECT * FROM costs").fetchall()  # what the old code did, then Entry(*row)
    assert len(row) == 10 and row[5] == 0.1
    conn.execute("INSERT OR REPLACE INTO costs VALUES ('T', 'local', 'm', 'w0', 'relu', 0.004, 0, 3, ?, '')",
                 (time.time() + 1,))  # the old code times it again, unstamped
    conn.commit()
    conn.close()
    again = CostCache(path).get("T", "local", "m", "w0")
    assert again.seconds == 0.004 and again.contention is None  # the stale stamp no longer applies


def test_keeping_the_faster_time_reads_and_writes_in_one_transaction(tmp_path):
    path = tmp_path / "c.sqlite"
    first, second = CostCache(path), CostCache(path)
    first.put("T", "local", "m", "w", 0.010, contention=0.8)
    # two processes read the contended time, then both time the kernel again; the faster lands first
    first.put("T", "local", "m", "w", 0.002, std=0.1, repeats=7, contention=0.0, keep_faster=True)
    kept_at = first.get("T", "local", "m", "w").measured_at
    second.put("T", "local", "m", "w", 0.003, std=0.2, repeats=5, contention=0.1, keep_faster=True)
    entry = CostCache(path).get("T", "local", "m", "w")
    assert (entry.seconds, entry.std, entry.repeats) == (0.002, 0.1, 7)
    assert entry.contention == 0.1  # the later, slower timing vouches that the kept time was not inflated
    assert entry.measured_at == kept_at  # still dated when it was taken
    second.put("T", "local", "m", "w", 0.005, contention=0.0)  # a plain put replaces
    assert CostCache(path).get("T", "local", "m", "w").seconds == 0.005
    assert second.clear() == 1 and CostCache(path).get("T", "local", "m", "w") is None


def test_a_slower_timing_cannot_overwrite_a_faster_one_written_while_it_read(tmp_path):
    """Process A reads the contended time and stalls before writing its slower one; B writes a faster one
    meanwhile; A must not replace it."""
    import threading

    path = tmp_path / "race.sqlite"
    CostCache(path).put("T", "local", "m", "w", 0.010, contention=0.8)
    slow, fast = CostCache(path, timeout=10), CostCache(path, timeout=10)
    reading = threading.Event()

    def stall(statement):
        if statement.startswith("INSERT OR REPLACE INTO costs"):  # A has read 0.010 and keeps its 0.003
            reading.set()
            time.sleep(0.4)  # B tries to write now

    slow._connection().set_trace_callback(stall)
    a = threading.Thread(target=slow.put, args=("T", "local", "m", "w", 0.003), kwargs={"keep_faster": True})
    a.start()
    assert reading.wait(5)
    fast.put("T", "local", "m", "w", 0.002, keep_faster=True)  # waits for A's transaction to end
    a.join()
    assert CostCache(path).get("T", "local", "m", "w").seconds == 0.002


class ScriptedRunner:
    """Stands in for the timer: each call returns the next (seconds, contention)."""

    device_key = "local"
    exclusive = False

    def __init__(self, *timings):
        self.timings = list(timings)

    def time(self, executable, inputs, target=None):
        from taso_relay.cost.runner import Timing

        seconds, share = self.timings.pop(0)
        return Timing(seconds, 0.0, (seconds,), share)

    def close(self):
        pass


def test_a_time_taken_on_contended_cpus_is_measured_again_once_they_are_quiet(tmp_path, target, monkeypatch):
    from taso_relay.cost import measured

    graph, path = cost_graphs.conv_bias_relu(), tmp_path / "c.sqlite"  # one kernel

    def cost(runner, quiet):
        monkeypatch.setattr(measured, "_quiet_now", lambda: quiet)
        m = measured.MeasuredCost(target, cache=path, runner=runner)
        return m.graph_cost(graph), m.measurements

    assert cost(ScriptedRunner((0.1, 0.9)), quiet=False) == (0.1, 1)  # timed beside other work
    assert cost(ScriptedRunner(), quiet=False) == (0.1, 0)  # still busy: the cached time is used
    assert cost(ScriptedRunner((0.002, 0.0)), quiet=True) == (0.002, 1)  # quiet: timed again
    assert cost(ScriptedRunner(), quiet=True) == (0.002, 0)  # stamped quiet: trusted from now on
    (entry,) = CostCache(path).entries()
    assert entry.contention == 0.0

    def unread():
        raise AssertionError("the CPUs' pressure is read only for a contended cached time")

    monkeypatch.setattr(measured, "_quiet_now", unread)
    assert measured.MeasuredCost(target, cache=path, runner=ScriptedRunner()).graph_cost(graph) == 0.002


def test_measured_again_a_contended_time_keeps_the_faster_of_the_two(tmp_path, target, monkeypatch):
    from taso_relay.cost import measured

    graph, path = cost_graphs.conv_bias_relu(), tmp_path / "c.sqlite"
    monkeypatch.setattr(measured, "_quiet_now", lambda: True)
    first = measured.MeasuredCost(target, cache=path, runner=ScriptedRunner((0.001, 0.5)))
    assert first.graph_cost(graph) == 0.001
    again = measured.MeasuredCost(target, cache=path, runner=ScriptedRunner((0.003, 0.3)))
    assert again.graph_cost(graph) == 0.001 and again.measurements == 1  # contention only slows a kernel
    third = measured.MeasuredCost(target, cache=path, runner=ScriptedRunner((0.0005, 0.0)))
    assert third.graph_cost(graph) == 0.0005  # the second timing was contended too: timed a third time


def test_the_local_runner_stamps_each_timing_with_its_window(target, monkeypatch):
    from taso_relay.cost.measured import MeasuredCost

    stalls = iter([100.0, 160.0])  # a minute of stall within one timing: wholly contended
    monkeypatch.setattr(contention, "_stall_seconds", lambda path: next(stalls))
    m = MeasuredCost(target, cache=False)
    (kernel,) = m.kernels(cost_graphs.conv_bias_relu(c=4, hw=4))
    timing = m.measure_kernel(kernel)
    assert timing.median > 0 and timing.contention == 1.0


@pytest.mark.parametrize("device, stamped", [("cpu", True), ("cuda", False)])
def test_only_cpu_timings_are_stamped(device, stamped, monkeypatch):
    """A GPU kernel's time does not hinge on CPU pressure: busy CPUs must not send it to be timed again."""
    import tvm

    from taso_relay.cost import runner
    from taso_relay.cost.runner import LocalRunner, Timing

    monkeypatch.setattr(tvm.relax, "VirtualMachine", lambda executable, dev: None)
    monkeypatch.setattr(tvm.runtime, "tensor", lambda array, dev: array)  # no GPU needed to place inputs
    monkeypatch.setattr(runner, "time_vm", lambda vm, dev, args, settings: Timing(1e-3, 0.0, (1e-3,)))
    monkeypatch.setattr(contention, "_load_share", lambda: 0.5)
    monkeypatch.setattr(contention, "_psi_path", lambda: None)  # the load average: half a core waiting
    timing = LocalRunner(device=device).time(None, [np.zeros(2, "float32")])
    assert timing.median == 1e-3 and (timing.contention == 0.5) is stamped
    assert stamped or timing.contention is None
