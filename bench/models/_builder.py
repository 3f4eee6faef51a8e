"""Shared helpers for spelling benchmark models as ONNX graphs in plain Python.

Why this exists: the benchmark suite must be reproducible without torch or
downloads, so every model is written out with ``onnx.helper``.  A
:class:`GraphBuilder` keeps that short: it gives tensors unique readable
names, creates seeded random weights, and offers the few layer helpers the
models share (conv+bn+relu, pools, linear layers, classifier head).

Weight conventions (chosen so activations stay finite and of order one):

* conv / linear weights: He normal, ``std = sqrt(2 / fan_in)`` (``gain`` 1
  instead of 2 where the input is not the output of a ReLU);
* biases and BN shifts: small normal (``SMALL_STD``);
* BN scale ``gamma`` and running variance: uniform in ``UNIT_RANGE`` (around
  one, strictly positive); running mean: small normal.

Inference-mode BN with random statistics does not normalise anything, so a
sum of two branches doubles the activation variance.  Chained over a deep
residual network that reaches values ~1e4; models therefore pass
``gamma_scale`` < 1 to the last BN of a summed branch (the same idea as
torchvision's ``zero_init_residual``, but nonzero so the branch still matters).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
# IR version 8 is the one that introduced opset 17; pinning it keeps the
# models loadable by older runtimes than the installed onnx would target.
IR_VERSION = 8
PRODUCER = "taso_relay.bench"

RELU_GAIN = 2.0
LINEAR_GAIN = 1.0
SMALL_STD = 0.05
UNIT_RANGE = (0.5, 1.5)

IntOrPair = int | tuple[int, int]


def _pair(v: IntOrPair) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


class GraphBuilder:
    """Accumulates nodes and initializers; ``finish`` turns them into a model.

    Every helper returns the name of the tensor it produced.  Node and tensor
    names are derived from the ``name`` argument and made unique by a counter
    suffix, so the exported graph stays easy to read in Netron or a dump.
    """

    def __init__(self, graph_name: str, seed: int = 0):
        self.graph_name = graph_name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self._taken: set[str] = set()

    # ------------------------------------------------------------ naming
    def unique(self, base: str) -> str:
        """``base``, or ``base_N`` with the first free N (one namespace for all)."""
        name, count = base, 0
        while name in self._taken:
            count += 1
            name = f"{base}_{count}"
        self._taken.add(name)
        return name

    # ------------------------------------------------------------ tensors
    def add_input(self, shape: Sequence[int], name: str = "input") -> str:
        name = self.unique(name)
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        return name

    def const(self, value, name: str) -> str:
        """Adds ``value`` (any numpy-convertible) as an initializer."""
        name = self.unique(name)
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def ints(self, values: Sequence[int], name: str) -> str:
        """An int64 1-D constant, e.g. a Reshape target shape."""
        return self.const(np.asarray(values, dtype=np.int64), name)

    def scalar(self, value: float, name: str) -> str:
        return self.const(np.asarray(value, dtype=np.float32), name)

    def he_weight(self, shape: Sequence[int], fan_in: int, name: str,
                  gain: float = RELU_GAIN) -> str:
        """Normal weights with variance ``gain / fan_in``: gain 2 keeps the
        scale after a ReLU-rectified input, gain 1 after a non-rectified one."""
        std = math.sqrt(gain / fan_in)
        return self.const(self._normal(shape, std), name)

    def small(self, shape: Sequence[int], name: str) -> str:
        return self.const(self._normal(shape, SMALL_STD), name)

    def near_one(self, shape: Sequence[int], name: str) -> str:
        return self.const(self.rng.uniform(*UNIT_RANGE, size=shape).astype(np.float32), name)

    def _normal(self, shape: Sequence[int], std: float) -> np.ndarray:
        return (self.rng.standard_normal(shape) * std).astype(np.float32)

    # ------------------------------------------------------------ nodes
    def op(self, op_type: str, inputs: Sequence[str], name: str | None = None,
           num_outputs: int = 1, **attrs):
        """Appends one node; returns its output name (or list of names)."""
        node_name = self.unique(name or op_type.lower())
        outputs = [node_name] if num_outputs == 1 else [
            f"{node_name}:{i}" for i in range(num_outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs,
                                           name=node_name, **attrs))
        return outputs[0] if num_outputs == 1 else outputs

    def relu(self, x: str, name: str = "relu") -> str:
        return self.op("Relu", [x], name)

    def add(self, a: str, b: str, name: str = "add") -> str:
        return self.op("Add", [a, b], name)

    def mul(self, a: str, b: str, name: str = "mul") -> str:
        return self.op("Mul", [a, b], name)

    def concat(self, xs: Sequence[str], axis: int = 1, name: str = "concat") -> str:
        return self.op("Concat", xs, name, axis=axis)

    # ------------------------------------------------------------ CNN layers
    def conv(self, x: str, cin: int, cout: int, kernel: IntOrPair, stride: IntOrPair = 1,
             pad: IntOrPair = 0, groups: int = 1, bias: bool = False,
             gain: float = RELU_GAIN, name: str = "conv") -> str:
        kh, kw = _pair(kernel)
        ph, pw = _pair(pad)
        fan_in = cin // groups * kh * kw
        weight = self.he_weight([cout, cin // groups, kh, kw], fan_in, f"{name}.weight", gain)
        inputs = [x, weight]
        if bias:
            inputs.append(self.small([cout], f"{name}.bias"))
        return self.op("Conv", inputs, name, kernel_shape=[kh, kw], strides=list(_pair(stride)),
                       pads=[ph, pw, ph, pw], group=groups)

    def batchnorm(self, x: str, channels: int, eps: float = 1e-5, gamma_scale: float = 1.0,
                  name: str = "bn") -> str:
        """Inference-mode BN; ``gamma_scale`` < 1 damps a residual branch (see module doc)."""
        gamma = self.rng.uniform(*UNIT_RANGE, size=channels) * gamma_scale
        params = [self.const(gamma.astype(np.float32), f"{name}.weight"),
                  self.small([channels], f"{name}.bias"),
                  self.small([channels], f"{name}.running_mean"),
                  self.near_one([channels], f"{name}.running_var")]
        return self.op("BatchNormalization", [x, *params], name, epsilon=eps)

    def conv_bn(self, x: str, cin: int, cout: int, kernel: IntOrPair, stride: IntOrPair = 1,
                pad: IntOrPair = 0, groups: int = 1, relu: bool = True, eps: float = 1e-5,
                gamma_scale: float = 1.0, name: str = "conv") -> str:
        """Conv (no bias) -> BatchNormalization [-> Relu], the torchvision unit."""
        y = self.conv(x, cin, cout, kernel, stride, pad, groups, name=name)
        y = self.batchnorm(y, cout, eps, gamma_scale, name=f"{name}.bn")
        return self.relu(y, f"{name}.relu") if relu else y

    def max_pool(self, x: str, kernel: int, stride: int, pad: int = 0,
                 ceil_mode: bool = False, name: str = "maxpool") -> str:
        return self.op("MaxPool", [x], name, kernel_shape=[kernel, kernel],
                       strides=[stride, stride], pads=[pad] * 4, ceil_mode=int(ceil_mode))

    def avg_pool(self, x: str, kernel: int, stride: int, pad: int = 0,
                 count_include_pad: bool = False, name: str = "avgpool") -> str:
        return self.op("AveragePool", [x], name, kernel_shape=[kernel, kernel],
                       strides=[stride, stride], pads=[pad] * 4,
                       count_include_pad=int(count_include_pad))

    def classifier(self, x: str, channels: int, classes: int, name: str = "fc") -> str:
        """GlobalAveragePool -> Flatten -> Gemm (as torchvision models export);
        the Gemm result is the tensor named ``output``."""
        y = self.op("GlobalAveragePool", [x], "avgpool")
        y = self.op("Flatten", [y], "flatten", axis=1)
        w = self.he_weight([classes, channels], channels, f"{name}.weight")
        b = self.small([classes], f"{name}.bias")
        return self.op("Gemm", [y, w, b], "output", transB=1)

    # ------------------------------------------------------------ dense layers
    def linear(self, x: str, fin: int, fout: int, name: str = "linear") -> str:
        """MatMul + Add, the way PyTorch exports nn.Linear on a 3-D input."""
        w = self.he_weight([fin, fout], fin, f"{name}.weight")
        y = self.op("MatMul", [x, w], f"{name}.matmul")
        return self.op("Add", [y, self.small([fout], f"{name}.bias")], name)

    # ------------------------------------------------------------ result
    def finish(self, outputs: Sequence[str]) -> onnx.ModelProto:
        """Builds the model and fills value_info/output shapes by inference."""
        graph = helper.make_graph(
            self.nodes, self.graph_name, self.inputs,
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
            self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  ir_version=IR_VERSION, producer_name=PRODUCER)
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
        for out in model.graph.output:
            dims = out.type.tensor_type.shape.dim
            if not dims or any(not d.HasField("dim_value") for d in dims):
                raise ValueError(f"output {out.name} has no static shape after inference")
        return model


def count_params(model: onnx.ModelProto) -> int:
    """Number of float weights; int64 shape constants and float scalars
    (e.g. the 0.5 in GELU) are not counted as parameters."""
    return sum(int(np.prod(t.dims)) for t in model.graph.initializer
               if t.data_type == TensorProto.FLOAT and len(t.dims) > 0)
