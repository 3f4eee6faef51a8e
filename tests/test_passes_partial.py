"""A function the graph form cannot take whole (an If, NonZero's shape) has its static part optimized."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
from onnx import helper

sys.path.insert(0, str(Path(__file__).parent / "bridge"))
from bridge_onnx_models import F32, Model, import_onnx, with_if, with_nonzero  # noqa: E402

from taso_relay.bridge import symbolic_sizes  # noqa: E402
from taso_relay.bridge.static_part import split_static_part  # noqa: E402
from taso_relay.passes import TASOPass  # noqa: E402


@pytest.mark.parametrize("model, refused", [(with_nonzero, "match_cast"), (with_if, "control flow")],
                         ids=["nonzero", "if"])
def test_the_static_part_is_optimized_and_the_rest_kept(model, refused, run_module):
    mod = import_onnx(model())
    taso = TASOPass(verify_speed=False)
    out = taso(mod)
    report = taso.report["main"]
    assert report.status == "optimized" and report.partial, report.summary()
    assert report.ops_before["batch_norm"] == 1 and "batch_norm" not in report.ops_after
    assert report.ops_before["conv2d"] == 3 and report.ops_after["conv2d"] == 2  # the 1x1 convs summed
    assert any("optimized in its static part" in n and refused in n for n in report.notes), report.notes
    assert not report.warnings and "static part:" in report.summary()
    tvm.relax.analysis.well_formed(out)
    rng = np.random.default_rng(0)
    for sign in (1.0, -1.0):  # both branches of the If
        x = (np.abs(rng.standard_normal((1, 3, 6, 6))) * sign).astype(np.float32)
        want, got = run_module(mod, [x]), run_module(out, [x])
        assert len(want) == len(got)
        for w, g in zip(want, got):
            if w.dtype == np.int64:  # the positions: the same, as no feature sits at the threshold
                np.testing.assert_array_equal(g, w)
            else:
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * float(np.abs(w).max()))


def test_a_static_part_with_nothing_to_rewrite_leaves_the_function_and_its_warning():
    """An If right on the input: its static part (the condition) has no rewrite; the function is returned as
    given, and the refusal stands as a warning."""
    m = Model(5)
    then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", F32, [2, 3])])
    else_g = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", F32, [2, 3])])
    cond = m.op("Greater", [m.op("ReduceSum", ["x"], keepdims=0), m.const(0.0, np.float32)])
    out = m.op("If", [cond], then_branch=then_g, else_branch=else_g)
    mod = import_onnx(m.build([("x", F32, [2, 3])], [(out, F32, [2, 3])]))
    assert split_static_part(mod["main"]).sizes == (2, 3)  # the sum and the comparison; the If
    taso = TASOPass(verify_speed=False)
    with pytest.warns(UserWarning, match="unchanged: control flow"):
        result = taso(mod)
    report = taso.report["main"]
    assert result["main"].same_as(mod["main"]) and report.status == "unchanged" and not report.partial
    assert report.graph_after is None and not report.ops_before  # the part's figures are not the function's
    assert "not read as a graph" in report.summary() and any("static part" in n for n in report.notes)


def test_nothing_moves_past_a_call_with_effects():
    """An impure function (a packed call that may write its argument, then work on that argument): no static
    part is taken out, so nothing is computed before the call, and the pass leaves the function."""
    from tvm.script import relax as R

    @tvm.script.ir_module
    class Impure:
        @R.function(pure=False)
        def main(x: R.Tensor((1, 3, 6, 6), "float32"), w: R.Tensor((4, 3, 3, 3), "float32")):
            _ = R.call_packed("test.fill", x, sinfo_args=R.Tuple())
            y = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])
            z = R.nn.relu(y)
            u = R.add(z, z)
            return u

    assert split_static_part(Impure["main"]) is None
    with pytest.warns(UserWarning, match="unchanged"):
        assert TASOPass(verify_speed=False)(Impure)["main"].same_as(Impure["main"])


def test_the_speed_check_compiles_and_compares_the_static_part_alone():
    """The static part is built, run and compared in its function's place, against itself as given (not
    against the whole function, whose outputs differ in number and kind)."""
    mod = import_onnx(with_nonzero())
    taso = TASOPass(verify_speed=True, speed_budget=1.0)
    taso(mod)
    report = taso.report["main"]
    assert report.partial and report.speed_tried, report.summary()
    check = report.speed_tried[0]
    assert check.builds == (True, True) and check.same_outputs is True, check.to_text()


def test_a_part_computed_from_weights_alone_is_left_to_fold_constant(monkeypatch):
    """A dynamic batch (no graph form, where stand-in sizes are not tried): what does not depend on the input
    is its weights' reshapes, which FoldConstant computes; no part is taken out and the function is left with
    its hint."""
    monkeypatch.setattr(symbolic_sizes, "symbols", lambda func: None)
    m = Model(6)
    y = m.op("Conv", ["x", m.weight((8, 3, 3, 3)), m.weight((8,))], pads=[1, 1, 1, 1])
    y = m.op("Conv", [m.op("Relu", [y]), m.weight((8, 8, 1, 1)), m.weight((8,))])
    mod = import_onnx(m.build([("x", F32, ["N", 3, 6, 6])], [(y, F32, ["N", 8, 6, 6])]))
    reshapes = [b for b in mod["main"].body.blocks[0].bindings if "reshape" in str(b.value)]
    assert len(reshapes) == 2  # the biases: static, of weights alone
    assert split_static_part(mod["main"]) is None
    taso = TASOPass(verify_speed=False)
    with pytest.warns(UserWarning, match="symbolic dimension"):
        assert taso(mod)["main"].same_as(mod["main"])
    assert not taso.report["main"].notes and not taso.report["main"].partial



def test_a_call_of_another_function_stops_the_part_and_nothing_after_it_moves():
    """A call the part cannot see into (another function of the module) keeps its place, and so does
    everything after it, even what does not read it (`g`): only `a` and `b` before it are the part."""
    from tvm.script import relax as R

    @tvm.script.ir_module
    class Calls:
        @R.function
        def helper(x: R.Tensor((1, 3, 6, 6), "float32")) -> R.Tensor((1, 3, 6, 6), "float32"):
            return x

        @R.function
        def main(x: R.Tensor((1, 3, 6, 6), "float32")) -> R.Tensor((1, 3, 6, 6), "float32"):
            cls = Calls
            a = R.nn.relu(x)
            b = R.add(a, a)
            c = cls.helper(b)
            g = R.nn.relu(x)
            d = R.add(c, g)
            return d

    part = split_static_part(Calls["main"])
    assert part is not None and sorted(v.name for v in part.static) == ["a", "b"]
    assert [v.name for v in part.reads] == ["b"]


def test_a_call_that_writes_its_argument_stops_the_part():
    """call_tir_inplace is pure to Relax but writes `b`'s buffer: it and everything after it keep their place."""
    from tvm.script import relax as R
    from tvm.script import tirx as T

    @tvm.script.ir_module
    class InPlace:
        @T.prim_func(private=True)
        def double(x: T.Buffer((1, 3, 6, 6), "float32")):
            for i, j, k, m in T.grid(1, 3, 6, 6):
                x[i, j, k, m] = x[i, j, k, m] * T.float32(2)

        @R.function
        def main(x: R.Tensor((1, 3, 6, 6), "float32")) -> R.Tensor((1, 3, 6, 6), "float32"):
            cls = InPlace
            a = R.nn.relu(x)
            b = R.add(a, a)
            c = R.call_tir_inplace(cls.double, (b,), inplace_indices=[0], out_ty=R.Tensor((1, 3, 6, 6), "float32"))
            g = R.nn.relu(x)
            d = R.add(c, g)
            return d

    assert InPlace["main"].is_pure
    part = split_static_part(InPlace["main"])
    assert part is not None and sorted(v.name for v in part.static) == ["a", "b"]
    assert [v.name for v in part.reads] == ["b"]
