"""fold_kernels: FoldConstant's result, with one build per distinct kernel."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")


def _model():
    """Two inference batch norms of 8 channels, then a conv whose weight is transposed: constants all."""
    from tvm import relax

    rng = np.random.default_rng(0)
    const = lambda *shape: relax.const(rng.uniform(0.5, 1.5, shape).astype("float32"))  # noqa: E731
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 8, 6, 6), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = x
            for _ in range(2):
                y = bb.emit(relax.TupleGetItem(relax.op.nn.batch_norm(
                    y, const(8), const(8), const(8), const(8), axis=1, training=False), 0))
            weight = bb.emit(relax.op.permute_dims(const(3, 3, 8, 4), [3, 2, 0, 1]))  # HWIO -> OIHW, weight-only
            out = bb.emit_output(bb.emit(relax.op.nn.conv2d(y, weight)))
        bb.emit_func_output(out)
    return bb.get()


def _two_batch_norms():
    """_model legalized as the tuning lowering does, up to where it folds constants."""
    import tvm

    from taso_relay.cost.lowering import passes_before_folding

    with tvm.target.Target("llvm"):
        return tvm.transform.Sequential(passes_before_folding("tuning"))(_model())


def _counting_builds(monkeypatch, module) -> list:
    """Calls of TVM's kernel build made through `module` (fold_kernels) from now on."""
    builds = []
    real = module.tvm.get_global_func

    def counting(name, *args, **kwargs):
        func = real(name, *args, **kwargs)
        return (lambda *a: builds.append(1) or func(*a)) if name == "tirx.build" else func

    monkeypatch.setattr(module.tvm, "get_global_func", counting)
    return builds


def _constants(mod) -> list[np.ndarray]:
    from tvm import relax
    from tvm.ir.expr import GenericConst

    found = []
    relax.analysis.post_order_visit(mod["main"].body,
                                    lambda e: found.append(e.value.numpy()) if isinstance(e, GenericConst) else None)
    return found


def _kernel_calls(mod) -> int:
    import tvm
    from tvm import relax

    call_tir, calls = tvm.ir.Op.get("relax.call_tir"), []
    relax.analysis.post_order_visit(mod["main"].body, lambda e: calls.append(e) if isinstance(
        e, relax.Call) and e.op.same_as(call_tir) else None)
    return len(calls)


def test_the_same_module_and_constants_as_fold_constant_from_fewer_builds(monkeypatch):
    import tvm
    import tvm_ffi
    from tvm import relax

    from taso_relay.cost import fold_kernels as module

    legalized = _two_batch_norms()
    before = legalized.clone()
    builds = _counting_builds(monkeypatch, module)
    ours = relax.transform.FoldConstant()(module.fold_kernels(legalized))
    monkeypatch.undo()
    theirs = relax.transform.FoldConstant()(legalized)
    assert tvm_ffi.structural_equal(ours, theirs)
    mine, stock = _constants(ours), _constants(theirs)
    assert len(mine) == len(stock) >= 3
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(mine, stock))  # bit for bit
    folded = _kernel_calls(legalized) - _kernel_calls(ours)  # each batch norm's share of constants, the transpose
    assert 0 < len(builds) < folded  # the second batch norm's kernels were built for the first
    assert tvm_ffi.structural_equal(legalized, before)  # the input module is left as it was


def test_the_tuning_lowering_folds_weights_through_fold_kernels(monkeypatch):
    """The lowering the cost models and the speed check use folds through fold_kernels: no call of
    constants is left to run."""
    import tvm
    from tvm import relax
    from tvm.ir.expr import GenericConst

    from taso_relay.cost import fold_kernels as module
    from taso_relay.cost.lowering import lower

    builds = _counting_builds(monkeypatch, module)
    lowered = lower(_model(), tvm.target.Target({"kind": "llvm", "num-cores": 1}), lowering="tuning")
    call_tir = tvm.ir.Op.get("relax.call_tir")
    left = []
    relax.analysis.post_order_visit(lowered["main"].body, lambda e: left.append(e) if isinstance(
        e, relax.Call) and e.op.same_as(call_tir) and all(isinstance(a, GenericConst) for a in e.args[1].fields)
        else None)
    assert builds and not left
