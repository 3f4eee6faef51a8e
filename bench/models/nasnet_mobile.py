"""NASNet-A Mobile (the ``nasnetamobile`` port in Cadene's pretrainedmodels).

Config: stem conv 32 filters, penultimate filters 1056 (so ``f = 1056 / 24 =
44`` channels per cell branch in the first stack), three stacks of
``CELLS_PER_STACK = 4`` cells (one FirstCell + three NormalCells) separated by
two reduction cells; spatial 224 -> 111 (stem conv) -> 56 -> 28 -> 14 -> 7.

Building blocks:

* separable conv = depthwise Conv (group = channels) + pointwise 1x1 Conv;
  a separable *branch* is ReLU, sep-conv(stride), BN, ReLU, sep-conv, BN;
* normal cell (x = previous cell, x_prev = the one before)::

      l = cell-input(x_prev), r = ReLU-Conv1x1-BN(x)
      c0 = sep5(r) + sep3(l)     c1 = sep5(l) + sep3(l)
      c2 = avg3(r) + l           c3 = avg3(l) + avg3(l)
      c4 = sep3(r) + r           out = Concat(l, c0, c1, c2, c3, c4)

  where cell-input is ReLU-Conv1x1-BN, except in the first cell of a stack
  where x_prev has twice the spatial size and is reduced by the "factorised
  reduction" (ReLU, two 1x1/2 AvgPool+Conv paths, the second on the input
  shifted by one pixel via Pad+Slice, Concat, BN);
* reduction cell and both stem cells (a = the 1x1-conv path, b = the other)::

      c0 = sep5/2(a) + sep7/2(b)   c1 = max3/2(a) + sep7/2(b)
      c2 = avg3/2(a) + sep5/2(b)   c3 = avg3(c0) + c1
      c4 = sep3(c0) + max3/2(a)    out = Concat(c1, c2, c3, c4)

Simplified compared to the TF/Cadene model (none changes op types or shapes):

* TF "SAME" padding of stride-2 ops is asymmetric; Cadene emulates it with
  ZeroPad2d + crop in the reduction cells.  Here every k x k op uses symmetric
  padding k // 2, which gives the same output sizes;
* dropout and the auxiliary head are omitted (inference graph), and the
  final 7x7 AvgPool is a GlobalAveragePool (identical at 224, and it keeps
  the quick variant valid);
* random weights: the BN after each cell-input conv has its scale damped by
  ``CELL_INPUT_GAMMA_SCALE`` so the sum-of-branches cells do not double the
  activation scale at every cell (see ``_builder``).

quick=True: 64x64 input, 2 cells per stack instead of 4 (FirstCell + one
NormalCell, so every cell type is still present); channel counts unchanged.
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from ._builder import LINEAR_GAIN, GraphBuilder

FULL_IMAGE, QUICK_IMAGE = 224, 64
FULL_CELLS_PER_STACK, QUICK_CELLS_PER_STACK = 4, 2
IN_CHANNELS = 3
NUM_CLASSES = 1000
STEM_FILTERS = 32
PENULTIMATE_FILTERS = 1056
FILTERS_MULTIPLIER = 2  # channels double at every reduction
NUM_STACKS = 3
NORMAL_CELL_BRANCHES = 6  # l, c0..c4 concatenated
REDUCTION_CELL_BRANCHES = 4  # c1..c4 concatenated
SLICE_TO_END = np.iinfo(np.int64).max  # ONNX Slice "ends" meaning "to the end"
BN_EPS = 1e-3
CELL_INPUT_GAMMA_SCALE = 1.0 / math.sqrt(2.0)


class NasNet:
    """Cell builders; method names follow the Cadene module names."""

    def __init__(self, g: GraphBuilder):
        self.g = g

    def bn(self, x, ch, name, gamma_scale=1.0):
        return self.g.batchnorm(x, ch, BN_EPS, gamma_scale, name=name)

    def relu_conv_bn(self, x, cin, cout, name):
        y = self.g.conv(self.g.relu(x, f"{name}.relu"), cin, cout, 1, name=f"{name}.conv")
        return self.bn(y, cout, f"{name}.bn", CELL_INPUT_GAMMA_SCALE)

    def separable(self, x, cin, cout, k, stride, name):
        y = self.g.conv(x, cin, cin, k, stride, pad=k // 2, groups=cin, name=f"{name}.depthwise")
        # The depthwise output is not rectified, hence the linear gain.
        return self.g.conv(y, cin, cout, 1, gain=LINEAR_GAIN, name=f"{name}.pointwise")

    def branch(self, x, cin, cout, k, stride, name):
        """BranchSeparables (BranchSeparablesStem when cin != cout: both widen first)."""
        y = self.separable(self.g.relu(x, f"{name}.relu"), cin, cout, k, stride, f"{name}.sep1")
        y = self.g.relu(self.bn(y, cout, f"{name}.bn1"), f"{name}.relu1")
        return self.bn(self.separable(y, cout, cout, k, 1, f"{name}.sep2"), cout, f"{name}.bn2")

    def factorized_reduction(self, x, cin, cout, name):
        """Halves the spatial size of x_prev with two offset 1x1/2 paths."""
        g = self.g
        x = g.relu(x, f"{name}.relu")
        shift_pads = g.ints([0, 0, 0, 0, 0, 0, 1, 1], f"{name}.shift_pads")
        shifted = g.op("Pad", [x, shift_pads], f"{name}.shift_pad")
        shifted = g.op("Slice", [shifted, g.ints([1, 1], f"{name}.shift_starts"),
                                 g.ints([SLICE_TO_END] * 2, f"{name}.shift_ends"),
                                 g.ints([2, 3], f"{name}.shift_axes")], f"{name}.shift_crop")
        paths = []
        for i, src in enumerate((x, shifted), start=1):
            y = g.avg_pool(src, 1, 2, name=f"{name}.path_{i}.avgpool")
            paths.append(g.conv(y, cin, cout // 2, 1, name=f"{name}.path_{i}.conv"))
        y = g.concat(paths, name=f"{name}.concat")
        return self.bn(y, cout, f"{name}.final_path_bn", CELL_INPUT_GAMMA_SCALE)

    def avg(self, x, stride, name):
        return self.g.avg_pool(x, 3, stride, pad=1, name=name)

    def normal_cell(self, x, x_ch, x_prev, prev_ch, filters, first, name):
        g = self.g
        if first:
            left = self.factorized_reduction(x_prev, prev_ch, filters, f"{name}.prev")
        else:
            left = self.relu_conv_bn(x_prev, prev_ch, filters, f"{name}.conv_prev_1x1")
        right = self.relu_conv_bn(x, x_ch, filters, f"{name}.conv_1x1")
        f, p = filters, f"{name}."
        c0 = g.add(self.branch(right, f, f, 5, 1, f"{p}comb_iter_0_left"),
                   self.branch(left, f, f, 3, 1, f"{p}comb_iter_0_right"), f"{p}comb_iter_0")
        c1 = g.add(self.branch(left, f, f, 5, 1, f"{p}comb_iter_1_left"),
                   self.branch(left, f, f, 3, 1, f"{p}comb_iter_1_right"), f"{p}comb_iter_1")
        c2 = g.add(self.avg(right, 1, f"{p}comb_iter_2_left"), left, f"{p}comb_iter_2")
        c3 = g.add(self.avg(left, 1, f"{p}comb_iter_3_left"),
                   self.avg(left, 1, f"{p}comb_iter_3_right"), f"{p}comb_iter_3")
        c4 = g.add(self.branch(right, f, f, 3, 1, f"{p}comb_iter_4_left"), right,
                   f"{p}comb_iter_4")
        out = g.concat([left, c0, c1, c2, c3, c4], name=f"{p}concat")
        return out, NORMAL_CELL_BRANCHES * filters

    def reduction_combine(self, a, b, b_ch, filters, name):
        """Shared tail of the stem and reduction cells (a has ``filters`` channels)."""
        g, f, p = self.g, filters, f"{name}."
        c0 = g.add(self.branch(a, f, f, 5, 2, f"{p}comb_iter_0_left"),
                   self.branch(b, b_ch, f, 7, 2, f"{p}comb_iter_0_right"), f"{p}comb_iter_0")
        c1 = g.add(g.max_pool(a, 3, 2, pad=1, name=f"{p}comb_iter_1_left"),
                   self.branch(b, b_ch, f, 7, 2, f"{p}comb_iter_1_right"), f"{p}comb_iter_1")
        c2 = g.add(self.avg(a, 2, f"{p}comb_iter_2_left"),
                   self.branch(b, b_ch, f, 5, 2, f"{p}comb_iter_2_right"), f"{p}comb_iter_2")
        c3 = g.add(self.avg(c0, 1, f"{p}comb_iter_3_right"), c1, f"{p}comb_iter_3")
        c4 = g.add(self.branch(c0, f, f, 3, 1, f"{p}comb_iter_4_left"),
                   g.max_pool(a, 3, 2, pad=1, name=f"{p}comb_iter_4_right"), f"{p}comb_iter_4")
        return g.concat([c1, c2, c3, c4], name=f"{p}concat"), REDUCTION_CELL_BRANCHES * filters

    def reduction_cell(self, x, x_ch, x_prev, prev_ch, filters, name):
        left = self.relu_conv_bn(x_prev, prev_ch, filters, f"{name}.conv_prev_1x1")
        right = self.relu_conv_bn(x, x_ch, filters, f"{name}.conv_1x1")
        return self.reduction_combine(right, left, filters, filters, name)


def build(quick: bool = False, seed: int = 0) -> onnx.ModelProto:
    size = QUICK_IMAGE if quick else FULL_IMAGE
    cells_per_stack = QUICK_CELLS_PER_STACK if quick else FULL_CELLS_PER_STACK
    # The last normal cell concatenates 6 branches of the last stack's width.
    filters = PENULTIMATE_FILTERS // (NORMAL_CELL_BRANCHES * FILTERS_MULTIPLIER ** (NUM_STACKS - 1))
    g = GraphBuilder("nasnet_a_mobile", seed)
    net = NasNet(g)
    x = g.add_input([1, IN_CHANNELS, size, size])
    conv0 = g.conv(x, IN_CHANNELS, STEM_FILTERS, 3, stride=2, name="conv0")
    conv0 = net.bn(conv0, STEM_FILTERS, "conv0.bn")
    stem0_f = filters // FILTERS_MULTIPLIER ** 2
    a = net.relu_conv_bn(conv0, STEM_FILTERS, stem0_f, "cell_stem_0.conv_1x1")
    stem0, stem0_ch = net.reduction_combine(a, conv0, STEM_FILTERS, stem0_f, "cell_stem_0")
    stem1_f = filters // FILTERS_MULTIPLIER
    a = net.relu_conv_bn(stem0, stem0_ch, stem1_f, "cell_stem_1.conv_1x1")
    b = net.factorized_reduction(conv0, STEM_FILTERS, stem1_f, "cell_stem_1.path")
    stem1, stem1_ch = net.reduction_combine(a, b, stem1_f, stem1_f, "cell_stem_1")

    (x_prev, prev_ch), (x, x_ch) = (stem0, stem0_ch), (stem1, stem1_ch)
    for stack in range(NUM_STACKS):
        stack_filters = filters * FILTERS_MULTIPLIER ** stack
        if stack > 0:
            red = net.reduction_cell(x, x_ch, x_prev, prev_ch, stack_filters,
                                     f"reduction_cell_{stack - 1}")
            (x_prev, prev_ch), (x, x_ch) = (x, x_ch), red
        for i in range(cells_per_stack):
            cell = net.normal_cell(x, x_ch, x_prev, prev_ch, stack_filters, first=i == 0,
                                   name=f"stack{stack}.cell_{i}")
            (x_prev, prev_ch), (x, x_ch) = (x, x_ch), cell
    return g.finish([g.classifier(g.relu(x, "relu"), x_ch, NUM_CLASSES)])
