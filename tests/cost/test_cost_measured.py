"""The measured model: kernels compiled and timed once, then served from the SQLite cache."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cost_graphs

pytest.importorskip("tvm")

from taso_relay.cost import CacheCorruptWarning, CostCache  # noqa: E402
from taso_relay.cost.measured import MeasuredCost, kernel_module  # noqa: E402
from taso_relay.cost.runner import TimerSettings  # noqa: E402
from taso_relay.graph import GraphBuilder  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FAST = TimerSettings(repeat=3, warmup=1)


def model(target, path, **kw):
    return MeasuredCost(target, cache=path, timer=FAST, **kw)


def test_second_run_measures_nothing(tmp_path, target):
    graph = cost_graphs.residual_block()
    first = model(target, tmp_path / "c.sqlite")
    cost = first.graph_cost(graph)
    assert cost > 0 and first.compiles == first.measurements == 2
    assert first.graph_cost(graph) == cost and first.compiles == 2  # memoised in process
    second = model(target, tmp_path / "c.sqlite")
    assert second.graph_cost(graph) == pytest.approx(cost)
    assert second.compiles == second.measurements == 0
    entries = CostCache(tmp_path / "c.sqlite").entries()
    assert sorted(e.label for e in entries) == ["conv2d+add+relu", "conv2d+relu"]
    assert all(e.method.startswith("measured/") and e.device == "local" and e.repeats >= 1 for e in entries)


def test_shared_kernels_are_measured_once(tmp_path, target):
    m = model(target, tmp_path / "c.sqlite")
    m.graph_cost(cost_graphs.conv_bn_relu_chain(n=3))
    assert m.compiles == 2  # conv2d, batch_norm+relu: three times each
    m.graph_cost(cost_graphs.conv_bn_relu_chain(n=1))  # the same kernels in another graph
    assert m.compiles == 2


def test_tuning_lowering_fuses_batch_norm_and_keys_apart(tmp_path, target):
    m = model(target, tmp_path / "c.sqlite", lowering="tuning")
    m.graph_cost(cost_graphs.conv_bn_relu_chain(n=3))
    assert m.compiles == 1 and [k.label for k in m.kernels(cost_graphs.conv_bn_relu_chain(n=1))] == [
        "conv2d+batch_norm+relu"]
    assert {e.method for e in CostCache(tmp_path / "c.sqlite").entries()} == {"measured/decompose+zero/v1"}


def test_default_cache_is_in_the_user_cache_dir(_private_cache_dir, target):
    m = MeasuredCost(target, timer=FAST)
    m.graph_cost(cost_graphs.head())
    assert (_private_cache_dir / "costs.sqlite").exists() and m.compiles == 3  # relu, mean, matmul+add


def test_no_disk_cache(tmp_path, target):
    m = MeasuredCost(target, cache=False, timer=FAST)
    m.graph_cost(cost_graphs.conv_bias_relu())
    assert m.compiles == 1 and not list(tmp_path.glob("*.sqlite"))


def test_corrupt_cache_is_rebuilt_and_remeasured(tmp_path, target):
    path = tmp_path / "c.sqlite"
    graph = cost_graphs.conv_bias_relu()
    model(target, path).graph_cost(graph)
    path.write_bytes(b"garbage" * 1000)
    (tmp_path / "c.sqlite-wal").unlink(missing_ok=True)
    m = model(target, path)
    with pytest.warns(CacheCorruptWarning):
        assert m.graph_cost(graph) > 0
    assert m.compiles == 1 and len(CostCache(path)) == 1
    assert list(tmp_path.glob("c.sqlite.corrupt-*"))


def test_kernel_module_is_the_kernel_alone(target):
    import tvm

    graph = cost_graphs.gemm_with_weight_transpose()
    (kernel,) = MeasuredCost(target, cache=False).kernels(graph)
    mod, inputs = kernel_module(kernel)
    assert [p.name for p in mod["main"].params] == ["taso_kernel_a0"]  # weights are constants
    assert [a.shape for a in inputs] == [(4, 32)]
    assert isinstance(mod, tvm.IRModule)


def test_indices_into_a_small_table_stay_in_its_rows(target):
    """An opaque take (token ids) of a 2-row table (BERT's token types): random indices from [0, 4)
    read out of bounds in take's fast mode; the kernel's inputs stay below the table's rows."""
    import numpy as np

    from taso_relay.bridge import graph_from_function
    from tests.cost.relax_modules import lookup_then_add

    graph = graph_from_function(lookup_then_add(rows=2, ids=64, width=8)["main"]).graph
    lookups = [k for k in MeasuredCost(target, cache=False).kernels(graph)
               if any(graph.nodes[i].op == "opaque" for i in k.nodes)]
    assert len(lookups) == 1
    _, inputs = kernel_module(lookups[0])
    indices = [a for a in inputs if a.dtype == np.int64]
    assert len(indices) == 1 and indices[0].min() == 0 and indices[0].max() == 1


def test_unbuildable_kernel_falls_back_with_a_warning(tmp_path, target):
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    (o,) = b.opaque([x], [b.type_of(x)], payload=None, key="nothing", label="relax.mystery")
    m = model(target, tmp_path / "c.sqlite")
    with pytest.warns(RuntimeWarning, match="could not measure kernel opaque"):
        cost = m.graph_cost(b.build([o]))
    assert cost > 0 and m.failures and len(CostCache(tmp_path / "c.sqlite")) == 0  # estimates are not cached


def test_slow_kernels_get_fewer_repeats():
    import time

    from taso_relay.cost.runner import time_vm

    class FakeVM:
        def __init__(self):
            self.calls = 0
            self.module = self

        def set_input(self, *a):
            pass

        def invoke_stateful(self, name):
            time.sleep(0.05)

        def time_evaluator(self, name, dev, number, repeat, min_repeat_ms, cache_flush_bytes):
            self.repeat = repeat
            return lambda fn: type("R", (), {"results": [0.05] * repeat})()

    class Dev:
        def sync(self):
            pass

    vm = FakeVM()
    timing = time_vm(vm, Dev(), [], TimerSettings(repeat=10, budget_s=0.2, min_repeat=3))
    assert vm.repeat in (3, 4) and timing.median == 0.05 and len(timing.results) == vm.repeat


MEASURER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[2])
    import cost_graphs
    from taso_relay.cost.measured import MeasuredCost
    from taso_relay.cost.runner import TimerSettings
    m = MeasuredCost({"kind": "llvm", "num-cores": 2}, cache=sys.argv[1], timer=TimerSettings(repeat=3, warmup=1))
    print(m.graph_cost(cost_graphs.inception_like()), m.compiles)
""")


def test_concurrent_processes_measure_into_one_cache(tmp_path, target):
    path = tmp_path / "c.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = [subprocess.Popen([sys.executable, "-c", MEASURER, str(path), str(Path(__file__).parent)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert float(out.split()[0]) > 0
    assert len(CostCache(path)) == 3  # conv2d+relu (x3, one workload), max_pool2d, concat+relu
    again = model(target, path)
    again.graph_cost(cost_graphs.inception_like())
    assert again.compiles == 0


def test_unusable_cache_file_is_dropped_with_a_warning(tmp_path, target):
    blocked = tmp_path / "a-directory.sqlite"
    blocked.mkdir()  # sqlite cannot open a directory (a read-only file would be bypassed by root)
    m = model(target, blocked)
    with pytest.warns(RuntimeWarning, match="unusable"):
        assert m.graph_cost(cost_graphs.conv_bias_relu()) > 0
    assert m.cache is None and m.compiles == 1
