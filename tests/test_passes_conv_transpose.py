"""TASOPass on decoders: a batch norm after a transposed conv (ConvTranspose2d + BatchNorm2d of DCGAN's generator,
pose heads, U-Net and LinkNet decoders) folds into its kernels by the proved rules h-bn-convT(-grouped)(-bias). The
rewritten model runs against the original, in TVM and, exported, in onnxruntime."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "bridge"))
from bridge_onnx_models import F32, Model  # noqa: E402
from test_passes_conv1d import folds_and_exports  # noqa: E402

onnx = pytest.importorskip("onnx")


def up(m: Model, x, cin, cout, k=4, bias=False, **attrs):
    """ConvTranspose (k4, stride 2, pad 1 unless given) [+ bias] + BatchNorm + ReLU."""
    attrs = {"strides": [2, 2], "pads": [1, 1, 1, 1], **attrs}
    w = m.weight((cin, cout // attrs.get("group", 1), k, k))
    y = m.op("ConvTranspose", [x, w] + ([m.weight((cout,))] if bias else []), kernel_shape=[k, k], **attrs)
    return m.op("Relu", [m.bn(y, cout)])


def dcgan_generator(m: Model):
    """DCGAN's generator from a (1, 16, 1, 1) latent: k4 s1 p0, then k4 s2 p1 twice, then tanh."""
    y = up(m, "x", 16, 12, strides=[1, 1], pads=[0, 0, 0, 0])
    y = up(m, up(m, y, 12, 8), 8, 6)
    y = m.op("Tanh", [m.op("ConvTranspose", [y, m.weight((6, 3, 4, 4))], kernel_shape=[4, 4], strides=[2, 2],
                           pads=[1, 1, 1, 1])])
    return m.build([("x", F32, [1, 16, 1, 1])], [(y, F32, [1, 3, 32, 32])])


def linknet_decoder(m: Model):
    """LinkNet's decoder block: 1x1 conv + BN + ReLU, a k3 stride-2 ConvTranspose with output_padding 1 and a bias
    + BN + ReLU, 1x1 conv + BN + ReLU; and a grouped ConvTranspose + BN beside it (its kernels hold C_out / groups
    channels each: h-bn-convT-grouped scales them group by group)."""
    y = m.op("Relu", [m.bn(m.conv("x", 8, 4, 1), 4)])
    y = up(m, y, 4, 4, k=3, bias=True, output_padding=[1, 1])
    y = m.op("Relu", [m.bn(m.conv(y, 4, 6, 1), 6)])
    z = up(m, "x", 8, 6, group=2)
    return m.build([("x", F32, [1, 8, 7, 7])], [(m.op("Add", [y, z]), F32, [1, 6, 14, 14])])


def decoder1d(m: Model):
    """A 1-D decoder: ConvTranspose1d (k4, stride 2) + BatchNorm1d + ReLU, then a depthwise one, read in 2-D over a
    unit axis."""
    y = "x"
    for cin, cout, group in ((8, 6, 1), (6, 6, 6)):
        y = m.op("ConvTranspose", [y, m.weight((cin, cout // group, 4))], kernel_shape=[4], strides=[2], pads=[1, 1],
                 group=group)
        y = m.op("Relu", [m.bn(y, cout)])
    return m.build([("x", F32, [2, 8, 10])], [(y, F32, [2, 6, 40])])


@pytest.mark.parametrize("build, rules, one_d", [
    (dcgan_generator, ["h-bn-convT"] * 3, ""),
    (linknet_decoder, ["h-bn-conv", "h-bn-conv", "h-bn-convT-bias", "h-bn-convT-grouped"], ""),
    (decoder1d, ["h-bn-convT", "h-bn-convT-grouped"], "conv1d_transpose x2"),
], ids=["dcgan-generator", "linknet-decoder", "decoder-1d"])
def test_a_batch_norm_after_a_transposed_conv_folds_into_it(build, rules, one_d, tmp_path, run_module, rng):
    _, kinds = folds_and_exports(build(Model(6)), rules, one_d, tmp_path, run_module, rng)
    assert "ConvTranspose" in kinds


def strided_decoder(m: Model):
    """Transposed convs (channels enough that the multiply-adds saved outweigh the shuffle's copy under the
    analytic cost) of three kinds h-convT-subpixel takes (k4 s2 p1 with a bias; k3 s2 p1 with output_padding 1,
    LinkNet's; k2 s2 p0, a U-Net's, with rows and columns of different sizes), one h-convT-subpixel-crop takes
    (k3 s2 p1 without output_padding: 2 * 10 - 1 rows, not a whole number of strides) and one neither may
    (two groups)."""
    y = m.op("ConvTranspose", ["x", m.weight((32, 32, 4, 4)), m.weight((32,))], kernel_shape=[4, 4],
             strides=[2, 2], pads=[1, 1, 1, 1])
    y = m.op("ConvTranspose", [m.op("Relu", [y]), m.weight((32, 32, 3, 3))], kernel_shape=[3, 3], strides=[2, 2],
             pads=[1, 1, 1, 1], output_padding=[1, 1])
    y = m.op("ConvTranspose", [y, m.weight((32, 16, 2, 2))], kernel_shape=[2, 2], strides=[2, 2])
    odd = m.op("ConvTranspose", ["x", m.weight((32, 32, 3, 3))], kernel_shape=[3, 3], strides=[2, 2],
               pads=[1, 1, 1, 1])
    grouped = m.op("ConvTranspose", ["x", m.weight((32, 8, 4, 4))], kernel_shape=[4, 4], strides=[2, 2],
                   pads=[1, 1, 1, 1], group=2)
    return m.build([("x", F32, [1, 32, 10, 8])],
                   [(y, F32, [1, 16, 80, 64]), (odd, F32, [1, 32, 19, 15]), (grouped, F32, [1, 16, 20, 16])])


def test_a_strided_transposed_conv_runs_as_a_subpixel_conv(tmp_path, run_module, rng):
    """TVM spends stride^2 times the multiply-adds on the zeros it spreads a transposed conv's input with; the
    proved rules h-convT-subpixel(-crop) compute it as a stride-1 conv and a pixel shuffle (cropped), priced
    cheaper, and the result computes what the original does in TVM and, exported, in onnxruntime."""
    report, kinds = folds_and_exports(strided_decoder(Model(7)), [], "", tmp_path, run_module, rng)
    applied = sorted(a.rule_id for a in report.search.applied)
    assert applied == ["h-convT-subpixel"] * 3 + ["h-convT-subpixel-crop"], applied
    assert kinds.count("ConvTranspose") == 1 and kinds.count("Conv") == 4 and "Slice" in kinds
