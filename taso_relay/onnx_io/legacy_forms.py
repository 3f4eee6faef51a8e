"""Older ONNX forms TVM 0.27's importer misreads, made explicit before it reads them, or named.

Found on hand-written old-opset files (the ONNX model zoo's kind): a node's trailing optional outputs left as ""
(TVM counts them missing); Resize-11 with an empty `scales` beside its `sizes` (TVM: "only one of scales and
sizes"); nearest Upsample (opsets 7-9), which TVM rounds where ONNX floors (9 off on an arange); Add/Mul/Sub/Div
with opset 6's `broadcast=1, axis=k`, which TVM broadcasts numpy's way, ignoring the axis.
"""
from __future__ import annotations

from .errors import InputError

LEGACY_BROADCAST = ("Add", "Sub", "Mul", "Div")


def node_attrs(node) -> dict:
    """An ONNX node's attributes by name, as Python values."""
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def drop_empty_trailing_outputs(model) -> int:
    """Optional outputs named "" at the end of a node's outputs are not outputs at all: left out. How many."""
    dropped = 0
    for node in model.graph.node:
        while len(node.output) > 1 and node.output[-1] == "":
            del node.output[-1]
            dropped += 1
    return dropped


def drop_empty_resize_scales(model) -> int:
    """A Resize with `sizes` and an empty `scales` initializer (the opset-11 form of 'sizes only'): its scales
    input named "" instead, as opset 13 writes it. How many."""
    empty = {t.name for t in model.graph.initializer if len(t.dims) == 1 and t.dims[0] == 0}
    count = 0
    for node in model.graph.node:
        if node.op_type == "Resize" and len(node.input) == 4 and node.input[2] in empty and node.input[3]:
            node.input[2] = ""
            count += 1
    return count


def nearest_upsample(model) -> str:
    """The first nearest Upsample's name ("" if none): TVM's importer rounds where ONNX floors."""
    for node in model.graph.node:
        if node.op_type == "Upsample":
            mode = node_attrs(node).get("mode", b"nearest")
            if (mode.decode() if isinstance(mode, bytes) else mode) == "nearest":
                return node.name or node.output[0]
    return ""


def refuse_axis_broadcast(model, shapes: dict, path, opset: int) -> None:
    """InputError for opset 6's broadcast along an axis other than the trailing ones (`broadcast=1, axis=k` with
    k != rank(A) - rank(B)), which TVM's importer reads as numpy's trailing broadcast: wrong numbers."""
    ranks = {**{name: len(s) for name, s in shapes.items()}, **{t.name: len(t.dims) for t in model.graph.initializer}}
    for node in model.graph.node:
        attrs = node_attrs(node)
        if node.op_type not in LEGACY_BROADCAST or not attrs.get("broadcast") or "axis" not in attrs:
            continue
        a, b = (ranks.get(name) for name in node.input[:2])
        if a is None or b is None or attrs["axis"] % max(a, 1) != a - b:
            raise InputError(f"{path}: {node.op_type} node '{node.name or node.output[0]}' broadcasts along axis "
                             f"{attrs['axis']} (opset {opset}'s broadcast=1, axis=...), which TVM's importer "
                             "reads as numpy's trailing broadcast; export the model at opset 7 or later")
