"""TASOPass on 1-D convolutional models: a conv1d is read as a conv2d over a unit axis (bridge/from_relax.py), so
the proved rules over conv2d hold for it: a BatchNorm1d after a Conv1d (with or without its bias, depthwise too)
folds into it, as in PointNet, 1-D ResNets and Conformer's convolution module. The rewritten model runs against
the original, in TVM and, exported, in onnxruntime."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tvm

from taso_relay.passes import TASOPass

sys.path.insert(0, str(Path(__file__).parent / "bridge"))
from bridge_onnx_models import F32, Model  # noqa: E402
from test_passes_norm import batch_norm_calls, computes_the_same, optimized_with_every_rewrite  # noqa: E402

onnx = pytest.importorskip("onnx")


def resnet1d_block(m: Model):
    """A 1-D ResNet's downsampling block: Conv1d(k=3, stride 2) + bias + BN + ReLU, depthwise Conv1d(k=5) + BN,
    a 1x1 stride-2 shortcut + BN, added, ReLU, MaxPool1d."""
    y = m.op("Conv", ["x", m.weight((16, 8, 3)), m.weight((16,))], pads=[1, 1], strides=[2], kernel_shape=[3])
    y = m.op("Relu", [m.bn(y, 16)])
    y = m.bn(m.op("Conv", [y, m.weight((16, 1, 5))], pads=[2, 2], group=16, kernel_shape=[5]), 16)
    z = m.bn(m.op("Conv", ["x", m.weight((16, 8, 1))], strides=[2], kernel_shape=[1]), 16)
    y = m.op("MaxPool", [m.op("Relu", [m.op("Add", [y, z])])], kernel_shape=[2], strides=[2])
    return m.build([("x", F32, [1, 8, 40])], [(y, F32, [1, 16, 10])])


def conformer_conv(m: Model):
    """Conformer's convolution module on (B, T, C) features: transposed to (B, C, T), a pointwise Conv1d to 2C,
    a GLU (split, sigmoid, mul), a depthwise Conv1d(k=7) + BN + SiLU (sigmoid, mul), a pointwise Conv1d, and
    transposed back."""
    y = m.op("Transpose", ["x"], perm=[0, 2, 1])
    y = m.op("Conv", [y, m.weight((32, 16, 1)), m.weight((32,))], kernel_shape=[1])
    a, b = m.op("Split", [y], n_out=2, axis=1, num_outputs=2)
    y = m.op("Mul", [a, m.op("Sigmoid", [b])])
    y = m.bn(m.op("Conv", [y, m.weight((16, 1, 7)), m.weight((16,))], pads=[3, 3], group=16, kernel_shape=[7]), 16)
    y = m.op("Mul", [y, m.op("Sigmoid", [y])])
    y = m.op("Conv", [y, m.weight((16, 16, 1)), m.weight((16,))], kernel_shape=[1])
    return m.build([("x", F32, [2, 12, 16])], [(m.op("Transpose", [y], perm=[0, 2, 1]), F32, [2, 12, 16])])


def saved(tmp_path, model) -> Path:
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return path


def unet1d_up(m: Model):
    """A 1-D U-Net's decoder step: Conv1d + BN + ReLU, an upsampling Resize (linear, x2; TVM's importer writes it
    as call_tir of topi's resize1d), Conv1d + BN."""
    y = m.op("Relu", [m.bn(m.op("Conv", ["x", m.weight((8, 4, 3))], pads=[1, 1], kernel_shape=[3]), 8)])
    y = m.op("Resize", [y, "", m.const([1.0, 1.0, 2.0], np.float32)], mode="linear")
    y = m.bn(m.op("Conv", [y, m.weight((8, 8, 3))], pads=[1, 1], kernel_shape=[3]), 8)
    return m.build([("x", F32, [1, 4, 16])], [(y, F32, [1, 8, 32])])


@pytest.mark.parametrize("build, rules, one_d", [
    (resnet1d_block, ["h-bn-conv", "h-bn-conv", "h-bn-conv-bias"], "conv1d x3, max_pool1d"),
    (conformer_conv, ["h-bn-conv-bias"], "conv1d x3"),
    (unet1d_up, ["h-bn-conv", "h-bn-conv"], "conv1d x2, resize1d"),
], ids=["resnet1d-block", "conformer-conv-module", "unet1d-up"])
def test_a_batch_norm_after_a_conv1d_folds_into_it(build, rules, one_d, tmp_path, run_module, rng):
    report, _ = folds_and_exports(build(Model(4)), rules, one_d, tmp_path, run_module, rng)
    assert "read as 2-D" in report.summary()


def folds_and_exports(model, rules, one_d, tmp_path, run_module, rng):
    """The ONNX `model` through TASOPass with every rewrite kept: the first phase's folds are `rules` (sorted), every
    batch norm gone, the 1-D reading `one_d`; the result computes what the original does in TVM and, written as ONNX,
    in onnxruntime. (its report, the exported model's op types)"""
    from taso_relay.onnx_io import prepare
    from taso_relay.onnx_io.export import export_module, run_onnxruntime

    prepared = prepare(saved(tmp_path, model), {})
    mod = prepared.mod
    taso = TASOPass(verify_speed=False, min_gain=0.0)  # (a small model: the speed check is the benchmarks')
    out = taso(mod)
    report = taso.report["main"]
    assert report.status == "optimized" and report.one_d == one_d
    assert sorted(a.rule_id for a in report.search.applied[:report.search.first_phase]) == rules
    assert batch_norm_calls(mod) == len(rules) and batch_norm_calls(out) == 0
    inputs = computes_the_same(mod, out, run_module, rng)

    exported = export_module(out, prepared)  # the rewritten model written as ONNX (1-D: 2-D ops between reshapes)
    assert exported.exported, exported.reason
    kinds = [n.op_type for n in exported.model.graph.node]
    assert "BatchNormalization" not in kinds
    want, got = (run_onnxruntime(model, {"x": inputs[0]}) for model in (prepared.original, exported.model))
    assert len(got) == len(want)
    for onnx_got, onnx_want in zip(got, want):
        np.testing.assert_allclose(onnx_got, onnx_want, rtol=1e-4, atol=1e-5)
    return report, kinds


def test_a_conv1d_model_with_nothing_to_fold_is_returned_as_given(tmp_path):
    """Read in 2-D, written back only where a rule applied: without one, the function keeps its conv1d."""
    from taso_relay.onnx_io import prepare

    m = Model(5)
    y = m.op("Relu", [m.op("Conv", ["x", m.weight((8, 4, 3)), m.weight((8,))], pads=[1, 1], kernel_shape=[3])])
    mod = prepare(saved(tmp_path, m.build([("x", F32, [1, 4, 20])], [(y, F32, [1, 8, 20])])), {}).mod
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    out = taso(mod)
    assert taso.report["main"].one_d == "conv1d" and taso.report["main"].status != "optimized"
    tvm.ir.assert_structural_equal(out["main"], mod["main"])


def test_a_dynamic_length_is_stood_in_for_where_every_length_is_above_1(run_module):
    """A 1-D ResNet stem and two strided convs with a symbolic length l: at a stand-in of 11 the last length is
    1 (11, 6, 3, 2, 1), which says nothing of l, so a larger prime stands in; the result, compiled with l
    symbolic, computes what the original does at lengths far from the stand-in."""
    from tvm import relax, tirx

    rng = np.random.default_rng(2)
    c = lambda *shape: relax.const(rng.standard_normal(shape).astype("float32"))  # noqa: E731

    def conv_bn(bb, y, w, **kwargs):
        y = bb.emit(relax.op.nn.conv1d(y, w, **kwargs))
        var = relax.const((np.abs(rng.standard_normal(8)) + 0.5).astype("float32"))
        norm = relax.op.nn.batch_norm(y, c(8), c(8), c(8), var, axis=1, training=False)
        return bb.emit(relax.TupleGetItem(bb.emit(norm), 0))

    length = tirx.Var("l", "int64")
    x = relax.Var("x", relax.TensorType((1, 4, length), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.relu(conv_bn(bb, x, c(8, 4, 15), strides=2, padding=(7, 7))))
            y = bb.emit(relax.op.nn.max_pool1d(y, 3, strides=2, padding=(1, 1)))
            y = conv_bn(bb, y, c(8, 8, 3), strides=2, padding=(1, 1))
            y = conv_bn(bb, y, c(8, 8, 3), strides=2, padding=(1, 1))
            out = bb.emit_output(relax.op.mean(y, axis=[2]))
        bb.emit_func_output(out)
    mod = bb.get()
    out, report = optimized_with_every_rewrite(mod)
    assert "read and searched at l=17" in report.sized
    for n in (100, 1000):
        x = np.random.default_rng(n).uniform(-1, 1, (1, 4, n)).astype("float32")
        np.testing.assert_allclose(run_module(out, [x])[0], run_module(mod, [x])[0], rtol=1e-4, atol=1e-4)


def test_a_causal_convs_left_pad_folds_into_it(run_module, rng):
    """A TCN's causal convs: F.pad(x, (k - 1) * d on the left), then a conv1d without padding; the pad is read on
    the unit axis too (its one use is the conv, or it reads a 1-D result), so h-pad-conv folds each into its
    conv's padding, the first layer's as well."""
    from tvm import relax

    gen = np.random.default_rng(5)
    c = lambda *shape: relax.const(gen.standard_normal(shape).astype("float32"))  # noqa: E731
    x = relax.Var("x", relax.TensorType((1, 4, 20), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.pad(x, [0, 0, 0, 0, 2, 0]))
            y = bb.emit(relax.op.nn.relu(bb.emit(relax.op.nn.conv1d(y, c(8, 4, 3)))))
            y = bb.emit(relax.op.nn.pad(y, [0, 0, 0, 0, 4, 0]))
            out = bb.emit_output(relax.op.nn.conv1d(y, c(8, 8, 3), dilation=2))
        bb.emit_func_output(out)
    mod = bb.get()
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    out = taso(mod)
    report = taso.report["main"]
    assert report.status == "optimized" and report.ops_after.get("pad", 0) == 0
    assert [a.rule_id for a in report.search.applied].count("h-pad-conv") == 2
    computes_the_same(mod, out, run_module, rng)
