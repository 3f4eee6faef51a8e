"""Find group norms spelled as PyTorch's exporters write them, and spell each as one operator.

torch.onnx writes GroupNorm as reshape (N, G, -1), InstanceNormalization, reshape back (then the per-channel
affine), and TVM imports the instance norm as mean, variance, add eps, sqrt, subtract, divide, multiply by
the per-group scale and add its bias. No layout rule can move a transpose through the reshape to (N, G, -1)
(its elements are grouped by NCHW's order), so the layout step spells the whole as `exported_group_norm`, which
is defined as that spelling (graph/ops/norm.py computes it so): not a rewrite that needs a proof.
"""
from __future__ import annotations

import math

from .graph import Graph, make_node
from .spelling import spell_each
from .types import ShapeError


def spell_group_norms(graph: Graph) -> tuple[Graph, int]:
    """`graph` with every group norm spelled as above, whose middle values nothing else reads, made one
    `exported_group_norm` node; how many were."""
    return spell_each(graph, _exported_group_norm)


def _exported_group_norm(graph: Graph, end, readers):
    """("exported_group_norm", [x, eps, scale, bias], its attributes) where `end` reshapes a group norm of x
    back to x's shape, else None."""
    if end.op != "reshape":
        return None
    one = lambda ref: _only_reader(graph, ref, readers)  # noqa: E731
    shifted = _chain(graph, one(end.inputs[0]), "add", "mul", readers)  # the bias added
    scaled = _chain(graph, shifted and one(shifted[0]), "mul", "div", readers)  # the scale multiplied
    quotient = scaled and one(scaled[0])
    if quotient is None:
        return None
    centred, root = one(quotient.inputs[0]), one(quotient.inputs[1])
    if centred is None or root is None or centred.op != "sub" or root.op != "sqrt":
        return None
    lifted = _chain(graph, one(root.inputs[0]), "add", "variance", readers)  # eps added
    variance, mean, grouped = lifted and one(lifted[0]), one(centred.inputs[1]), centred.inputs[0]
    if variance is None or mean is None or readers[grouped.node] != 3:
        return None
    if any(n.op != op or n.inputs[0] != grouped or n.attr("axes") != (2,) or not n.attr("keepdims")
           for n, op in ((mean, "mean"), (variance, "variance"))):
        return None
    split = graph.nodes[grouped.node]
    inputs = [split.inputs[0], lifted[1], scaled[1], shifted[1]]
    shape, groups = graph.type_of(inputs[0]).shape, graph.type_of(inputs[2]).shape[:1]
    if split.op != "reshape" or len(shape) < 3 or end.types[0].shape != shape or not groups \
            or split.types[0].shape != (shape[0], groups[0], math.prod(shape[1:]) // groups[0]):
        return None
    try:
        make_node("exported_group_norm", inputs, [graph.type_of(r) for r in inputs], {"axis": 1})
    except ShapeError:  # another shape (a per-channel scale, a non-scalar eps): not this spelling
        return None
    return "exported_group_norm", inputs, {"axis": 1}


def _only_reader(graph: Graph, ref, readers):
    """The node `ref` points at, where it has one output and nothing else reads it; else None."""
    if ref is None or readers[ref.node] != 1 or len(graph.nodes[ref.node].types) != 1:
        return None
    return graph.nodes[ref.node]


def _chain(graph: Graph, node, op: str, follows: str, readers):
    """(the operand `follows` computed, the other operand) of the commutative `op` node, else None."""
    if node is None or node.op != op:
        return None
    a, b = node.inputs
    for chain, other in ((a, b), (b, a)):
        if readers[chain.node] == 1 and graph.nodes[chain.node].op == follows:
            return chain, other
    return None
