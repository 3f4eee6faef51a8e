"""ResNet-50 (torchvision ``resnet50`` layout, v1.5: stride on the 3x3 conv).

Stem conv7x7/2 + BN + ReLU + maxpool3x3/2, four stages of bottleneck blocks
(1x1 -> 3x3 -> 1x1 with expansion 4, projection shortcut on the first block of
a stage), GlobalAveragePool + Flatten + Gemm to 1000 classes.

The stage/bottleneck code is shared with ResNeXt-50, which only differs in
the grouped 3x3 conv and its width (``groups`` / ``width_per_group``).

quick=True: 64x64 input and one bottleneck per stage instead of (3, 4, 6, 3);
channel widths are unchanged.
"""

from __future__ import annotations

import onnx

from ._builder import GraphBuilder

FULL_IMAGE = 224
QUICK_IMAGE = 64
IN_CHANNELS = 3
NUM_CLASSES = 1000
STEM_CHANNELS = 64
STEM_KERNEL = 7
STAGE_PLANES = (64, 128, 256, 512)
FULL_BLOCKS = (3, 4, 6, 3)
QUICK_BLOCKS = (1, 1, 1, 1)
EXPANSION = 4
# torchvision: width = planes * width_per_group / 64 * groups; 64 and 1 give plain ResNet.
BASE_WIDTH = 64
# Damps the residual branch's last BN so the random-weight residual stream
# stays O(1) over 16 blocks (see _builder module docstring).
RESIDUAL_GAMMA_SCALE = 0.2


def bottleneck(g: GraphBuilder, x: str, cin: int, planes: int, stride: int,
               groups: int, width_per_group: int, name: str) -> tuple[str, int]:
    width = planes * width_per_group // BASE_WIDTH * groups
    cout = planes * EXPANSION
    y = g.conv_bn(x, cin, width, 1, name=f"{name}.conv1")
    y = g.conv_bn(y, width, width, 3, stride, pad=1, groups=groups, name=f"{name}.conv2")
    y = g.conv_bn(y, width, cout, 1, relu=False, gamma_scale=RESIDUAL_GAMMA_SCALE,
                  name=f"{name}.conv3")
    if stride != 1 or cin != cout:
        x = g.conv_bn(x, cin, cout, 1, stride, relu=False, name=f"{name}.downsample")
    return g.relu(g.add(y, x, f"{name}.add"), f"{name}.relu"), cout


def build_resnet(graph_name: str, groups: int, width_per_group: int,
                 quick: bool, seed: int) -> onnx.ModelProto:
    size = QUICK_IMAGE if quick else FULL_IMAGE
    blocks = QUICK_BLOCKS if quick else FULL_BLOCKS
    g = GraphBuilder(graph_name, seed)
    x = g.add_input([1, IN_CHANNELS, size, size])
    x = g.conv_bn(x, IN_CHANNELS, STEM_CHANNELS, STEM_KERNEL, stride=2,
                  pad=STEM_KERNEL // 2, name="conv1")
    x = g.max_pool(x, 3, 2, pad=1)
    ch = STEM_CHANNELS
    for stage, (planes, count) in enumerate(zip(STAGE_PLANES, blocks), start=1):
        for i in range(count):
            stride = 2 if i == 0 and stage > 1 else 1
            x, ch = bottleneck(g, x, ch, planes, stride, groups, width_per_group,
                               f"layer{stage}.{i}")
    return g.finish([g.classifier(x, ch, NUM_CLASSES)])


def build(quick: bool = False, seed: int = 0) -> onnx.ModelProto:
    return build_resnet("resnet50", groups=1, width_per_group=BASE_WIDTH, quick=quick, seed=seed)
