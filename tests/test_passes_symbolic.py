"""TASOPass on a function with symbolic sizes: optimized at stand-in sizes, written back in its symbols, and kept
only where that computes what the original does at other sizes (bridge/symbolic_sizes.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm import relax, tirx

from taso_relay.bridge import symbolic_sizes
from onnx import helper

from taso_relay.bridge.execute import random_inputs, run_module
from taso_relay.passes import TASOPass

sys.path.insert(0, str(Path(__file__).parent / "bridge"))
from bridge_onnx_models import F32, Model, import_onnx, static_backbone  # noqa: E402
from test_passes_norm import batch_norm_calls, optimized_with_every_rewrite  # noqa: E402


def dynamic_batch_cnn():
    """conv + batch norm + relu, Flatten, Gemm on (N, 3, 8, 8): an ONNX export with a dynamic batch."""
    m = Model(3)
    y = m.op("Relu", [m.bn(m.conv("x", 3, 8, 3, pads=[1, 1, 1, 1]), 8)])
    y = m.op("Gemm", [m.op("Flatten", [y]), m.weight((10, 8 * 8 * 8)), m.weight((10,))], transB=1)
    return import_onnx(m.build([("x", F32, ["N", 3, 8, 8])], [(y, F32, ["N", 10])]))


def sliced_linear_norm(reshaped: bool):
    """x (n, 16), its first n - 1 rows, Linear + BatchNorm1d; with `reshaped`, the result reshaped to
    ((n - 1) * 2, 16): a size Relax folds to a number once n is bound."""
    rng = np.random.default_rng(4)
    c = lambda *shape: relax.const(rng.standard_normal(shape).astype("float32"))  # noqa: E731
    n = tirx.Var("n", "int64")
    x = relax.Var("x", relax.TensorType((n, 16), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.strided_slice(x, axes=[0], begin=[0], end=[n - 1]))
            y = bb.emit(relax.op.matmul(y, c(16, 32)))
            var = relax.const((np.abs(rng.standard_normal(32)) + 0.5).astype("float32"))
            y = bb.emit(relax.TupleGetItem(bb.emit(relax.op.nn.batch_norm(y, c(32), c(32), c(32), var, axis=1,
                                                                          training=False)), 0))
            if reshaped:
                y = bb.emit(relax.op.reshape(y, relax.ShapeExpr([(n - 1) * 2, 16])))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return bb.get()


def at(func, sizes: dict):
    """`func` bound at sizes given by symbol name, in a module of its own."""
    return tvm.IRModule({"main": func.bind_symbolic_vars(sizes)})


def agree_at(mod, out, name: str, values, rng):
    for k in values:
        want_mod, got_mod = at(mod["main"], {name: k}), at(out["main"], {name: k})
        inputs = random_inputs(want_mod["main"].params, rng)
        want, got = run_module(want_mod, inputs), run_module(got_mod, inputs)
        assert [w.shape for w in want] == [g.shape for g in got]
        assert np.abs(want[0]).max() > 0.1
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_a_dynamic_batch_is_optimized_at_a_stand_in_and_written_back_in_its_symbol(rng):
    mod = dynamic_batch_cnn()
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    out = taso(mod)
    report = taso.report["main"]
    assert report.status == "optimized"
    assert "h-bn-conv" in {a.rule_id for a in report.search.applied}
    assert batch_norm_calls(mod) == 1 and batch_norm_calls(out) == 0
    batch = out["main"].params[0].ty.shape.values[0]
    assert isinstance(batch, tirx.Var) and batch.name == "N"
    assert "N=1" in report.sized and "symbolic sizes" in report.summary()
    agree_at(mod, out, "N", (1, 2, 5), rng)


def test_a_slice_to_n_minus_1_is_written_back_in_n(rng):
    mod = tvm.IRModule({"main": sliced_linear_norm(reshaped=False)["main"]})
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    out = taso(mod)
    assert taso.report["main"].status == "optimized"
    assert batch_norm_calls(out) == 0
    agree_at(mod, out, "n", (2, 3, 6), rng)


def test_a_dynamic_batch_with_an_if_has_its_static_part_optimized_and_written_back():
    """The backbone (a batch norm to fold, two 1x1 convs to sum) then an If on the input's sum, all on (N, ...):
    the static part is optimized at the stand-in and the whole function written back in N."""
    m = Model(4)
    features = static_backbone(m)
    branch = [helper.make_graph([helper.make_node(op, [features, m.const(c, np.float32)], [name])], name, [],
                                [helper.make_tensor_value_info(name, F32, ["N", 8, 6, 6])])
              for op, c, name in (("Add", 1.0, "then"), ("Mul", 2.0, "else"))]
    positive = m.op("Greater", [m.op("ReduceSum", ["x"], keepdims=0), m.const(0.0, np.float32)])
    out = m.op("If", [positive], then_branch=branch[0], else_branch=branch[1])
    mod = import_onnx(m.build([("x", F32, ["N", 3, 6, 6])], [(out, F32, ["N", 8, 6, 6])]))
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    result = taso(mod)
    report = taso.report["main"]
    assert report.status == "optimized" and report.partial and "N=1 and at N=2" in report.sized
    assert {"h-bn-conv", "h-sum-conv-bias"} <= {a.rule_id for a in report.search.applied}
    for k in (1, 3):
        want_mod, got_mod = at(mod["main"], {"N": k}), at(result["main"], {"N": k})
        for sign in (1.0, -1.0):  # each branch
            x = sign * np.abs(np.random.default_rng(k).standard_normal((k, 3, 6, 6))).astype("float32")
            np.testing.assert_allclose(run_module(got_mod, [x])[0], run_module(want_mod, [x])[0], rtol=1e-4,
                                       atol=1e-5)


def test_a_size_binding_folds_is_read_back_as_the_expression_it_was(rng):
    """Bound at the stand-in, the reshape's ((n - 1) * 2, 16) is a number no stand-in's factors spell: it is read
    back as the size the original writes of that value, and the result agrees at other sizes."""
    mod = tvm.IRModule({"main": sliced_linear_norm(reshaped=True)["main"]})
    out, _ = optimized_with_every_rewrite(mod)
    n = out["main"].params[0].ty.shape.values[0]
    rows = out["main"].ret_ty.shape.values[0]
    assert tvm.sym.analyzer.Analyzer().can_prove_equal(rows, (n - 1) * 2)
    agree_at(mod, out, "n", (2, 3, 6), rng)


def kv_cache_linear_norm(features: int = 16):
    """A decoder step's shapes: new tokens x (1, T, features), a cache (1, P, features); the keys are the cache
    and the new tokens' projection concatenated, flattened to (P + T, features) (a size written as a sum of
    symbols, as torch.export writes a KV cache's); and the new tokens' Linear + BatchNorm1d, to fold."""
    rng = np.random.default_rng(6)
    c = lambda *shape: relax.const(rng.standard_normal(shape).astype("float32"))  # noqa: E731
    t, p = tirx.Var("T", "int64"), tirx.Var("P", "int64")
    x = relax.Var("x", relax.TensorType((1, t, features), "float32"))
    past = relax.Var("past", relax.TensorType((1, p, features), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, past]):
        with bb.dataflow():
            keys = bb.emit(relax.op.concat([past, bb.emit(relax.op.matmul(x, c(features, features)))], axis=1))
            keys = bb.emit(relax.op.reshape(keys, relax.ShapeExpr([p + t, features])))
            var = relax.const((np.abs(rng.standard_normal(32)) + 0.5).astype("float32"))
            y = bb.emit(relax.op.nn.batch_norm(bb.emit(relax.op.matmul(x, c(features, 32))), c(32), c(32), c(32), var,
                                               axis=2, training=False))
            out = bb.emit_output(relax.Tuple([bb.emit(relax.TupleGetItem(y, 0)), keys]))
        bb.emit_func_output(out)
    return bb.get()


def test_a_sum_of_two_symbols_is_read_back_as_the_sum(rng):
    """P + T at the stand-ins is a number neither stand-in divides: read back as P + T (not refused, as before
    session 39), and the result agrees with the original at other sizes of both."""
    mod = kv_cache_linear_norm()
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    out = taso(mod)
    report = taso.report["main"]
    assert report.status == "optimized" and "h-bn-matmul3" in {a.rule_id for a in report.search.applied}
    t, p = (param.ty.shape.values[1] for param in out["main"].params)
    keys = out["main"].ret_ty.fields[1].shape.values[0]
    assert tvm.sym.analyzer.Analyzer().can_prove_equal(keys, p + t)
    for sizes in ({"T": 1, "P": 1}, {"T": 2, "P": 5}, {"T": 4, "P": 3}):
        want_mod, got_mod = at(mod["main"], sizes), at(out["main"], sizes)
        inputs = random_inputs(want_mod["main"].params, rng)
        for w, g in zip(run_module(want_mod, inputs), run_module(got_mod, inputs)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def rows_broadcast(rows, in_branch: bool):
    """x (n, 16) times a (16, 32) weight, its mean row broadcast to (rows(n), 32); `in_branch`: in an If's
    branch taken only for inputs above 2, the product itself otherwise."""
    rng = np.random.default_rng(4)
    n = tirx.Var("n", "int64")
    x = relax.Var("x", relax.TensorType((n, 16), "float32"))
    widened = lambda y: relax.op.broadcast_to(relax.op.mean(y, axis=[0], keepdims=True),  # noqa: E731
                                              relax.ShapeExpr([rows(n), 32]))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = relax.op.matmul(x, relax.const(rng.standard_normal((16, 32)).astype("float32")))
            out = bb.emit_output(y if in_branch else widened(bb.emit(y)))
        if in_branch:
            cond = bb.emit(relax.op.greater(relax.op.max(x), relax.const(2.0, "float32")))
            out = bb.emit(relax.If(cond, widened(out), out))
        bb.emit_func_output(out)
    return bb.get()


def test_a_size_that_binding_folds_to_one_is_refused_before_the_search():
    """(n + 999) // 1000 blocks are 1 at any stand-in tried (primes from 5 on; (n + 15) // 16 is 2 at 17, taken): a
    number that says nothing of n, so the function is not searched at all, and the refusal says how to pin the
    sizes."""
    mod = rows_broadcast(lambda n: (n + 999) // 1000, in_branch=False)
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    with pytest.warns(UserWarning, match=r"BindSymbolicVars\(\{'n': 1\}\)"):
        out = taso(mod)
    report = taso.report["main"]
    assert report.status == "unchanged" and report.search is None
    assert any("is written 1" in note for note in report.notes), report.notes
    tvm.ir.assert_structural_equal(out["main"], mod["main"])


def test_a_folded_size_in_a_branch_the_checks_would_not_take_is_read_back(run_module):
    """An If whose branch (taken only for inputs above 2, which random inputs never are) writes ((n - 1) * 2, 32):
    the runs at other sizes would not see a wrong size there, so every written size must be read back (here it
    is: the expression of that value) before the search; the branch then computes at n = 4 what it did."""
    mod = rows_broadcast(lambda n: (n - 1) * 2, in_branch=True)
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    out = taso(mod)
    report = taso.report["main"]
    assert "read and searched at n=" in report.sized and not any("is written" in note for note in report.notes)
    big = np.full((4, 16), 3.0, "float32")  # the branch, at n = 4: ((4 - 1) * 2, 32)
    want, got = (run_module(at(m["main"], {"n": 4}), [big])[0] for m in (mod, out))
    assert got.shape == (6, 32)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_form_in_the_symbols_that_differs_elsewhere_is_rejected_with_the_hint(monkeypatch):
    """Where the runs at other sizes disagree, the function is kept as given and the report says rejected by
    sizes, with nothing of the refused rewrite left in it."""
    def differs(*args, **kwargs):
        raise symbolic_sizes.NotGeneral("at N=1 it computes other values than the original")

    monkeypatch.setattr(symbolic_sizes, "checked_elsewhere", differs)
    mod = dynamic_batch_cnn()
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    with pytest.warns(UserWarning, match="form in the symbols was not kept: at N=1 it computes other values") as w:
        out = taso(mod)
    assert any("BindSymbolicVars({'N': 1})" in str(m.message) for m in w)
    report = taso.report["main"]
    assert (report.status, report.rejected_by, report.kept) == ("rejected", "sizes", "")
    assert report.ops_after == report.ops_before and report.rewrites == []
    tvm.ir.assert_structural_equal(out["main"], mod["main"])


def test_two_symbols_swapped_are_caught_by_the_runs_at_other_sizes():
    """(N, S) reshaped to (N, S) where the original reshapes to (S, N): equal while N == S, so the second check
    size gives each symbol its own."""
    n, s = tirx.Var("N", "int64"), tirx.Var("S", "int64")
    x = relax.Var("x", relax.TensorType((n, s), "float32"))

    def reshaped(shape):
        bb = relax.BlockBuilder()
        with bb.function("main", [x]):
            with bb.dataflow():
                out = bb.emit_output(relax.op.reshape(x, relax.ShapeExpr(shape)))
            bb.emit_func_output(out)
        return bb.get()["main"]

    original, swapped = reshaped([s, n]), reshaped([n, s])
    values = symbolic_sizes.stand_ins(original, symbolic_sizes.symbols(original))
    with pytest.raises(symbolic_sizes.NotGeneral, match="at N=2, S=3 it computes other values"):
        symbolic_sizes.checked_elsewhere(swapped, original, None, "main", values, None, np.array_equal, 0)


def test_stand_ins_divide_no_number_the_function_writes_and_read_back_as_products():
    n, m = tirx.Var("n", "int64"), tirx.Var("m", "int64")
    x = relax.Var("x", relax.TensorType((n, m, 35), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.matmul(x, relax.const(np.ones((35, 14), "float32"))))
            out = bb.emit_output(relax.op.reshape(y, relax.ShapeExpr([n * m, 14])))
        bb.emit_func_output(out)
    func = bb.get()["main"]
    syms = symbolic_sizes.symbols(func)
    values = symbolic_sizes.stand_ins(func, syms)
    assert sorted(values.values()) == [11, 13]  # 5 and 7 divide 35 and 14
    bound = func.bind_symbolic_vars(values)
    general = symbolic_sizes.generalize(bound, func, values)
    tvm.ir.assert_structural_equal(general, func, map_free_vars=True)


def test_a_constant_computed_ahead_at_the_stand_in_batch_is_not_written_back():
    """A weight broadcast over the batch and added (a position table expanded to (B, N, C)): bound at the
    stand-in, the pass computes it ahead as a constant of the stand-in's batch, which no symbol can stand for."""
    rng = np.random.default_rng(5)
    n = tirx.Var("n", "int64")
    x = relax.Var("x", relax.TensorType((n, 6, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            table = bb.emit(relax.op.broadcast_to(relax.const(rng.standard_normal((6, 16)).astype("float32")),
                                                  relax.ShapeExpr([n, 6, 16])))
            var = relax.const((np.abs(rng.standard_normal(16)) + 0.5).astype("float32"))
            c = lambda: relax.const(rng.standard_normal(16).astype("float32"))  # noqa: E731
            out = bb.emit_output(relax.TupleGetItem(bb.emit(relax.op.nn.batch_norm(
                bb.emit(relax.op.matmul(x, relax.const(rng.standard_normal((8, 16)).astype("float32")))),
                c(), c(), c(), var, axis=2, training=False)), 0) + table)
        bb.emit_func_output(out)
    mod = bb.get()
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    with pytest.warns(UserWarning, match=r"a constant of shape \(\d+, 6, 16\) holds a stand-in size"):
        out = taso(mod)
    assert (taso.report["main"].status, taso.report["main"].rejected_by) == ("rejected", "sizes")
    tvm.ir.assert_structural_equal(out["main"], mod["main"])


def test_dynamic_height_and_width_under_unpadded_convs_are_checked_above_the_stand_ins(rng):
    """Two unpadded 3x3 convs need an image of at least 5x5: the original runs at neither 1 nor 2, 3, so the
    written-back function is checked just above the stand-ins instead, and kept."""
    gen = np.random.default_rng(4)
    c = lambda *shape: relax.const(gen.standard_normal(shape).astype("float32"))  # noqa: E731
    h, w = tirx.Var("H", "int64"), tirx.Var("W", "int64")
    x = relax.Var("x", relax.TensorType((1, 3, h, w), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, c(8, 3, 3, 3)))
            var = relax.const((np.abs(gen.standard_normal(8)) + 0.5).astype("float32"))
            y = bb.emit(relax.TupleGetItem(bb.emit(relax.op.nn.batch_norm(y, c(8), c(8), c(8), var, axis=1,
                                                                          training=False)), 0))
            out = bb.emit_output(relax.op.nn.conv2d(bb.emit(relax.op.nn.relu(y)), c(8, 8, 3, 3)))
        bb.emit_func_output(out)
    mod = bb.get()
    out, report = optimized_with_every_rewrite(mod)
    values = symbolic_sizes.stand_ins(mod["main"], symbolic_sizes.symbols(mod["main"]))
    above = {v: p + 1 + i for i, (v, p) in enumerate(values.items())}
    assert report.sized.endswith(f"at {symbolic_sizes.shown_sizes(above)} too"), report.sized
    for hw in ((6, 9), (8, 5)):
        inputs = [rng.standard_normal((1, 3, *hw)).astype("float32")]
        want = run_module(at(mod["main"], {"H": hw[0], "W": hw[1]}), inputs)[0]
        got = run_module(at(out["main"], {"H": hw[0], "W": hw[1]}), inputs)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_stand_ins_are_picked_so_that_a_sum_of_symbols_is_no_number_written():
    """P + T at 5 and 7 is 12, which the function also writes (its 12 features): that pair would leave 12
    ambiguous, so the next primes are taken."""
    func = kv_cache_linear_norm(features=12)["main"]
    t, p = (param.ty.shape.values[1] for param in func.params)
    syms = symbolic_sizes.symbols(func)
    values = symbolic_sizes.stand_ins(func, syms)
    assert sorted(values.values()) != [5, 7] and sum(values.values()) != 12
    compounds = symbolic_sizes.compound_sizes(func, values)
    assert [str(e) for e in compounds.values()] == [str(p + t)]
    bound, refusal = symbolic_sizes.bound_at(func, values)
    assert refusal is None and bound is not None


def test_stand_ins_are_picked_so_that_no_size_of_the_symbol_is_1():
    """(n + 15) // 16 blocks is 1 at 5, 7, 11 and 13, and 2 at 17: 17 stands in, and the function is searched."""
    func = rows_broadcast(lambda n: (n + 15) // 16, in_branch=False)["main"]
    values = symbolic_sizes.stand_ins(func, symbolic_sizes.symbols(func))
    assert list(values.values()) == [17]
    assert symbolic_sizes.bound_at(func, values)[1] is None


def test_a_reshape_read_back_must_keep_its_element_count():
    """(1, 8, l) reshaped to (1, 8, 1), a length 1 at the stand-ins written back as 1, is refused; to (8, l), or a
    last-step slice's length (min(INT64_MAX, l) - min(max(l - 1, 0), l), which is 1) to nothing, is not."""
    length, batch = tirx.Var("l", "int64"), tirx.Var("b", "int64")
    data = relax.Var("y", relax.TensorType((1, 8, length), "float32"))
    with pytest.raises(symbolic_sizes.NotGeneral, match="need not hold as many elements"):
        symbolic_sizes._same_size(data, relax.ShapeExpr([1, 8, 1]))
    symbolic_sizes._same_size(data, relax.ShapeExpr([8, length]))
    i64 = lambda n: tirx.IntImm("int64", n)  # noqa: E731
    last = tirx.min(i64(2 ** 63 - 1), length) - tirx.min(tirx.max(length - 1, i64(0)), length)
    symbolic_sizes._same_size(relax.Var("z", relax.TensorType((batch, 32, last), "float32")),
                              relax.ShapeExpr([batch, 32]))


def test_a_transposed_conv_of_dynamic_height_runs_as_a_subpixel_conv_written_back_in_it(rng):
    """h-convT-subpixel's pixel shuffle is a rank-6 transpose, whose axes (5 among them) are not sizes though the
    stand-in for H is 5: the rewrite is kept, written in H, and agrees at other heights."""
    m = Model(8)
    y = m.op("ConvTranspose", ["x", m.weight((64, 32, 4, 4))], kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1])
    mod = import_onnx(m.build([("x", F32, [1, 64, "H", 16])], [(y, F32, [1, 32, "H2", 32])]))
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    out = taso(mod)
    report = taso.report["main"]
    assert report.status == "optimized", report.warnings
    assert [a.rule_id for a in report.search.applied] == ["h-convT-subpixel"]
    agree_at(mod, out, "H", (1, 2, 6), rng)


def test_a_reshape_whose_sizes_multiply_out_equal_is_written_back_in_the_symbols():
    """(2 * W - 1) * 2 elements against 4 * W - 2: equal once multiplied out, which TVM's analyzer does not do (a
    cropped sub-pixel conv's rows feeding the next one's shuffle); one element more is still refused."""
    n, h, w = (tirx.Var(name, "int64") for name in "NHW")
    x = relax.Var("x", relax.TensorType((n, 8, h * 2, 3, w * 2 - 1, 2), "float32"))
    symbolic_sizes._same_size(x, relax.ShapeExpr([n, 8, h * 6, w * 4 - 2]))
    with pytest.raises(symbolic_sizes.NotGeneral):
        symbolic_sizes._same_size(x, relax.ShapeExpr([n, 8, h * 6, w * 4 - 1]))


def test_a_height_the_function_halves_stands_in_even(rng):
    """A SpaceToDepth (Restormer's pixel unshuffle) reshapes H into (H // 2, 2): at an odd prime the function does
    not type-check. H and W stand in as a prime times 2 and are checked at even sizes; the batch norm after the conv
    folds, written back in H // 2 and W // 2."""
    m = Model(9)
    y = m.bn(m.conv(m.op("SpaceToDepth", ["x"], blocksize=2), 12, 8, 3, pads=[1, 1, 1, 1]), 8)
    mod = import_onnx(m.build([("x", F32, ["N", 3, "H", "W"])], [(y, F32, ["N", 8, "H2", "W2"])]))
    assert symbolic_sizes.divisors(mod["main"]) == {"H": 2, "W": 2}
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    out = taso(mod)
    report = taso.report["main"]
    assert report.status == "optimized", report.warnings
    assert [a.rule_id for a in report.search.applied][:1] == ["h-bn-conv"] and batch_norm_calls(out) == 0
    stand_ins = dict(s.split("=") for s in report.sized.split(" (stand-ins)")[0].split("at ")[1].split(", "))
    assert int(stand_ins["H"]) % 2 == 0 and int(stand_ins["W"]) % 2 == 0 and int(stand_ins["N"]) % 2 == 1
    for h, w in ((2, 4), (6, 2)):
        want_mod, got_mod = (at(f["main"], {"N": 2, "H": h, "W": w}) for f in (mod, out))
        inputs = random_inputs(want_mod["main"].params, rng)
        np.testing.assert_allclose(run_module(got_mod, inputs)[0], run_module(want_mod, inputs)[0], rtol=1e-4,
                                   atol=1e-5)


def test_a_symbol_the_function_halves_is_known_even_where_a_reshape_is_written_back():
    """(N, 3, H, W) into (N, 3, H // 2, 2, W // 2, 2) holds as many elements only where H and W are even."""
    n, h, w = (tirx.Var(name, "int64") for name in "NHW")
    x = relax.Var("x", relax.TensorType((n, 3, h, w), "float32"))
    split = relax.ShapeExpr([n, 3, h // 2, 2, w // 2, 2])
    symbolic_sizes._same_size(x, split, {"H": 2, "W": 2})
    for steps in ({}, {"H": 2}):
        with pytest.raises(symbolic_sizes.NotGeneral):
            symbolic_sizes._same_size(x, split, steps)


def test_a_symbol_stands_in_at_a_multiple_of_its_divisor_only_where_asked():
    """The top half of the rows (a slice to H // 2): it type-checks at odd sizes, so its stand-ins stay primes
    unless a refusal at them asks for multiples (TASOPass asks only then). Refused at the primes for another reason
    (the slice's end folds to a number), the refusal reported is the one at the primes."""
    n, h = tirx.Var("n", "int64"), tirx.Var("h", "int64")
    x = relax.Var("x", relax.TensorType((n, 3, h, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(relax.op.strided_slice(x, axes=[2], begin=[0], end=[h // 2])))
        bb.emit_func_output(out)
    func = bb.get()["main"]
    syms = symbolic_sizes.symbols(func)
    steps = symbolic_sizes.divisors(func)
    assert steps == {"h": 2}
    plain, stepped = symbolic_sizes.stand_ins(func, syms), symbolic_sizes.stand_ins(func, syms, steps)
    assert [int(v) % 2 for v in plain.values()] == [1, 1] and [int(v) % 2 for v in stepped.values()] == [1, 0]
    both = symbolic_sizes.check_sizes(stepped, steps)  # the plain sizes first, then in steps of 2 for h
    assert both[:3] == symbolic_sizes.check_sizes(stepped) and len(both) == 6
    assert all(int(k) % 2 == 0 for sizes in both[3:] for v, k in sizes.items() if v.name == "h")
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    taso(tvm.IRModule({"main": func}))
    assert any(f"{symbolic_sizes.shown_sizes(plain)})" in w for w in taso.report["main"].warnings)
