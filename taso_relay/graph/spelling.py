"""What the spelling steps share: each node that ends a known spelling of an operator becomes that operator."""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from .graph import Graph, Ref, make_node

# (graph, node, readers per node index) -> (operator, its inputs, attributes) where the node ends a spelling of it
Spelling = Callable[[Graph, object, Sequence[int]], Optional[tuple[str, Sequence[Ref], dict]]]


def spell_each(graph: Graph, spelling: Spelling) -> tuple[Graph, int]:
    """`graph` with every node `spelling` recognises made the operator it names (the spelling's other nodes,
    read by nothing else, drop out); how many were."""
    readers = graph.readers
    nodes, found = list(graph.nodes), 0
    for i, node in enumerate(graph.nodes):
        spelled = spelling(graph, node, readers)
        if spelled is not None:
            op, inputs, attrs = spelled
            nodes[i] = make_node(op, inputs, [graph.type_of(r) for r in inputs], attrs)
            found += 1
    return (graph.rebuilt(nodes, list(graph.outputs)), found) if found else (graph, 0)
