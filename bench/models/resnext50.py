"""ResNeXt-50 32x4d (torchvision ``resnext50_32x4d``).

Identical to ResNet-50 except that the bottleneck 3x3 conv is grouped:
32 groups of width 4 per group at the first stage (so 128 channels instead of
64), doubling each stage.  See ``resnet50`` for the shared layout.

quick=True: same reduction as ResNet-50 (64x64 input, one block per stage).
"""

from __future__ import annotations

import onnx

from .resnet50 import build_resnet

CARDINALITY = 32
WIDTH_PER_GROUP = 4


def build(quick: bool = False, seed: int = 0) -> onnx.ModelProto:
    return build_resnet("resnext50_32x4d", groups=CARDINALITY,
                        width_per_group=WIDTH_PER_GROUP, quick=quick, seed=seed)
