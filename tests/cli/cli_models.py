"""Tiny ONNX models written by the CLI tests."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def small_cnn(batch=1, norm: bool = False) -> onnx.ModelProto:
    """Two conv branches (relu, 1x1 and 3x3; norm: a batch norm after the 3x3), concat, max pool, flatten,
    matmul, softmax."""
    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.uniform(-0.5, 0.5, size=s).astype(np.float32)  # noqa: E731
    inits = [_init("w1", f32(4, 3, 1, 1)), _init("b1", f32(4)), _init("w2", f32(4, 3, 3, 3)), _init("b2", f32(4)),
             _init("shape", np.array([batch, 8 * 4 * 4], np.int64)), _init("fc", f32(128, 5)), _init("fcb", f32(5))]
    bn = []
    if norm:
        inits += [_init("gamma", f32(4) + 1), _init("beta", f32(4)), _init("mean", f32(4)), _init("var", f32(4) + 1)]
        bn = [helper.make_node("BatchNormalization", ["c2", "gamma", "beta", "mean", "var"], ["n2"])]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["x", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        *bn,
        helper.make_node("Relu", ["n2" if norm else "c2"], ["r2"]),
        helper.make_node("Concat", ["r1", "r2"], ["cat"], axis=1),
        helper.make_node("MaxPool", ["cat"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["pool", "shape"], ["flat"]),
        helper.make_node("MatMul", ["flat", "fc"], ["mm"]),
        helper.make_node("Add", ["mm", "fcb"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    graph = helper.make_graph(nodes, "small_cnn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model


def dynamic_batch() -> onnx.ModelProto:
    model = small_cnn()
    model.graph.input[0].type.tensor_type.shape.dim[0].Clear()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    return model


def einsum(head: bool = False) -> onnx.ModelProto:
    """An Einsum, which TVM imports as call_tir of topi's einsum; summing i in x alone, it is no matmul: opaque,
    and with no ONNX form here. With `head`, a second output: x flattened, a Linear and a BatchNorm1d (a fold)."""
    nodes = [helper.make_node("Einsum", ["x", "w"], ["e"], equation="bij,jk->bk"),
             helper.make_node("Relu", ["e"], ["y"])]
    inits = [_init("w", np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5))]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])]
    if head:
        nodes += [helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("Gemm", ["f", "g", "gb"], ["h"]),
                  helper.make_node("BatchNormalization", ["h", "s", "b", "m", "v"], ["z"])]
        inits += [_init("g", np.linspace(-1, 1, 96, dtype=np.float32).reshape(12, 8))]
        inits += [_init(name, np.linspace(k / 4 + 0.5, k / 4 + 1, 8, dtype=np.float32))
                  for k, name in enumerate(("gb", "s", "b", "m", "v"))]
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 8]))
    graph = helper.make_graph(nodes, "einsum", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def dynamic_pad() -> onnx.ModelProto:
    """PyTorch-style padding computed in the graph: pad H and W up to 10 from Shape(x), by reflection
    (ReflectionPad2d; TVM imports it as call_tir of topi's mirror_pad, read as the graph's mirror_pad)."""
    inits = [_init("target", np.array([10], np.int64)), _init("idx", np.array([2, 3], np.int64)),
             _init("zeros", np.zeros(2, np.int64)), _init("zeros2", np.zeros(2, np.int64)),
             _init("two", np.array(2, np.int64)), _init("w", np.ones((2, 3, 3, 3), np.float32) / 27)]
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "idx"], ["hw"], axis=0),
        helper.make_node("Sub", ["target", "hw"], ["need"]),
        helper.make_node("Div", ["need", "two"], ["half"]),
        helper.make_node("Sub", ["need", "half"], ["rest"]),
        helper.make_node("Concat", ["zeros", "half", "zeros2", "rest"], ["pads"], axis=0),
        helper.make_node("Pad", ["x", "pads"], ["padded"], mode="reflect"),
        helper.make_node("Conv", ["padded", "w"], ["y"]),
        helper.make_node("Sigmoid", ["y"], ["out"]),
    ]
    graph = helper.make_graph(nodes, "dynamic_pad",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 7, 8])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 2, "H", "W"])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model


def save(model, path):
    onnx.save(model, str(path))
    return path
