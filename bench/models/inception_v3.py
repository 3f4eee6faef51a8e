"""Inception-v3 (torchvision ``inception_v3`` layout, inference graph).

Stem of plain convs and max pools, then the mixed blocks
5b-5d (InceptionA), 6a (InceptionB, grid reduction), 6b-6e (InceptionC with
1x7/7x1 factorised convs), 7a (InceptionD, grid reduction) and 7b-7c
(InceptionE with parallel 1x3/3x1 splits), each a set of parallel branches
joined by Concat.  Every conv is Conv(no bias) + BN(eps=1e-3) + ReLU.  Branch
average pools count padding (PyTorch's default ``count_include_pad=True``).
Head: GlobalAveragePool + Flatten + Gemm to 1000.  The auxiliary classifier,
dropout and ``transform_input`` are training/preprocessing only and left out.

quick=True: 75x75 input (the smallest torchvision accepts) and all channel
counts divided by 4 (``QUICK_WIDTH_DIVISOR``); every block is kept.
"""

from __future__ import annotations

import onnx

from ._builder import GraphBuilder

FULL_IMAGE = 299
QUICK_IMAGE = 75
QUICK_WIDTH_DIVISOR = 4
IN_CHANNELS = 3
NUM_CLASSES = 1000
BN_EPS = 1e-3
# InceptionC width of the 7x7 branches for Mixed_6b..6e.
C7_WIDTHS = (128, 160, 160, 192)
# InceptionA pool-branch width for Mixed_5b..5d.
POOL_FEATURES = (32, 64, 64)


class Inception:
    """Holds the builder and width divisor so block code reads like torchvision's."""

    def __init__(self, g: GraphBuilder, divisor: int):
        self.g, self.div = g, divisor

    def w(self, channels: int) -> int:
        return max(1, channels // self.div)

    def conv(self, x, cin, cout, kernel, stride=1, pad=0, name="conv"):
        return self.g.conv_bn(x, cin, self.w(cout), kernel, stride, pad, eps=BN_EPS, name=name)

    def avg_branch(self, x, cin, cout, name):
        y = self.g.avg_pool(x, 3, 1, pad=1, count_include_pad=True, name=f"{name}.pool")
        return self.conv(y, cin, cout, 1, name=f"{name}.branch_pool")

    def block_a(self, x, cin, pool_features, name):
        b1 = self.conv(x, cin, 64, 1, name=f"{name}.branch1x1")
        b5 = self.conv(x, cin, 48, 1, name=f"{name}.branch5x5_1")
        b5 = self.conv(b5, self.w(48), 64, 5, pad=2, name=f"{name}.branch5x5_2")
        b3 = self.conv(x, cin, 64, 1, name=f"{name}.branch3x3dbl_1")
        b3 = self.conv(b3, self.w(64), 96, 3, pad=1, name=f"{name}.branch3x3dbl_2")
        b3 = self.conv(b3, self.w(96), 96, 3, pad=1, name=f"{name}.branch3x3dbl_3")
        bp = self.avg_branch(x, cin, pool_features, name)
        out = self.g.concat([b1, b5, b3, bp], name=f"{name}.concat")
        return out, self.w(64) * 2 + self.w(96) + self.w(pool_features)

    def block_b(self, x, cin, name):
        b3 = self.conv(x, cin, 384, 3, stride=2, name=f"{name}.branch3x3")
        bd = self.conv(x, cin, 64, 1, name=f"{name}.branch3x3dbl_1")
        bd = self.conv(bd, self.w(64), 96, 3, pad=1, name=f"{name}.branch3x3dbl_2")
        bd = self.conv(bd, self.w(96), 96, 3, stride=2, name=f"{name}.branch3x3dbl_3")
        bp = self.g.max_pool(x, 3, 2, name=f"{name}.pool")
        return self.g.concat([b3, bd, bp], name=f"{name}.concat"), self.w(384) + self.w(96) + cin

    def block_c(self, x, cin, c7, name):
        w7 = self.w(c7)
        b1 = self.conv(x, cin, 192, 1, name=f"{name}.branch1x1")
        b7 = self.conv(x, cin, c7, 1, name=f"{name}.branch7x7_1")
        b7 = self.conv(b7, w7, c7, (1, 7), pad=(0, 3), name=f"{name}.branch7x7_2")
        b7 = self.conv(b7, w7, 192, (7, 1), pad=(3, 0), name=f"{name}.branch7x7_3")
        bd = self.conv(x, cin, c7, 1, name=f"{name}.branch7x7dbl_1")
        bd = self.conv(bd, w7, c7, (7, 1), pad=(3, 0), name=f"{name}.branch7x7dbl_2")
        bd = self.conv(bd, w7, c7, (1, 7), pad=(0, 3), name=f"{name}.branch7x7dbl_3")
        bd = self.conv(bd, w7, c7, (7, 1), pad=(3, 0), name=f"{name}.branch7x7dbl_4")
        bd = self.conv(bd, w7, 192, (1, 7), pad=(0, 3), name=f"{name}.branch7x7dbl_5")
        bp = self.avg_branch(x, cin, 192, name)
        return self.g.concat([b1, b7, bd, bp], name=f"{name}.concat"), 4 * self.w(192)

    def block_d(self, x, cin, name):
        b3 = self.conv(x, cin, 192, 1, name=f"{name}.branch3x3_1")
        b3 = self.conv(b3, self.w(192), 320, 3, stride=2, name=f"{name}.branch3x3_2")
        b7 = self.conv(x, cin, 192, 1, name=f"{name}.branch7x7x3_1")
        b7 = self.conv(b7, self.w(192), 192, (1, 7), pad=(0, 3), name=f"{name}.branch7x7x3_2")
        b7 = self.conv(b7, self.w(192), 192, (7, 1), pad=(3, 0), name=f"{name}.branch7x7x3_3")
        b7 = self.conv(b7, self.w(192), 192, 3, stride=2, name=f"{name}.branch7x7x3_4")
        bp = self.g.max_pool(x, 3, 2, name=f"{name}.pool")
        return self.g.concat([b3, b7, bp], name=f"{name}.concat"), self.w(320) + self.w(192) + cin

    def split_1x3_3x1(self, x, cin, name):
        """The InceptionE fan-out: parallel 1x3 and 3x1 convs, concatenated."""
        a = self.conv(x, cin, 384, (1, 3), pad=(0, 1), name=f"{name}a")
        b = self.conv(x, cin, 384, (3, 1), pad=(1, 0), name=f"{name}b")
        return self.g.concat([a, b], name=f"{name}.concat")

    def block_e(self, x, cin, name):
        b1 = self.conv(x, cin, 320, 1, name=f"{name}.branch1x1")
        b3 = self.conv(x, cin, 384, 1, name=f"{name}.branch3x3_1")
        b3 = self.split_1x3_3x1(b3, self.w(384), f"{name}.branch3x3_2")
        bd = self.conv(x, cin, 448, 1, name=f"{name}.branch3x3dbl_1")
        bd = self.conv(bd, self.w(448), 384, 3, pad=1, name=f"{name}.branch3x3dbl_2")
        bd = self.split_1x3_3x1(bd, self.w(384), f"{name}.branch3x3dbl_3")
        bp = self.avg_branch(x, cin, 192, name)
        out = self.g.concat([b1, b3, bd, bp], name=f"{name}.concat")
        return out, self.w(320) + 4 * self.w(384) + self.w(192)


def build(quick: bool = False, seed: int = 0) -> onnx.ModelProto:
    size = QUICK_IMAGE if quick else FULL_IMAGE
    g = GraphBuilder("inception_v3", seed)
    net = Inception(g, QUICK_WIDTH_DIVISOR if quick else 1)
    w = net.w
    x = g.add_input([1, IN_CHANNELS, size, size])
    x = net.conv(x, IN_CHANNELS, 32, 3, stride=2, name="Conv2d_1a_3x3")
    x = net.conv(x, w(32), 32, 3, name="Conv2d_2a_3x3")
    x = net.conv(x, w(32), 64, 3, pad=1, name="Conv2d_2b_3x3")
    x = g.max_pool(x, 3, 2, name="maxpool1")
    x = net.conv(x, w(64), 80, 1, name="Conv2d_3b_1x1")
    x = net.conv(x, w(80), 192, 3, name="Conv2d_4a_3x3")
    x = g.max_pool(x, 3, 2, name="maxpool2")
    ch = w(192)
    for suffix, pool_features in zip("bcd", POOL_FEATURES):
        x, ch = net.block_a(x, ch, pool_features, f"Mixed_5{suffix}")
    x, ch = net.block_b(x, ch, "Mixed_6a")
    for suffix, c7 in zip("bcde", C7_WIDTHS):
        x, ch = net.block_c(x, ch, c7, f"Mixed_6{suffix}")
    x, ch = net.block_d(x, ch, "Mixed_7a")
    for suffix in "bc":
        x, ch = net.block_e(x, ch, f"Mixed_7{suffix}")
    return g.finish([g.classifier(x, ch, NUM_CLASSES)])
