"""SqueezeNet 1.1 (torchvision ``squeezenet1_1``).

Conv3x3/2 (64) + ReLU, then fire modules separated by 3x3/2 max pools with
``ceil_mode`` (as torchvision); a fire module is a 1x1 "squeeze" conv followed
by parallel 1x1 and 3x3 "expand" convs whose outputs are concatenated.  All
convs have a bias and no BatchNorm.  The classifier is a 1x1 conv to 1000
classes + ReLU + GlobalAveragePool + Flatten (dropout is omitted: inference).

quick=True: 64x64 input instead of 224x224 (same layers and channels).
"""

from __future__ import annotations

import onnx

from ._builder import GraphBuilder

FULL_IMAGE = 224
QUICK_IMAGE = 64
IN_CHANNELS = 3
NUM_CLASSES = 1000
STEM_CHANNELS = 64
# (squeeze, expand1x1, expand3x3) per fire module; "pool" marks a max pool.
FEATURES = ("pool", (16, 64, 64), (16, 64, 64), "pool", (32, 128, 128), (32, 128, 128),
            "pool", (48, 192, 192), (48, 192, 192), (64, 256, 256), (64, 256, 256))


def fire(g: GraphBuilder, x: str, cin: int, squeeze: int, e1: int, e3: int,
         name: str) -> tuple[str, int]:
    s = g.relu(g.conv(x, cin, squeeze, 1, bias=True, name=f"{name}.squeeze"))
    a = g.relu(g.conv(s, squeeze, e1, 1, bias=True, name=f"{name}.expand1x1"))
    b = g.relu(g.conv(s, squeeze, e3, 3, pad=1, bias=True, name=f"{name}.expand3x3"))
    return g.concat([a, b], name=f"{name}.concat"), e1 + e3


def build(quick: bool = False, seed: int = 0) -> onnx.ModelProto:
    size = QUICK_IMAGE if quick else FULL_IMAGE
    g = GraphBuilder("squeezenet1_1", seed)
    x = g.add_input([1, IN_CHANNELS, size, size])
    x = g.relu(g.conv(x, IN_CHANNELS, STEM_CHANNELS, 3, stride=2, bias=True, name="conv1"))
    ch = STEM_CHANNELS
    for i, layer in enumerate(FEATURES):
        if layer == "pool":
            x = g.max_pool(x, 3, 2, ceil_mode=True)
        else:
            x, ch = fire(g, x, ch, *layer, name=f"fire{i}")
    x = g.relu(g.conv(x, ch, NUM_CLASSES, 1, bias=True, name="classifier.conv"))
    x = g.op("GlobalAveragePool", [x], "avgpool")
    return g.finish([g.op("Flatten", [x], "output", axis=1)])
