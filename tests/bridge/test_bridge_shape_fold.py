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


def test_constant_computations_are_folded_as_foldconstant_folds_them():
    """Every call of a known op on constants alone is folded, floats too (FoldConstant folded them,
    and a gather from a constant table left unfolded would be an opaque call); an op not known here
    (exp) stays, reading the folded constant."""
    table = np.arange(12, dtype="float32").reshape(3, 4)

    def build(bb, x):
        scaled = bb.emit(relax.op.multiply(relax.const(table), relax.const(2.0, "float32")))
        index = bb.emit(relax.op.broadcast_to(relax.const(np.array([2], "int64")), (2,)))  # BERT's token types
        row = bb.emit(relax.op.take(scaled, index, axis=0))
        grown = bb.emit(relax.op.exp(bb.emit(relax.op.reshape(row, (2, 4)))))
        n = bb.emit(relax.op.astype(_extent(bb, x, 1), "float32"))
        return relax.op.add(bb.emit(relax.op.add(x, bb.emit(relax.op.sum(grown, axis=[0])))), n)

    folded = fold_shape_values(_function(build))
    assert folded is not None and not _shape_bindings(folded)
    kept = _bindings(folded)
    assert [b.value.op.name for b in kept] == ["relax.exp", "relax.sum", "relax.add", "relax.add"]
    np.testing.assert_array_equal(kept[0].value.args[0].value.numpy(), table[[2, 2]] * 2)
    assert float(kept[3].value.args[1].value.numpy()) == 4.0  # the extent, cast


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


def test_the_graph_read_is_the_one_foldconstant_gave(monkeypatch):
    """Both ways of folding give the search the same graph: the same ops, the same numbers."""
    from taso_relay.bridge import shape_fold

    mod = qkv_unbind()
    mine = graph_from_function(mod["main"])
    monkeypatch.setattr(shape_fold, "fold_shape_values", lambda func: None)
    theirs = graph_from_function(mod["main"])
    assert (mine.folded, theirs.folded) == ("numpy", "FoldConstant")
    assert mine.graph.op_counts() == theirs.graph.op_counts()
    x = np.random.default_rng(2).standard_normal((1, 5, 24)).astype("float32")
    np.testing.assert_array_equal(evaluate(mine.graph, {"x": x})[0], evaluate(theirs.graph, {"x": x})[0])


def test_what_numpy_does_not_fold_foldconstant_folds_after_it():
    """A constant call of an op not evaluated here (exp) is left to FoldConstant, on the function numpy
    folded first (few calls left to build): the graph gets the constant, as FoldConstant alone gave it."""
    from taso_relay.bridge.from_relax import shapes_folded
    from taso_relay.bridge.shape_fold import constant_calls

    def build(bb, x):
        n = bb.emit(relax.op.astype(_extent(bb, x, 1), "float32"))
        return relax.op.add(x, bb.emit(relax.op.exp(n)))

    func = _function(build)
    assert constant_calls(fold_shape_values(func)) == 1
    folded, how = shapes_folded(func, "main")
    assert how == "numpy, then FoldConstant" and constant_calls(folded) == 0
    (add,) = [b.value for b in _bindings(folded)]
    assert add.op.name == "relax.add" and np.isclose(float(add.args[1].value.numpy()), np.exp(4.0))


def test_the_shape_of_a_scalar_is_substituted_too():
    """R.shape([]) is falsy: its uses must still read it (else the function is ill-formed)."""
    bb = relax.BlockBuilder()
    s = relax.Var("s", relax.TensorType((), "float32"))
    y = relax.Var("y", relax.TensorType((1,), "float32"))
    with bb.function("main", [s, y]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.reshape(y, bb.emit(relax.op.shape_of(s))))
        bb.emit_func_output(out)
    folded = fold_shape_values(bb.get()["main"])
    assert folded is not None
    relax.analysis.well_formed(tvm.IRModule({"main": folded}))  # raises on a variable used but not bound
    (reshape,) = [b.value for b in _bindings(folded)]
    assert isinstance(reshape.args[1], relax.ShapeExpr) and len(reshape.args[1].values) == 0


@pytest.mark.parametrize("a, b", [([1.0, 7.0, -1.0, 5.5], [0.1, 0.7, 0.1, 1.1]), ([7, -7, 6], [2, 2, -4])])
def test_floor_divide_folds_to_what_tvm_computes(a, b):
    """TVM's floor_divide is floor(a / b); numpy's on floats rounds otherwise (1.0 // 0.1 == 9)."""
    dtype = "float32" if isinstance(a[0], float) else "int64"
    x_type = relax.TensorType((len(a),), dtype)

    def function():
        bb = relax.BlockBuilder()
        x = relax.Var("x", x_type)
        with bb.function("main", [x]):
            with bb.dataflow():
                num, den = (relax.const(np.array(v, dtype), dtype) for v in (a, b))
                q = relax.op.floor_divide(num, den)
                out = bb.emit_output(relax.op.add(x, bb.emit(q)))
            bb.emit_func_output(out)
        return bb.get()["main"]

    func = function()
    folded = _folded_value(func)
    zeros = np.zeros(len(a), dtype)
    np.testing.assert_array_equal(folded, _run(func, zeros))


def _folded_value(func):
    """The value the numpy fold gives the one call of `func` on constants (its add reads it)."""
    from taso_relay.bridge.shape_fold import _Folder

    folder = _Folder()
    for b in _bindings(func):
        folder.visit(b)
    (value,) = folder.known.values()
    return value
