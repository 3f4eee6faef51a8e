"""depth_to_space and space_to_depth against their definitions index by index (PyTorch's pixel_shuffle and
pixel_unshuffle for CRD, ONNX's DepthToSpace and SpaceToDepth for DCR), in both layouts, with non-square blocks:
the Relax and ONNX forms write the same spelling as the reference, so only this test holds it to the definition."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from taso_relay.graph.ops import get_op


def depth_channel(c, i, j, channels, block, mode):
    """The input channel of output channel c at block position (i, j)."""
    bh, bw = block
    return c * bh * bw + i * bw + j if mode == "CRD" else (i * bw + j) * channels + c


def reference_depth_to_space(x, block, mode):
    n, cin, h, w = x.shape
    (bh, bw), c_out = block, cin // (block[0] * block[1])
    y = np.empty((n, c_out, h * bh, w * bw), x.dtype)
    for c, i, j in itertools.product(range(c_out), range(bh), range(bw)):
        y[:, c, i::bh, j::bw] = x[:, depth_channel(c, i, j, c_out, block, mode)]
    return y


def reference_space_to_depth(x, block, mode):
    n, c_in, h, w = x.shape
    bh, bw = block
    y = np.empty((n, c_in * bh * bw, h // bh, w // bw), x.dtype)
    for c, i, j in itertools.product(range(c_in), range(bh), range(bw)):
        y[:, depth_channel(c, i, j, c_in, block, mode)] = x[:, c, i::bh, j::bw]
    return y


def run(op, x, layout, **attrs):
    """The operator's reference on NCHW `x`, given in `layout` and read back in NCHW."""
    opdef = get_op(op)
    attrs = dict(opdef.normalize_attrs({**attrs, "layout": layout}))
    if layout == "NHWC":
        return opdef.ref([x.transpose(0, 2, 3, 1)], attrs)[0].transpose(0, 3, 1, 2)
    return opdef.ref([x], attrs)[0]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("mode", ["CRD", "DCR"])
@pytest.mark.parametrize("block", [(2, 3), (3, 1), (2, 2)])
def test_pixel_shuffles_compute_their_definitions(block, mode, layout):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5 * block[0] * block[1], 3, 4)).astype("float32")
    np.testing.assert_array_equal(run("depth_to_space", x, layout, block=block, mode=mode),
                                  reference_depth_to_space(x, block, mode))
    x = rng.standard_normal((2, 5, 3 * block[0], 4 * block[1])).astype("float32")
    np.testing.assert_array_equal(run("space_to_depth", x, layout, block=block, mode=mode),
                                  reference_space_to_depth(x, block, mode))
