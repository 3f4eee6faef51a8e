"""Shape arithmetic evaluated in numpy (bridge/shape_fold.py), not by FoldConstant's kernels."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")

import tvm  # noqa: E402
from bridge_onnx_models import Model, import_onnx  # noqa: E402
from onnx import TensorProto  # noqa: E402
from tvm import relax  # noqa: E402
from tvm.ir.expr import Constant  # noqa: E402

from taso_relay.bridge import graph_from_function  # noqa: E402
from taso_relay.bridge.shape_fold import fold_shape_values  # noqa: E402
from taso_relay.graph import evaluate  # noqa: E402

F32 = TensorProto.FLOAT


def qkv_unbind():
    """Swin's and nn.MultiheadAttention's `q, k = qkv[0], qkv[1]`: ONNX Gathers of constant scalar
    indices, which TVM's importer normalises through R.shape_of (where(i < 0, i + extent, i))."""
    m = Model(3)
    qkv = m.op("Transpose", [m.op("Reshape", ["x", m.const([1, 5, 3, 2, 4])])], perm=[2, 0, 3, 1, 4])
    q = m.op("Gather", [qkv, m.const(0)], axis=0)
    k = m.op("Gather", [qkv, m.const(-2)], axis=0)  # a negative index: the arithmetic matters
    y = m.op("MatMul", [q, m.op("Transpose", [k], perm=[0, 1, 3, 2])])
    return import_onnx(m.build([("x", F32, [1, 5, 24])], [(y, F32, [1, 2, 5, 5])]))


def _bindings(func):
    return [b for block in func.body.blocks for b in block.bindings]


def _shape_bindings(func):
    return [b for b in _bindings(func) if isinstance(b.var.ty, relax.ShapeType)]


def _run(func, x):
    from taso_relay.cost.lowering import compile_module

    vm = relax.VirtualMachine(compile_module(tvm.IRModule({"main": func}), None), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


def test_an_unbinding_is_read_without_any_kernel_built(monkeypatch):
    mod = qkv_unbind()
    assert _shape_bindings(mod["main"])
    x = np.random.default_rng(0).standard_normal((1, 5, 24)).astype("float32")
    want = _run(mod["main"], x)

    def no_kernels(*args, **kwargs):
        raise AssertionError("FoldConstant was run")

    monkeypatch.setattr(relax.transform, "FoldConstant", no_kernels)
    imported = graph_from_function(mod["main"])
    assert imported is not None and imported.folded == "numpy"
    ops = imported.graph.op_counts()
    assert "opaque" not in ops and ops.get("matmul") == 1, ops  # both takes read as slices
    got = evaluate(imported.graph, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    ref = x.reshape(1, 5, 3, 2, 4).transpose(2, 0, 3, 1, 4)
    np.testing.assert_allclose(want, ref[0] @ ref[1].transpose(0, 1, 3, 2), rtol=1e-5, atol=1e-6)


def test_the_folded_function_computes_what_the_original_does():
    func = qkv_unbind()["main"]
    folded = fold_shape_values(func)
    assert folded is not None and not _shape_bindings(folded)
    assert len(_bindings(folded)) < len(_bindings(func))
    x = np.random.default_rng(1).standard_normal((1, 5, 24)).astype("float32")
    np.testing.assert_array_equal(_run(folded, x), _run(func, x))


def _function(build):
    """A Relax function of x: (4, 4) float32, its body from build(bb, x)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4, 4), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(build(bb, x))
        bb.emit_func_output(out)
    return bb.get()["main"]


def _extent(bb, x, index, mode="wrap"):
    shape = bb.emit(relax.op.shape_to_tensor(bb.emit(relax.op.shape_of(x))))
    return bb.emit(relax.op.take(shape, relax.const(index, "int64"), axis=0, mode=mode))


def test_a_float_computation_on_weights_is_not_folded():
    """Weight-only float arithmetic stays for the graph (and FoldConstant at build time)."""
    weight = relax.const(np.ones((4, 4), "float32"))

    def build(bb, x):
        scaled = bb.emit(relax.op.multiply(weight, relax.const(2.0, "float32")))
        n = bb.emit(relax.op.astype(_extent(bb, x, 1), "float32"))
        return relax.op.add(bb.emit(relax.op.add(x, scaled)), n)

    folded = fold_shape_values(_function(build))
    assert folded is not None and not _shape_bindings(folded)
    ops = [b.value.op.name for b in _bindings(folded)]
    assert ops == ["relax.multiply", "relax.astype", "relax.add", "relax.add"], ops  # integers folded, floats kept
    cast = _bindings(folded)[1].value
    assert isinstance(cast.args[0], Constant) and int(cast.args[0].value.numpy()) == 4


def test_an_index_out_of_range_of_a_fast_take_is_left_alone():
    """take's "fast" mode has no defined result out of range: the take stays, reading a constant."""
    def build(bb, x):
        return relax.op.add(x, bb.emit(relax.op.astype(_extent(bb, x, 7, mode="fast"), "float32")))

    folded = fold_shape_values(_function(build))
    assert folded is not None and not _shape_bindings(folded)
    takes = [b.value for b in _bindings(folded) if b.value.op.name == "relax.take"]
    assert len(takes) == 1 and isinstance(takes[0].args[0], Constant)


def test_a_shape_of_unknown_extent_is_left_to_foldconstant():
    bb = relax.BlockBuilder()
    n = tvm.tirx.Var("n", "int64")
    x = relax.Var("x", relax.TensorType((n, 4), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            shape = bb.emit(relax.op.shape_to_tensor(bb.emit(relax.op.shape_of(x))))
            out = bb.emit_output(relax.op.astype(shape, "float32"))
        bb.emit_func_output(out)
    assert fold_shape_values(bb.get()["main"]) is None
