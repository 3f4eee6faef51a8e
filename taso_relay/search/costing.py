"""The cost protocol the search needs, and costing a rewrite locally.

The search asks one thing of a cost model: `graph_cost(graph) -> float`
(seconds, or any unit as long as it is additive over kernels) -- every model
of taso_relay.cost has it. A plain callable `graph -> float` is accepted too.

Costing every candidate graph in full would cost O(nodes) per candidate. A
rewrite changes a few nodes, and a kernel's cost (fusion included) depends on
its neighbourhood only, so `LocalCost` prices a candidate as the cost of the
*region* around the match -- the matched nodes, everything within `hops`
edges, and the element-wise nodes around them up to the kernels they fuse
into, cut out as a small graph whose boundary values become inputs (or
weights, when weight-only) -- after the rewrite minus before. On the benchmark
models this equals the difference of the full costs to float rounding under
the fusion-aware models. The search recosts its result in full at the end, so
the cost it reports is always exact.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Protocol, runtime_checkable

from ..cost.fusion import joins_producer
from ..graph import Graph, Node, Ref
from ..subst.apply import RewriteRejected, apply
from ..subst.index import SOURCE_OPS, index_of
from ..subst.match import Match


@runtime_checkable
class SupportsGraphCost(Protocol):
    """All the search needs of a cost model (taso_relay.cost's models have more)."""

    def graph_cost(self, graph: Graph) -> float: ...


CostFn = Callable[[Graph], float]


def cost_function(cost: SupportsGraphCost | CostFn) -> CostFn:
    """The `graph -> float` function of a cost model or of a plain callable."""
    method = getattr(cost, "graph_cost", None)
    if callable(method):
        return method
    if callable(cost):
        return cost
    raise TypeError(f"a cost model needs graph_cost(graph) -> float; got {type(cost).__name__}")


class Region(NamedTuple):
    graph: Graph  # the region as a standalone graph
    match: Match  # the match, in the region's numbering
    nodes: frozenset[int]  # the region's nodes, in the numbering of the graph it was cut from


class LocalCost:
    """Cost difference of applying a match, measured on the region around it.

    Regions depend only on the matched nodes; several rules matching the same
    nodes (common in generated rule sets) share one region and its cost.
    """

    def __init__(self, cost: SupportsGraphCost | CostFn, hops: int = 1):
        self.fn = cost_function(cost)
        self.hops = hops
        self._graph: Graph | None = None
        self._cuts: dict[frozenset, tuple] = {}  # matched nodes -> (cut, its structural key)
        self._before: dict[tuple, float] = {}  # region structure -> cost
        self._deltas: dict[tuple, float | None] = {}  # (region structure, rewrite in it) -> delta
        self.hits = self.misses = 0

    def delta(self, graph: Graph, match: Match) -> tuple[float | None, frozenset[int]]:
        """cost(after) - cost(before) of the region (None if the rewrite is rejected there), and
        the region's nodes: the delta stays valid in a later graph where none of them changed.

        Regions are cut with canonical names, so the repeated blocks of a model (layers,
        cells, modules) give equal regions, and the same rewrite in each is priced once.
        """
        if graph is not self._graph:
            self._graph, self._cuts = graph, {}
        got = self._cuts.get(frozenset(match.nodes))
        if got is None:
            cut = _cut(graph, match.nodes, self.hops)
            got = self._cuts[frozenset(match.nodes)] = (cut, (cut.graph.nodes, cut.graph.outputs))
        cut, shape = got
        inner = cut.inner(match)
        key = (shape, match.rule.id, inner.nodes, inner.inputs, match.target.nodes, match.target.outputs)
        if key in self._deltas:
            self.hits += 1
            return self._deltas[key], cut.nodes
        self.misses += 1
        if len(self._deltas) > _MEMO_SIZE:
            self._deltas.clear()
            self._before.clear()
        before = self._before.get(shape)
        if before is None:
            before = self._before[shape] = self.fn(cut.graph)
        try:
            delta = self.fn(apply(cut.graph, inner, check=False).graph) - before
        except RewriteRejected:
            delta = None
        self._deltas[key] = delta
        return delta, cut.nodes


_FUSION_NODES = 32  # the fusion closure of a region stops growing once it has added this many nodes
_MEMO_SIZE = 200_000  # priced (region, rewrite) pairs kept


def extract_region(graph: Graph, match: Match, hops: int) -> Region:
    """The matched nodes and their `hops`-neighbourhood as a standalone graph, and the match in it.

    Sources (inputs, weights, constants) are copied, not expanded through (a
    weight shared by many layers does not pull them in). Other values from
    outside become inputs, or weights when they are weight-only, so a cost
    model sees what FoldConstant would fold. Values used outside the region
    become its outputs.
    """
    cut = _cut(graph, match.nodes, hops)
    return Region(cut.graph, cut.inner(match), cut.nodes)


class _Cut(NamedTuple):
    graph: Graph
    nodes: frozenset[int]
    where: dict  # value of the graph -> value of the region graph (boundary values included)

    def inner(self, match: Match) -> Match:
        where = self.where
        return Match(match.rule, tuple(where[Ref(g, 0)].node for g in match.nodes),
                     tuple(where[r] for r in match.inputs), match.variables, match.target,
                     tuple(where[r] for r in match.source_outputs))


def _cut(graph: Graph, seeds, hops: int) -> _Cut:
    index = index_of(graph)
    nodes = graph.nodes
    region = set(seeds)
    frontier = list(region)
    for _ in range(hops):
        nxt = []
        for v in frontier:
            for w in [r.node for r in nodes[v].inputs] + [u for u, _p in index.users[v]]:
                if w not in region and nodes[w].op not in SOURCE_OPS:
                    region.add(w)
                    nxt.append(w)
        frontier = nxt
    # The kernels the region's nodes join: element-wise and injective consumers (they may fuse
    # into a kernel of the region), and the producers of the region's element-wise nodes (the
    # kernels those fuse into, and then *their* element-wise consumers), until nothing is added.
    # Without them FuseOps would form the kernels differently in the cut than in the graph.
    frontier, limit = list(region), len(region) + _FUSION_NODES
    while frontier and len(region) < limit:
        nxt = []
        for v in frontier:
            for u, _p in index.users[v]:
                if u not in region and joins_producer(nodes[u].op):
                    region.add(u)
                    nxt.append(u)
            if joins_producer(nodes[v].op):
                for r in nodes[v].inputs:
                    w = r.node
                    if w not in region and nodes[w].op not in SOURCE_OPS:
                        region.add(w)
                        nxt.append(w)
        frontier = nxt
    order = sorted(region)
    new_nodes: list[Node] = []
    where: dict[Ref, Ref] = {}  # old value -> value in the region graph
    # boundary values first, so that every edge points backwards
    for g in order:
        for r in nodes[g].inputs:
            if r.node in region or r in where:
                continue
            src = nodes[r.node]
            if src.op == "constant":
                new_nodes.append(src)
            else:  # named by position, so that equal neighbourhoods give equal regions
                t = src.types[r.index]
                kind = src.op if src.op in SOURCE_OPS else "weight" if index.foldable[r.node] else "input"
                attrs = (("dtype", t.dtype), ("name", f"__region_{len(new_nodes)}"), ("shape", t.shape))
                new_nodes.append(Node(kind, attrs, (), (t,)))  # what make_node would build, faster
            where[r] = Ref(len(new_nodes) - 1, 0)
    for g in order:
        node = nodes[g]
        new_nodes.append(Node(node.op, node.attrs, tuple(where[r] for r in node.inputs), node.types))
        i = len(new_nodes) - 1
        for k in range(len(node.types)):
            where[Ref(g, k)] = Ref(i, k)
    outputs = []
    for g in order:
        escapes = {k for k in range(len(nodes[g].types)) if Ref(g, k) in index.outputs}
        for u, pos in index.users[g]:
            if u not in region:
                escapes.add(nodes[u].inputs[pos].index)
        outputs.extend(where[Ref(g, k)] for k in sorted(escapes))
    sub = Graph(tuple(new_nodes), tuple(outputs), graph.values, graph.payloads)
    return _Cut(sub, frozenset(region), where)


__all__ = ["CostFn", "SupportsGraphCost", "LocalCost", "Region", "cost_function", "extract_region"]
