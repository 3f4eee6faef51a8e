"""Broadcasts an element-wise operator makes anyway, dropped before the layout step.

PyTorch code often writes a gate as `x * y.expand_as(x)` (the classic squeeze-and-excitation with linear
layers, timm's ECA), which exports an Expand (`broadcast_to`) of the (N, C, 1, 1) gate before the multiply.
The multiply broadcasts the gate the same way without it, and the layout rules carry a transpose through an
operator whose other operand is a gate (l-mul-gate), not through an expanded copy of it.
"""
from __future__ import annotations

from .graph import Graph, make_node
from .ops.registry import get_op
from .types import ShapeError


def drop_implied_broadcasts(graph: Graph) -> tuple[Graph, int]:
    """`graph` with each element-wise binary operator reading the tensor a `broadcast_to` expands instead of its
    expansion, where the result has the same type; how many operators read one (broadcasts nobody else reads
    drop out)."""
    nodes, found = list(graph.nodes), 0
    for i, node in enumerate(graph.nodes):
        if "binary" not in get_op(node.op).tags:
            continue
        inputs, kept = list(node.inputs), None
        for k, ref in enumerate(node.inputs):
            expand = graph.nodes[ref.node]
            if expand.op != "broadcast_to":
                continue
            trial = inputs[:k] + [expand.inputs[0]] + inputs[k + 1:]
            try:
                new = make_node(node.op, trial, [graph.type_of(r) for r in trial], node.attr_dict)
            except ShapeError:
                continue
            if new.types == node.types:
                inputs, kept = trial, new
        if kept is not None:
            nodes[i] = kept
            found += 1
    return (graph.rebuilt(nodes, list(graph.outputs)), found) if found else (graph, 0)
