"""Find channel shuffles spelled reshape, transpose, reshape, and spell them as the one operator.

Not a rewrite that needs a proof: `channel_shuffle` is defined as that spelling (graph/ops/shuffle.py
computes it so). The layout step spells them first so that a transpose can move through them.
"""
from __future__ import annotations

from .graph import Graph, make_node
from .ops.shuffle import NCHW_PERM


def spell_channel_shuffles(graph: Graph) -> tuple[Graph, int]:
    """`graph` with every reshape (N, g, C/g, H, W) -> transpose (0, 2, 1, 3, 4) -> reshape (N, C, H, W)
    whose middle values nothing else reads made one channel_shuffle; how many were."""
    readers: dict[int, int] = {}
    for node in graph.nodes:
        for r in node.inputs:
            readers[r.node] = readers.get(r.node, 0) + 1
    for r in graph.outputs:
        readers[r.node] = readers.get(r.node, 0) + 1
    nodes, found = list(graph.nodes), 0
    for i, node in enumerate(graph.nodes):
        groups = _groups(graph, node, readers)
        if groups is not None:
            source = graph.nodes[graph.nodes[node.inputs[0].node].inputs[0].node].inputs[0]
            nodes[i] = make_node("channel_shuffle", [source], [graph.type_of(source)], {"groups": groups})
            found += 1
    return (graph.rebuilt(nodes, list(graph.outputs)), found) if found else (graph, 0)


def _groups(graph: Graph, node, readers) -> int | None:
    if node.op != "reshape" or len(node.types[0].shape) != 4:
        return None
    t = graph.nodes[node.inputs[0].node]
    if t.op != "transpose" or tuple(t.attr("perm")) != NCHW_PERM or readers.get(node.inputs[0].node) != 1:
        return None
    r = graph.nodes[t.inputs[0].node]
    if r.op != "reshape" or readers.get(t.inputs[0].node) != 1:
        return None
    x_type = graph.type_of(r.inputs[0])
    if len(x_type.shape) != 4 or node.types[0].shape != x_type.shape:
        return None
    n, c, h, w = x_type.shape
    g = r.types[0].shape[1] if len(r.types[0].shape) == 5 else 0
    if g < 1 or r.types[0].shape != (n, g, c // g, h, w) or c % g:
        return None
    return g
