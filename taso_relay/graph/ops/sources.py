"""Graph inputs, weights, the constant tensors of TASO's identities, and opaque calls."""
from __future__ import annotations

import numpy as np

from ..types import TensorType
from . import modular
from .registry import REQUIRED, OpDef, Pattern, fail, register


def _declared(types, attrs):
    return [TensorType(attrs["shape"], attrs["dtype"])]


register(OpDef("input", 0, {"name": REQUIRED, "shape": REQUIRED, "dtype": "float32"}, _declared, None,
               pattern=Pattern.SOURCE, doc="An activation fed at run time."))
register(OpDef("weight", 0, {"name": REQUIRED, "shape": REQUIRED, "dtype": "float32"}, _declared, None,
               pattern=Pattern.SOURCE, doc="A constant parameter; its value lives in Graph.values."))

CONSTANT_KINDS = ("identity_conv", "identity_matrix", "ones", "avg_kernel")


def constant_infer(types, attrs):
    kind, shape = attrs["kind"], tuple(attrs["shape"])
    if kind not in CONSTANT_KINDS:
        raise fail("constant", f"unknown kind '{kind}'", types)
    if kind in ("identity_conv", "avg_kernel") and len(shape) != 4:
        raise fail("constant", f"{kind} needs an OIHW shape, got {list(shape)}", types)
    if kind == "identity_matrix" and (len(shape) != 2 or shape[0] != shape[1]):
        raise fail("constant", f"identity_matrix needs a square shape, got {list(shape)}", types)
    return [TensorType(shape, attrs["dtype"])]


def constant_value(kind, shape, dtype, p=None):
    """Identity conv kernels pick in-channel o % I at the centre tap (works for any groups)."""
    if kind == "ones":
        return np.ones(shape, np.int64 if p else dtype)
    if kind == "identity_matrix":
        return np.eye(shape[0], dtype=np.int64 if p else dtype)
    o, i, kh, kw = shape
    out = np.zeros(shape, np.int64 if p else dtype)
    if kind == "identity_conv":
        for c in range(o):
            out[c, c % i, kh // 2, kw // 2] = 1
        return out
    fill = modular.inverse(kh * kw, p) if p else 1.0 / (kh * kw)
    for c in range(o):
        out[c, c % i, :, :] = fill
    return out


register(OpDef(
    "constant", 0, {"kind": REQUIRED, "shape": REQUIRED, "dtype": "float32"}, constant_infer,
    lambda xs, a: [constant_value(a["kind"], a["shape"], a["dtype"])],
    lambda xs, a, p: [constant_value(a["kind"], a["shape"], a["dtype"], p)],
    pattern=Pattern.SOURCE,
    doc="Constant tensors that make TASO's identities expressible: identity conv kernel, "
        "identity matrix, all-ones, and the averaging kernel (avg-pool as depthwise conv).",
))


def opaque_infer(types, attrs):
    return [TensorType(shape, dtype) for shape, dtype in attrs["types"]]


register(OpDef(
    "opaque", None, {"ref": REQUIRED, "types": REQUIRED, "label": ""}, opaque_infer, None,
    pattern=Pattern.OPAQUE,
    doc="A call the graph form does not model; `ref` keys the original call in Graph.payloads, "
        "which the bridge emits back verbatim.",
))
