"""VGG-19 (torchvision ``vgg19``, configuration E without batch norm).

One of Tensat's seven benchmarks (with BERT, NasRNN, ResNeXt-50, NasNet-A,
SqueezeNet and Inception-v3): a plain chain of sixteen 3x3 convs with bias
and ReLU in five stages, each closed by a 2x2/2 max pool, then three fully
connected layers (Gemm, as torch exports ``nn.Linear`` on a 2-D input) with
ReLUs between them.  At 224x224 the features end 7x7, where torchvision's
adaptive 7x7 average pool is the identity, so it is left out, as is dropout
(inference).  There are no parallel branches and no batch norms: the graph
rewrites that pay on it are the ones that change how its convs run.

quick=True: 64x64 input, every channel count and the hidden width of the
classifier divided by 4 (16 to 128 channels, 1024 hidden); the stages are the
same.
"""

from __future__ import annotations

import onnx

from ._builder import GraphBuilder

FULL_IMAGE = 224
QUICK_IMAGE = 64
QUICK_WIDTH_DIVISOR = 4
IN_CHANNELS = 3
NUM_CLASSES = 1000
HIDDEN = 4096
# Output channels per conv, "pool" for a 2x2/2 max pool (torchvision's configuration "E").
FEATURES = (64, 64, "pool", 128, 128, "pool", 256, 256, 256, 256, "pool",
            512, 512, 512, 512, "pool", 512, 512, 512, 512, "pool")
POOLS = FEATURES.count("pool")


def build(quick: bool = False, seed: int = 0) -> onnx.ModelProto:
    size = QUICK_IMAGE if quick else FULL_IMAGE
    div = QUICK_WIDTH_DIVISOR if quick else 1
    g = GraphBuilder("vgg19", seed)
    x = g.add_input([1, IN_CHANNELS, size, size])
    ch, stage, index = IN_CHANNELS, 1, 1
    for layer in FEATURES:
        if layer == "pool":
            x = g.max_pool(x, 2, 2, name=f"pool{stage}")
            stage, index = stage + 1, 1
            continue
        cout = layer // div
        x = g.relu(g.conv(x, ch, cout, 3, pad=1, bias=True, name=f"conv{stage}_{index}"),
                   f"relu{stage}_{index}")
        ch, index = cout, index + 1
    side = size >> POOLS
    x = g.op("Flatten", [x], "flatten", axis=1)
    fin, hidden = ch * side * side, HIDDEN // div
    for i, fout in enumerate((hidden, hidden, NUM_CLASSES), start=1):
        w = g.he_weight([fout, fin], fin, f"fc{i}.weight")
        b = g.small([fout], f"fc{i}.bias")
        last = i == 3
        x = g.op("Gemm", [x, w, b], "output" if last else f"fc{i}", transB=1)
        if not last:
            x = g.relu(x, f"fc{i}.relu")
        fin = fout
    return g.finish([x])
