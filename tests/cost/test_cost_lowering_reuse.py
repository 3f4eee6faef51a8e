"""Inside reusing_lowerings a module is lowered once: tuning's lowering serves the build that follows."""
from __future__ import annotations

import numpy as np
import pytest

import cost_graphs
from cost_graphs import with_values

pytest.importorskip("tvm")


@pytest.fixture
def counted(monkeypatch):
    """Counts the lowering pipelines `lower` runs."""
    from taso_relay.cost import lowering

    runs = []
    real = lowering.lowering_pipeline

    def counting(target, database=None, lowering_name="default"):
        runs.append(lowering_name)
        return real(target, database, lowering_name)

    monkeypatch.setattr(lowering, "lowering_pipeline", counting)
    return runs


def _module():
    from taso_relay.bridge import module_from_graph

    return module_from_graph(with_values(cost_graphs.conv_bn_relu_chain(n=2)))


def test_a_module_is_lowered_once_in_a_scope_and_again_outside(counted, target):
    import tvm
    import tvm_ffi

    from taso_relay.cost.lowering import lower, reusing_lowerings

    mod = _module()
    with reusing_lowerings():
        first = lower(mod, target, lowering="tuning")
        with reusing_lowerings():  # a nested scope shares the outer one's modules
            again = lower(mod, target, lowering="tuning")
        default = lower(mod, target, lowering="default")  # another lowering is another module
    assert counted == ["tuning", "default"]
    assert again.same_as(first)
    assert not tvm_ffi.structural_equal(first, default)
    with reusing_lowerings():  # the outermost scope ended: nothing kept
        lower(mod, target, lowering="tuning")
    lower(mod, target, lowering="tuning")
    assert counted == ["tuning", "default", "tuning", "tuning"]


def test_a_module_changed_in_place_is_lowered_afresh(counted, target):
    """IRModule.__setitem__ changes a module in place (the speed check does): the key is its content."""
    import tvm
    import tvm_ffi
    from tvm import relax

    from taso_relay.cost.lowering import lower, reusing_lowerings

    mod = _module()
    with reusing_lowerings():
        before = lower(mod, target, lowering="tuning")
        func = mod["main"]
        x = func.params[0]
        bb = relax.BlockBuilder()
        with bb.function("main", [x]):
            with bb.dataflow():
                y = bb.emit_output(relax.op.nn.relu(x))
            bb.emit_func_output(y)
        mod["main"] = bb.get()["main"]
        after = lower(mod, target, lowering="tuning")
    assert len(counted) == 2
    assert not tvm_ffi.structural_equal(before, after)


def test_the_reused_lowering_builds_what_a_fresh_one_builds(target):
    """The kept lowering gets the database's schedules, and the same numbers come out as from a module
    lowered alone. (ScheduleFnDatabase: every kernel has a record, its schedule the kernel as it is.)"""
    import tvm
    import tvm_ffi
    from tvm import relax

    from taso_relay.bridge.execute import random_inputs
    from taso_relay.cost.lowering import as_target, lower, reusing_lowerings

    mod = _module()
    from tvm.s_tir import meta_schedule as ms

    database = ms.database.ScheduleFnDatabase(lambda sch: True)
    fresh = lower(mod, target, database, "tuning")
    with reusing_lowerings():
        plain = lower(mod, target, None, "tuning")
        reused = lower(mod, target, database, "tuning")

    def scheduled(m):
        return [bool(f.attrs.get("tirx.is_scheduled", False)) for f in m.functions.values()
                if isinstance(f, tvm.tirx.PrimFunc)]
    assert scheduled(reused) and all(scheduled(reused)) and not any(scheduled(plain))
    assert tvm_ffi.structural_equal(fresh, reused)
    inputs = [tvm.runtime.tensor(np.asarray(a)) for a in random_inputs(mod["main"].params, np.random.default_rng(0),
                                                                        mod["main"])]
    vms = [relax.VirtualMachine(tvm.compile(m, as_target(target)), tvm.cpu()) for m in (fresh, reused)]
    outs = [vm["main"](*inputs).numpy() for vm in vms]
    np.testing.assert_array_equal(outs[0], outs[1])


def test_a_tuned_kernel_build_lowers_its_module_once(counted, tmp_path, target):
    """TunedCost.build tunes (lowering the kernel's module to find its tasks), then builds that lowering."""
    from taso_relay.cost import TunedCost, partition

    graph = with_values(cost_graphs.conv_bn_relu_chain(n=1))
    kernel = partition(graph, lowering="tuning").kernels[0]
    model = TunedCost(target, trials=0, work_dir=tmp_path / "db", cache=False)
    executable, inputs = model.build(kernel)
    assert counted == ["tuning"]
    assert executable is not None and inputs
