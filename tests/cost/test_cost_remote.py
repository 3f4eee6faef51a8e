"""Measurement through TVM RPC: a tracker and a server on loopback, a kernel timed through them."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

import cost_graphs

tvm = pytest.importorskip("tvm")


def _rpc_available() -> str | None:
    try:
        from tvm import rpc  # noqa: F401
        from tvm.rpc import tracker  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        return f"TVM RPC is not available in this build: {exc}"
    if not tvm.runtime.enabled("rpc"):
        return "this TVM build has no RPC runtime"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args):
    # A new session so the server's worker processes can be stopped with it, by process group.
    return subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _stop(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def tracker():
    reason = _rpc_available()
    if reason:
        pytest.skip(reason)
    from tvm import rpc

    port, server_port = _free_port(), _free_port()
    tr = _start(["tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port), "--port-end", str(port + 1),
                 "--silent"])
    sv = None
    try:
        deadline = time.time() + 60
        while True:
            try:
                rpc.connect_tracker("127.0.0.1", port).summary()
                break
            except Exception:  # noqa: BLE001 - not up yet
                if time.time() > deadline:
                    raise
                time.sleep(0.3)
        sv = _start(["tvm.exec.rpc_server", "--tracker", f"127.0.0.1:{port}", "--key", "loopback", "--host",
                     "127.0.0.1", "--port", str(server_port), "--port-end", str(server_port + 1), "--silent"])
        while "loopback" not in str(rpc.connect_tracker("127.0.0.1", port).summary().get("queue_info", {})):
            if time.time() > deadline:
                pytest.fail("the RPC server did not register with the tracker")
            time.sleep(0.3)
        yield "127.0.0.1", port, "loopback"
    finally:
        if sv is not None:
            _stop(sv)
        _stop(tr)


def test_parse_rpc():
    from taso_relay.cost.remote import parse_rpc

    assert parse_rpc("10.0.0.2:9190:rk3399") == ("10.0.0.2", 9190, "rk3399")
    with pytest.raises(ValueError):
        parse_rpc("host:key")


def test_measures_through_rpc(tracker, tmp_path, target):
    from taso_relay.cost import CostCache
    from taso_relay.cost.measured import MeasuredCost
    from taso_relay.cost.remote import RPCRunner
    from taso_relay.cost.runner import TimerSettings

    host, port, key = tracker
    runner = RPCRunner(host, port, key, settings=TimerSettings(repeat=3, warmup=1))
    graph = cost_graphs.parallel_convs(merged=True)  # a tuple-returning kernel (split) among them
    m = MeasuredCost(target, cache=tmp_path / "c.sqlite", runner=runner)
    cost = m.graph_cost(graph)
    assert cost > 0 and m.measurements == len({k.key for k in m.kernels(graph)}) == 3  # conv, split, relu
    entries = CostCache(tmp_path / "c.sqlite").entries()
    assert {e.device for e in entries} == {"rpc:loopback"}
    again = MeasuredCost(target, cache=tmp_path / "c.sqlite", runner=RPCRunner(host, port, key))
    assert again.graph_cost(graph) == pytest.approx(cost) and again.measurements == 0
    local = MeasuredCost(target, cache=tmp_path / "c.sqlite", timer=TimerSettings(repeat=2, warmup=1))
    local.graph_cost(graph)
    assert local.measurements == 3  # local and remote timings never mix
