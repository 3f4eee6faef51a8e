"""Write examples/inception_block.onnx, the model `taso-relay demo` optimizes.

An Inception-style block, the kind of graph TASO was built for: four parallel
branches on one input (two of them start with a 1x1 convolution of the same
input, which a substitution can merge into one wider convolution), joined by
Concat, then BatchNormalization, a global pool and a Gemm classifier head,
and TopK, an operator the graph form does not model (it stays opaque). Its 3x3
branch is ACNet's training-time block (3x3, 1x3 and 3x1 convs of one input, each
with a batch norm, summed), as a model exported before its branches are merged:
proven rules fold the batch norms and sum the three convs into one 3x3 conv.

Run: python examples/make_example.py   (deterministic: same bytes every time)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).with_name("inception_block.onnx")
C_IN, SIZE, CLASSES = 32, 28, 10


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(2019)  # TASO's year
    nodes, inits = [], []

    def tensor(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def conv(name, x, cin, cout, k):
        w = tensor(f"{name}.weight", rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k)))
        b = tensor(f"{name}.bias", rng.standard_normal(cout) * 0.05)
        nodes.append(helper.make_node("Conv", [x, w, b], [name], name=name, pads=[k // 2] * 4))
        nodes.append(helper.make_node("Relu", [name], [f"{name}.relu"], name=f"{name}.relu"))
        return f"{name}.relu"

    def asymmetric(name, x, cin, cout):
        """ACNet's training-time 3x3 block: 3x3, 1x3 and 3x1 convs of one input, each with a batch norm, summed."""
        total = None
        for kh, kw in ((3, 3), (1, 3), (3, 1)):
            part = f"{name}.{kh}x{kw}"
            w = tensor(f"{part}.weight", rng.standard_normal((cout, cin, kh, kw)) * np.sqrt(2.0 / (cin * kh * kw)))
            nodes.append(helper.make_node("Conv", [x, w], [part], name=part, pads=[kh // 2, kw // 2] * 2))
            norm = [tensor(f"{part}.bn.scale", rng.uniform(0.5, 1.5, cout)),
                    tensor(f"{part}.bn.bias", rng.standard_normal(cout) * 0.05),
                    tensor(f"{part}.bn.mean", rng.standard_normal(cout) * 0.05),
                    tensor(f"{part}.bn.var", rng.uniform(0.5, 1.5, cout))]
            nodes.append(helper.make_node("BatchNormalization", [part, *norm], [f"{part}.bn"], name=f"{part}.bn"))
            if total is None:
                total = f"{part}.bn"
            else:
                nodes.append(helper.make_node("Add", [total, f"{part}.bn"], [f"{part}.sum"], name=f"{part}.sum"))
                total = f"{part}.sum"
        nodes.append(helper.make_node("Relu", [total], [f"{name}.relu"], name=f"{name}.relu"))
        return f"{name}.relu"

    b1 = conv("branch1x1", "input", C_IN, 16, 1)
    b2 = asymmetric("branch3x3", conv("branch3x3_reduce", "input", C_IN, 16, 1), 16, 24)
    b3 = conv("branch5x5", conv("branch5x5_reduce", "input", C_IN, 8, 1), 8, 8, 5)
    nodes.append(helper.make_node("MaxPool", ["input"], ["pool"], name="pool", kernel_shape=[3, 3],
                                  strides=[1, 1], pads=[1, 1, 1, 1]))
    b4 = conv("branch_pool", "pool", C_IN, 8, 1)
    channels = 16 + 24 + 8 + 8
    nodes.append(helper.make_node("Concat", [b1, b2, b3, b4], ["concat"], name="concat", axis=1))
    bn = [tensor("bn.scale", rng.uniform(0.5, 1.5, channels)), tensor("bn.bias", rng.standard_normal(channels) * 0.05),
          tensor("bn.mean", rng.standard_normal(channels) * 0.05), tensor("bn.var", rng.uniform(0.5, 1.5, channels))]
    nodes.append(helper.make_node("BatchNormalization", ["concat", *bn], ["bn"], name="bn"))
    nodes.append(helper.make_node("Relu", ["bn"], ["bn.relu"], name="bn.relu"))
    nodes.append(helper.make_node("GlobalAveragePool", ["bn.relu"], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flat"))
    fc_w = tensor("fc.weight", rng.standard_normal((CLASSES, channels)) / np.sqrt(channels))
    fc_b = tensor("fc.bias", rng.standard_normal(CLASSES) * 0.05)
    nodes.append(helper.make_node("Gemm", ["flat", fc_w, fc_b], ["logits"], name="fc", transB=1))
    inits.append(numpy_helper.from_array(np.array([3], np.int64), "k"))
    nodes.append(helper.make_node("TopK", ["logits", "k"], ["scores", "classes"], name="top3", axis=1))

    graph = helper.make_graph(
        nodes, "inception_block",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, C_IN, SIZE, SIZE])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 3]),
         helper.make_tensor_value_info("classes", TensorProto.INT64, [1, 3])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="taso_relay")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    onnx.save(build(), OUT)
    print(f"wrote {OUT} ({OUT.stat().st_size / 1024:.1f} KB)")
