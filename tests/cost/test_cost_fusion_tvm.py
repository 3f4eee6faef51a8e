"""The partition agrees with what Relax FuseOps really produces (kernel launches after lowering)."""
from __future__ import annotations

import pytest

import cost_graphs
from cost_graphs import with_values

pytest.importorskip("tvm")


def tvm_kernels(graph, target, lowering="default"):
    from taso_relay.bridge import module_from_graph
    from taso_relay.cost.lowering import count_kernels, lower

    return count_kernels(lower(module_from_graph(with_values(graph)), target, lowering=lowering))


@pytest.mark.parametrize("lowering", ["default", "tuning"])
@pytest.mark.parametrize("name", sorted(cost_graphs.ALL))
def test_kernel_count_matches_fuseops(name, lowering, target):
    from taso_relay.cost import partition

    graph = cost_graphs.ALL[name]()
    mine = partition(graph, lowering=lowering)
    assert len(mine.kernels) == tvm_kernels(graph, target, lowering), [k.label for k in mine.kernels]


def test_default_lowering_counts_what_the_default_pipeline_runs(target):
    """lower(..., "default") forms the kernels relax.get_default_pipeline forms."""
    import tvm
    from tvm import relax

    from taso_relay.bridge import module_from_graph

    graph = with_values(cost_graphs.conv_bn_relu_chain(n=2))
    mod = module_from_graph(graph)
    with tvm.target.Target(target):
        full = relax.get_default_pipeline(tvm.target.Target(target))(mod)
    prims = [gv for gv, f in full.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
    assert sorted(p.name_hint for p in prims) == ["conv2d", "fused_batch_norm_relu"]  # used twice each


def test_opaque_pad_fuses_like_tvm(target):
    """An opaque call_tir(pad) (as the ONNX importer writes it) fuses with the slice after it."""
    import numpy as np
    import tvm
    from tvm import relax, topi

    from taso_relay.bridge import graph_from_function
    from taso_relay.cost import partition
    from taso_relay.cost.lowering import count_kernels, lower
    from taso_relay.cost.opaque import OpaqueInfo

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 8, 8, 8), "float32"))
    w = relax.const(np.ones((8, 8, 3, 3), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, w, padding=1))
            p = bb.emit_te(topi.nn.pad, y, [0, 0, 1, 1], [0, 0, 1, 1])
            s = bb.emit(relax.op.strided_slice(p, [2, 3], [1, 1], [9, 9]))
            out = bb.emit_output(relax.op.nn.relu(s))
        bb.emit_func_output(out)
    mod = bb.get()
    graph = graph_from_function(mod["main"]).graph
    assert graph.op_counts().get("opaque") == 1
    expected = count_kernels(lower(mod, target))
    assert len(partition(graph, OpaqueInfo(mod)).kernels) == expected
    assert len(partition(graph).kernels) == expected + 1  # without the module: the pad stays alone
