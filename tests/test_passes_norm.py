"""TASOPass with the shipped rules folds conv + batch norm the way TVM's FoldBatchnormToConv2D does."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm import relax

from taso_relay.graph import GraphBuilder
from taso_relay.passes import TASOPass

sys.path.insert(0, str(Path(__file__).parent / "bridge"))
from bridge_onnx_models import F32, Model, import_onnx  # noqa: E402

from taso_relay.bridge.execute import random_inputs  # noqa: E402

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})


def conv_bn_block():
    """conv (with bias, stride 2) -> bn -> relu -> grouped conv -> bn -> + residual -> relu."""
    m = Model(3)
    y = m.op("Conv", ["x", m.weight((8, 4, 3, 3)), m.weight((8,))], pads=[1, 1, 1, 1], strides=[2, 2])
    y = m.op("Relu", [m.bn(y, 8)])
    z = m.bn(m.conv(y, 8, 8, 3, pads=[1, 1, 1, 1], group=2), 8)
    out = m.op("Relu", [m.op("Add", [z, y])])
    return import_onnx(m.build([("x", F32, [1, 4, 12, 12])], [(out, F32, [1, 8, 6, 6])]))


def batch_norm_calls(mod) -> int:
    found = []
    relax.analysis.post_order_visit(mod["main"].body, lambda e: found.append(e) if isinstance(e, relax.Call)
                                    and isinstance(e.op, tvm.ir.Op) and e.op.name == "relax.nn.batch_norm" else None)
    return len(found)


def optimized_with_every_rewrite(mod):
    """TASOPass with every rewrite kept (a small model: the speed check is the benchmarks'): (the result, its
    report), asserting the function was optimized and calls no batch norm any more."""
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    out = taso(mod)
    report = taso.report["main"]
    assert report.status == "optimized" and batch_norm_calls(out) == 0
    return out, report


def computes_the_same(before, after, run_module, rng) -> list:
    """Both modules run on the same random inputs and agree on a first output that is not trivially zero; the
    inputs."""
    inputs = random_inputs(before["main"].params, rng)
    want, got = run_module(before, inputs)[0], run_module(after, inputs)[0]
    assert np.abs(want).max() > 0.1
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    return inputs


def kernels(mod) -> int:
    """PrimFuncs left after TVM's default CPU pipeline (one per fused kernel, folded weights gone)."""
    with TARGET:
        lowered = relax.get_default_pipeline(TARGET)(mod)
    return sum(isinstance(f, tvm.tirx.PrimFunc) for _, f in lowered.functions_items())


@pytest.fixture(scope="module")
def folded():
    mod = conv_bn_block()
    taso = TASOPass(verify_speed=False)  # shipped proven rules, analytic cost, the folds kept unmeasured
    return mod, taso(mod), taso.report["main"]


def test_batch_norms_are_folded_into_the_convs(folded):
    before, after, report = folded
    assert report.status == "optimized"
    # and the residual add of the grouped conv's own input joins that conv as an identity kernel
    assert sorted(a.rule_id for a in report.search.applied) == ["h-bn-conv", "h-bn-conv-bias", "h-sum-conv-identity"]
    assert batch_norm_calls(before) == 2 and batch_norm_calls(after) == 0


def test_folded_weights_leave_no_kernels(folded):
    """conv, bias, bn, relu | conv, bn, add, relu: 4 kernels; folded, each conv absorbs the rest."""
    before, after, _ = folded
    assert kernels(before) == 4 and kernels(after) == 2


def test_folded_module_computes_the_same(folded, run_module, rng):
    before, after, _ = folded
    computes_the_same(before, after, run_module, rng)


def test_lowering_tells_the_cost_model_how_kernels_are_formed():
    """MetaSchedule's pipeline fuses a batch norm into the conv before it; the default one does not."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "bridge"))
    from bridge_onnx_models import MODELS, import_onnx

    from taso_relay.bridge.from_relax import graph_from_function

    graph = graph_from_function(import_onnx(MODELS["resnet_block"]())["main"], "main").graph
    kernels = {}
    for lowering in ("default", "tuning"):
        model = TASOPass(lowering=lowering).cost_model()
        assert model.lowering == lowering
        kernels[lowering] = [k.label for k, _ in model.breakdown(graph)]
    assert kernels["default"] == ["conv2d", "batch_norm+relu", "conv2d", "batch_norm+add+relu"]
    assert kernels["tuning"] == ["conv2d+batch_norm+relu", "conv2d+batch_norm+add+relu"]
    with pytest.raises(ValueError, match="unknown lowering"):
        TASOPass(lowering="fast")


def test_a_lowering_that_contradicts_the_cost_model_is_an_error():
    """A cost model given as an object prices one lowering: a contradicting lowering= used to be
    ignored without a word, and the search then priced kernels the build would not form."""
    from taso_relay.cost import AnalyticCost

    model = AnalyticCost(lowering="tuning")
    assert TASOPass(cost=model).cost_model() is model
    assert TASOPass(cost=model, lowering="tuning").cost_model() is model
    with pytest.raises(ValueError, match="contradicts the cost model"):
        TASOPass(cost=model, lowering="default")
    with pytest.raises(ValueError, match="'tuning' lowering"):
        TASOPass(cost="tuned", lowering="default")
    assert TASOPass(cost="analytic", lowering="tuning").cost_model().lowering == "tuning"
    assert TASOPass().cost_model().lowering == "default"


def test_a_cost_model_without_a_lowering_follows_the_pass(monkeypatch):
    """A callable or a model that does not say which lowering it prices takes the pass's: the
    saturation of merge rules (tuning builds only) and the speed check follow lowering=."""
    from taso_relay import passes
    from taso_relay.search import optimize

    seen = {}

    def spy(graph, rules, cost, **kwargs):
        seen.update(kwargs)
        return graph, optimize(graph, [], cost, time_limit=1)[1]

    monkeypatch.setattr(passes, "optimize", spy)
    graph = GraphBuilder()
    x = graph.input("x", (2, 4))
    g = graph.build([graph.op("relu", x)])
    for lowering, saturates in (("tuning", True), ("default", False)):
        taso = TASOPass(cost=lambda graph: float(len(graph.nodes)), lowering=lowering)
        taso.optimize_graph(g)
        assert seen["saturate_merges"] is saturates
        assert passes._lowering_of(taso.cost_model(), taso.lowering)[0] == lowering


def float16_conv_bn_concat_bn():
    """(float32 model, its float16 import): conv + batch norm + relu, concatenated with the input, batch norm."""
    from bridge_onnx_models import as_float16

    m = Model(5)
    y = m.op("Relu", [m.bn(m.conv("x", 4, 8, 3, pads=[1, 1, 1, 1]), 8)])
    out = m.bn(m.op("Concat", [y, "x"], axis=1), 12)
    model = m.build([("x", F32, [1, 4, 8, 8])], [(out, F32, [1, 12, 8, 8])])
    return model, import_onnx(as_float16(model))


def assert_computes_the_float32_original(model, out16, run_module, rng):
    mod32 = import_onnx(model)
    inputs = random_inputs(mod32["main"].params, rng)
    want = run_module(mod32, inputs)[0]
    got = run_module(out16, [x.astype(np.float16) for x in inputs])[0].astype(np.float64)
    assert np.abs(got - want).max() <= 1e-2 * float(np.abs(want).max())


def against_reemission_then(monkeypatch, change):
    """The speed check against the re-emission, really built, run and compared, then `change`d."""
    from taso_relay.passes import TASOOptimizer

    real = TASOOptimizer._against_reemitted

    def against(*args):
        check = real(*args)
        if check is not None:
            change(check)
        return check

    monkeypatch.setattr(TASOOptimizer, "_against_reemitted", staticmethod(against))


def timed_against_reemission(monkeypatch, before, after):
    """... with these round times."""
    import statistics

    def times(check):
        check.before_rounds, check.after_rounds = list(before), list(after)
        check.before_s, check.after_s = statistics.median(before), statistics.median(after)

    against_reemission_then(monkeypatch, times)


def reemission_disagrees(monkeypatch):
    """... as if the re-emission computed otherwise than the rewrite."""
    against_reemission_then(monkeypatch, lambda check: setattr(check, "same_outputs", False))


def test_a_float16_batch_norm_left_unfolded_is_emitted_as_arithmetic_that_builds(run_module, rng, monkeypatch):
    """TVM 0.27's default pipeline cannot build a float16 batch_norm (it legalizes to a float32 result): the
    pass folds the one after the conv and emits the one after the concat as arithmetic, so its result builds
    where the original does not. The speed check times and compares it against the original re-emitted from
    its graph (which builds): here made to find it faster."""
    timed_against_reemission(monkeypatch, before=[10, 10, 10], after=[9, 9, 9])
    model, mod16 = float16_conv_bn_concat_bn()
    taso = TASOPass(verify_speed=True, speed_budget=0.05, min_gain=0.0)  # a fold this small is priced at ~0%
    with pytest.warns(UserWarning, match="TVM cannot build the original function.*the rewritten one builds, "
                                         "computes what the original re-emitted from its graph does, and ran at "
                                         "least as fast"):
        out16 = taso(mod16)
    report = taso.report["main"]
    assert report.status == "optimized" and report.speed.builds == (True, True) and report.speed.same_outputs
    assert report.speed.baseline == "re-emitted" and report.speed.measured
    assert "original re-emitted" in report.speed.to_text()
    assert report.ops_after["batch_norm"] == 1 and batch_norm_calls(out16) == 0  # emitted as arithmetic
    assert_computes_the_float32_original(model, out16, run_module, rng)


def test_a_rewrite_slower_than_the_reemitted_original_returns_the_reemission(run_module, rng, monkeypatch):
    """The same float16 model with the rewrite measured slower: the original as given does not build with TVM's
    default pipeline, its re-emission does and is faster, so that is what the pass returns (and says so)."""
    timed_against_reemission(monkeypatch, before=[9, 9, 9], after=[10, 10, 10])
    model, mod16 = float16_conv_bn_concat_bn()
    taso = TASOPass(verify_speed=True, speed_budget=0.05, min_gain=0.0)
    with pytest.warns(UserWarning, match="TVM cannot build the original function.*returned 'main' re-emitted from "
                                         "its graph, which builds, computes what the rewrite does and ran faster "
                                         ".no rewrite: search: ran slower than the original re-emitted"):
        out16 = taso(mod16)
    report = taso.report["main"]
    assert report.status == "re-emitted" and report.rewrites == [] and report.rejected_by == "speed"
    assert report.graph_after is report.graph_before and report.cost_after == report.cost_before
    assert report.speed.baseline == "re-emitted" and not report.speed.kept
    assert batch_norm_calls(out16) == 0 and batch_norm_calls(mod16) == 2  # both emitted as arithmetic
    assert "conv2d" in report.ops_after and report.ops_after == report.ops_before
    from taso_relay.commands.report import changed

    assert changed(taso.report)  # the module differs from what was given: it builds now
    assert_computes_the_float32_original(model, out16, run_module, rng)


def float16_concat_bn():
    from bridge_onnx_models import as_float16

    m = Model(6)
    cat = m.op("Concat", [m.op("Relu", ["x"]), "x"], axis=1)
    out = m.op("Add", [m.bn(cat, 8), cat])  # a binary op refuses the float32 result TVM gives the batch norm
    model = m.build([("x", F32, [1, 4, 8, 8])], [(out, F32, [1, 8, 8, 8])])
    return model, import_onnx(as_float16(model))


def test_a_float16_function_without_rewrites_tvm_cannot_build_is_returned_reemitted(run_module, rng):
    """Nothing for the rules (a batch norm after a concat), and TVM's default pipeline cannot build the function
    as imported: its re-emission builds and computes what the original graph does, so the pass returns it."""
    model, mod16 = float16_concat_bn()
    taso = TASOPass(verify_speed=True, speed_budget=0.05)
    with pytest.warns(UserWarning, match=r"TVM cannot build the original function.*returned 'main' re-emitted from "
                                         r"its graph, which builds and computes what the original graph does "
                                         r"\(no rewrite: none found\)"):
        out16 = taso(mod16)
    report = taso.report["main"]
    assert report.status == "re-emitted" and report.rewrites == [] and report.speed_tried == [report.speed]
    assert report.speed.candidate == "re-emission" and report.speed.kept and report.speed.builds == (False, True)
    assert report.speed.same_outputs is True and "returned the re-emission" in report.summary()
    assert batch_norm_calls(out16) == 0 and batch_norm_calls(mod16) == 1
    assert_computes_the_float32_original(model, out16, run_module, rng)


def never_built(monkeypatch):
    from taso_relay.cost import lowering

    monkeypatch.setattr(lowering, "compile_module", lambda *args, **kwargs: pytest.fail("built"))


def test_without_the_speed_check_nothing_is_built_and_the_function_is_returned_as_given(monkeypatch):
    never_built(monkeypatch)
    _, mod16 = float16_concat_bn()
    taso = TASOPass(verify_speed=False)
    out = taso(mod16)
    assert taso.report["main"].status == "unchanged"
    tvm.ir.assert_structural_equal(out, mod16)


def test_a_float32_function_without_rewrites_is_not_built(monkeypatch):
    """Only a float16 batch norm makes the re-emission differ in what TVM builds: nothing else is probed."""
    never_built(monkeypatch)
    model, _ = float16_concat_bn()
    mod32 = import_onnx(model)
    taso = TASOPass(verify_speed=True, speed_budget=0.05)
    out = taso(mod32)
    assert taso.report["main"].status == "unchanged"
    tvm.ir.assert_structural_equal(out, mod32)


def test_a_float16_inception_block_is_compared_against_its_reemission():
    """The bundled Inception block in float16: TVM's default pipeline cannot build it as imported; the rewrite
    is compared and timed against the original re-emitted from its graph, compiled by TVM both."""
    import onnx

    from bridge_onnx_models import as_float16

    model = onnx.load(str(Path(__file__).parent.parent / "examples" / "inception_block.onnx"))
    taso = TASOPass(verify_speed=True, speed_budget=0.05)
    with pytest.warns(UserWarning, match="TVM cannot build"):
        taso(import_onnx(as_float16(model)))
    report = taso.report["main"]
    assert report.status in ("optimized", "re-emitted")  # which, the timing decides
    assert report.speed.builds == (True, True) and report.speed.baseline == "re-emitted"
    assert report.speed.same_outputs is True and report.speed.measured


def test_where_the_interpreter_cannot_run_the_original_the_warning_says_its_outputs_were_not_compared(monkeypatch):
    """Where the re-emission does not build either (made so here), the rewrite that builds is kept on the
    graph-level check: the Inception block's top-k is opaque to the numpy interpreter."""
    import onnx

    from bridge_onnx_models import as_float16

    from taso_relay.passes import TASOOptimizer

    monkeypatch.setattr(TASOOptimizer, "_against_reemitted", staticmethod(lambda *args: None))
    model = onnx.load(str(Path(__file__).parent.parent / "examples" / "inception_block.onnx"))
    taso = TASOPass(verify_speed=True, speed_budget=0.05)
    with pytest.warns(UserWarning, match=r"the rewritten one builds \(its outputs not compared"):
        taso(import_onnx(as_float16(model)))
    report = taso.report["main"]
    assert report.status == "optimized" and report.speed.builds == (False, True)
    assert report.speed.same_outputs is None and report.check.startswith("region: equal")


def test_where_the_rewrite_and_the_reemission_disagree_the_original_graph_decides(monkeypatch):
    """Which of two compiled functions that differ is wrong, neither says: the rewrite is then compared with
    the numpy interpreter's run of the original graph (here it agrees: kept, untimed, with a warning)."""
    reemission_disagrees(monkeypatch)
    _, mod16 = float16_conv_bn_concat_bn()
    taso = TASOPass(verify_speed=True, speed_budget=0.05, min_gain=0.0)
    with pytest.warns(UserWarning, match="the rewritten one builds and computes what the original graph does"):
        taso(mod16)
    report = taso.report["main"]
    assert report.status == "optimized" and report.speed.builds == (False, True) and not report.speed.baseline
    assert report.speed.same_outputs is True and not report.speed.measured


def test_a_reemission_that_cannot_be_compared_is_not_returned(monkeypatch):
    """No rewrite, TVM cannot build the function as given, and the numpy interpreter cannot run its graph
    (made so here): the re-emission is not returned unchecked; the warning says why."""
    from taso_relay import passes

    monkeypatch.setattr(passes, "_reference", lambda graph, signature: (lambda arrays: None))
    _, mod16 = float16_concat_bn()
    taso = TASOPass(verify_speed=True, speed_budget=0.05)
    with pytest.warns(UserWarning, match="its re-emission from its graph builds but could not be compared"):
        out = taso(mod16)
    report = taso.report["main"]
    assert report.status == "unchanged" and report.speed.candidate == "re-emission" and not report.speed.kept
    assert "kept the original" in report.speed.to_text()
    tvm.ir.assert_structural_equal(out, mod16)


def test_where_they_disagree_and_the_interpreter_cannot_say_the_rewrite_is_refused(monkeypatch):
    from taso_relay import passes

    reemission_disagrees(monkeypatch)
    monkeypatch.setattr(passes, "_reference", lambda graph, signature: (lambda arrays: None))
    _, mod16 = float16_conv_bn_concat_bn()
    taso = TASOPass(verify_speed=True, speed_budget=0.05, min_gain=0.0)
    with pytest.warns(UserWarning, match="computes different results when compiled"):
        out = taso(mod16)
    report = taso.report["main"]
    assert report.status == "rejected" and report.refused[0][:2] == ("search", "numeric")
    assert report.speed_tried[0].baseline == "re-emitted" and report.speed_tried[0].same_outputs is False
    tvm.ir.assert_structural_equal(out, mod16)


def test_a_wrong_rewrite_refused_by_numpy_leaves_the_checked_reemission(monkeypatch, run_module, rng):
    """check=False lets a wrong rewrite (relu as sigmoid) reach the speed check: it disagrees with the
    re-emission, numpy finds the rewrite wrong, and the re-emission, then checked against numpy itself, is
    returned (the function as given does not build)."""
    from test_passes import replace_op

    from taso_relay.passes import TASOOptimizer

    monkeypatch.setattr(TASOOptimizer, "optimize_graph", lambda self, g, report=None: replace_op(g, "relu", "sigmoid"))
    model, mod16 = float16_concat_bn()
    taso = TASOPass(verify_speed=True, speed_budget=0.05, check=False)
    with pytest.warns(UserWarning, match=r"returned 'main' re-emitted from its graph, which builds and computes what "
                                         r"the original graph does \(no rewrite: search: computes different results"):
        out16 = taso(mod16)
    report = taso.report["main"]
    assert report.status == "re-emitted" and report.refused[0][:2] == ("search", "numeric")
    assert [c.candidate for c in report.speed_tried] == ["search", "re-emission"]
    assert_computes_the_float32_original(model, out16, run_module, rng)


def standardized_conv_bn():
    """conv2d whose kernel is standardized in the graph (instance_norm over each kernel's values, as
    torch.export writes NF-ResNet's weight standardization), then a batch norm."""
    op = relax.op
    rng = np.random.default_rng(5)
    const = lambda *shape, low=-1.0: relax.const(rng.uniform(low, 1.0, size=shape).astype("float32"))  # noqa: E731
    x = relax.Var("x", relax.TensorType((1, 4, 8, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            flat = bb.emit(op.reshape(const(6, 4, 3, 3), (1, 6, 36)))
            std = bb.emit(op.nn.instance_norm(flat, const(6, low=0.5), const(6), channel_axis=1, axes=[2]))
            conv = bb.emit(op.nn.conv2d(x, bb.emit(op.reshape(std, (6, 4, 3, 3))), padding=1))
            bn = bb.emit(op.nn.batch_norm(conv, const(6, low=0.5), const(6), const(6), const(6, low=0.5), axis=1,
                                          training=False))
            out = bb.emit_output(relax.TupleGetItem(bn, 0))
        bb.emit_func_output(out)
    return bb.get()


def test_a_kernel_computed_by_an_opaque_call_is_folded_first_and_its_batch_norm_then_folds(run_module, rng):
    mod = standardized_conv_bn()
    taso = TASOPass(verify_speed=False)
    out = taso(mod)
    report = taso.report["main"]
    assert report.status == "optimized" and "weight-only" in report.folded
    assert [a.rule_id for a in report.search.applied] == ["h-bn-conv"] and batch_norm_calls(out) == 0
    assert "weight-only calls" in str(report)
    computes_the_same(mod, out, run_module, rng)
