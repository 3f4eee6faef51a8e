"""Common subexpressions: one node for each (operator, attributes, operands).

Imported models compute the same thing twice (NASNet applies relu to one
tensor in each branch that reads it: 36 duplicate relus and 10 duplicate
pools); each copy is a kernel launch at run time. Merging them is sound for
every modelled operator, which are pure. Opaque calls are kept apart: a call
the graph form does not model may have effects.
"""
from __future__ import annotations

from .graph import Graph, Ref


def merge_common_subexpressions(graph: Graph) -> tuple[Graph, int]:
    """`graph` with duplicate nodes merged into their first occurrence, and how many were merged."""
    first: dict[tuple, int] = {}
    where: list[int] = []  # old node -> the node it is merged into
    merged = 0
    for i, node in enumerate(graph.nodes):
        inputs = tuple(Ref(where[r.node], r.index) for r in node.inputs)
        key = (node.op, node.attrs, inputs)
        if node.op in ("opaque", "input") or key not in first:
            first.setdefault(key, i)
            where.append(i)
        else:
            where.append(first[key])
            merged += 1
    if not merged:
        return graph, 0
    # every node reads the survivors; the merged-away ones are then dead, and compact drops them
    nodes = [type(n)(n.op, n.attrs, tuple(Ref(where[r.node], r.index) for r in n.inputs), n.types)
             for n in graph.nodes]
    return graph.rebuilt(nodes, [Ref(where[r.node], r.index) for r in graph.outputs]), merged
