"""What the ONNX exporter writes with: unique names, initializers, nodes; and its one error."""
from __future__ import annotations

from typing import Sequence

import numpy as np


class ExportError(Exception):
    """The graph has no ONNX form (the message says which operators)."""


def onnx_package():
    """The onnx package, imported only when an export is asked for."""
    import onnx
    return onnx


def elem_type(dtype: str) -> int:
    from onnx import helper
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


class Writer:
    """Accumulates ONNX nodes and initializers with unique names."""

    def __init__(self, reserved=()):
        self.nodes, self.inits, self.count = [], [], 0
        self.module = None  # the IRModule whose PrimFuncs opaque call_tirs call (export_graph's module)
        # the model's own input and output names, which a made-up name must not take ("add_5", "w_1")
        self.reserved = set(reserved)

    def name(self, base: str) -> str:
        self.count += 1
        while f"{base}_{self.count}" in self.reserved:
            self.count += 1
        return f"{base}_{self.count}"

    def const(self, value, base: str = "c") -> str:
        from onnx import numpy_helper
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value, order="C"), name))
        return name

    def ints(self, values) -> str:
        return self.const(np.asarray(list(values), dtype=np.int64), "ints")

    def scalar(self, value, dtype: str) -> str:
        return self.const(np.asarray(value, dtype=dtype), "scalar")

    def op(self, op_type: str, inputs: Sequence[str], n_out: int = 1, **attrs) -> list[str]:
        from onnx import helper
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=self.name("node"), **attrs))
        return outs

    def one(self, op_type: str, inputs: Sequence[str], **attrs) -> str:
        return self.op(op_type, inputs, 1, **attrs)[0]
