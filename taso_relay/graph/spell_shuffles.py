"""Find channel and pixel shuffles spelled reshape, transpose, reshape, and spell them as one operator.

Not a rewrite that needs a proof: `channel_shuffle`, `depth_to_space` and `space_to_depth` are defined as those
spellings (graph/ops/shuffle.py computes them so). The layout step spells them first so that a transpose can
move through them.
"""
from __future__ import annotations

from .graph import Graph
from .ops.shuffle import DEPTH, NCHW_PERM, SHUFFLES, SPACE, pixel_spelling
from .spelling import spell_each


def spell_shuffles(graph: Graph) -> tuple[Graph, int]:
    """`graph` with every NCHW reshape -> transpose -> reshape that is a channel shuffle or a pixel shuffle
    (or unshuffle), and whose middle values nothing else reads, made one operator; how many were."""
    return spell_each(graph, _shuffle)


def _shuffle(graph: Graph, node, readers) -> tuple[str, list, dict] | None:
    """The operator, its input and attributes `node` ends the spelling of, if it does."""
    if node.op != "reshape" or len(node.types[0].shape) != 4:
        return None
    t = graph.nodes[node.inputs[0].node]
    if t.op != "transpose" or readers[node.inputs[0].node] != 1:
        return None
    r = graph.nodes[t.inputs[0].node]
    if r.op != "reshape" or readers[t.inputs[0].node] != 1:
        return None
    x, split, perm, out = graph.type_of(r.inputs[0]).shape, r.types[0].shape, tuple(t.attr("perm")), node.types[0].shape
    if len(x) != 4:
        return None
    n, c, h, w = x
    source = [r.inputs[0]]
    g = split[1] if len(split) == 5 else 0
    if perm == NCHW_PERM and out == x and g >= 1 and c % g == 0 and split == (n, g, c // g, h, w):
        return "channel_shuffle", source, {"groups": g}
    for op in SHUFFLES if len(split) == 6 else ():
        for mode in ("CRD", "DCR"):
            names = (DEPTH["NCHW", mode] if op == "depth_to_space" else SPACE["NCHW"]).split()
            block = (split[names.index("bh")], split[names.index("bw")])
            if min(block) >= 1 and _spells(op, x, block, mode, (split, perm, out)):
                return op, source, {"block": block, "mode": mode}
    return None


def _spells(op: str, x, block, mode: str, spelled) -> bool:
    """Whether `spelled` (the rank-6 shape, the transpose, the output shape) is `op` of an NCHW input `x`."""
    n, c, h, w = x
    if (c % (block[0] * block[1]) if op == "depth_to_space" else h % block[0] or w % block[1]):
        return False
    return pixel_spelling(op, x, block, mode, "NCHW") == spelled
