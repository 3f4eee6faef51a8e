"""Per-graph tables the matcher and applier share: nodes by operator, users, foldability.

A `GraphIndex` is computed once per graph and cached on the graph, so matching
many rules against one graph does not rescan it. For a graph made by a
rewrite, `GraphIndex.derived` builds it from the old graph's index: the
operator lists and foldability are renumbered (a list comprehension), and
users are computed on demand, per node, from the old users and the nodes the
rewrite changed -- matching and costing only ever look at a few of them.

`foldable[i]` says that node i computes from weights and constants only: TVM's
FoldConstant will evaluate it at compile time, so it costs nothing at run time
and a pattern input of kind "weight" may bind to it. Opaque calls are never
foldable (the optimizer does not know what they compute): `graph.folding`.
"""
from __future__ import annotations

from typing import Sequence

from ..graph import Graph, Ref
from ..graph.folding import folds as _foldable

SOURCE_OPS = frozenset({"input", "weight", "constant"})
_CACHE_KEY = "_subst_index"
_MAX_DEPTH = 12  # derived users views stacked deeper than this are recomputed from scratch


class GraphIndex:
    __slots__ = ("graph", "by_op", "foldable", "users", "outputs", "_balls")

    def __init__(self, graph: Graph, *, _fields=None):
        self.graph = graph
        self.outputs = frozenset(graph.outputs)
        self._balls: dict[tuple[int, int], frozenset[int]] = {}
        if _fields is not None:
            self.by_op, self.foldable, self.users = _fields
            return
        by_op: dict[str, list[int]] = {}
        foldable: list[bool] = []
        for i, node in enumerate(graph.nodes):
            by_op.setdefault(node.op, []).append(i)
            foldable.append(_foldable(node, foldable))
        self.by_op = by_op
        self.foldable = foldable
        self.users = graph.users

    @classmethod
    def derived(cls, old: "GraphIndex", graph: Graph, old_to_new: Sequence[int], changed: set[int]) -> "GraphIndex":
        """The index of `graph`, made from `old` by a rewrite.

        old_to_new: where each old node went (-1: removed); changed: new nodes whose
        operands are not the renumbered operands of an old node (targets, redirected users).
        """
        new_to_old = [-1] * len(graph.nodes)
        for j, i in enumerate(old_to_new):
            if i >= 0:
                new_to_old[i] = j
        foldable: list[bool] = []
        nodes = graph.nodes
        old_foldable = old.foldable
        dirty = False  # foldability can change downstream of a changed node (rarely does)
        for i, j in enumerate(new_to_old):
            if j < 0 or i in changed or dirty:
                value = _foldable(nodes[i], foldable)
                dirty = dirty or (j >= 0 and value != old_foldable[j])
                foldable.append(value)
            else:
                foldable.append(old_foldable[j])
        kept = [i for i in old_to_new if i >= 0]
        monotone = all(a < b for a, b in zip(kept, kept[1:]))
        by_op: dict[str, list[int]] = {}
        for op, members in old.by_op.items():
            moved = [old_to_new[j] for j in members if old_to_new[j] >= 0]
            if moved:
                by_op[op] = moved if monotone else sorted(moved)
        added = [i for i, j in enumerate(new_to_old) if j < 0]
        for i in added:
            members = by_op.setdefault(nodes[i].op, [])
            members.append(i)
        if added:
            for op in {nodes[i].op for i in added}:
                by_op[op].sort()
        users = _DerivedUsers(old.users, graph, old_to_new, new_to_old, changed)
        if users.depth > _MAX_DEPTH:
            users = graph.users
        return cls(graph, _fields=(by_op, foldable, users))

    def ball(self, g: int, radius: int) -> frozenset[int]:
        """The nodes within `radius` undirected edges of node g (memoised)."""
        key = (g, radius)
        got = self._balls.get(key)
        if got is None:
            got = self._balls[key] = frozenset(neighbourhood(self, (g,), radius))
        return got

    def uses_of(self, ref: Ref) -> list[int]:
        """Consumer nodes of one value (a node using it twice is listed once)."""
        out: list[int] = []
        for user, pos in self.users[ref.node]:
            if self.graph.nodes[user].inputs[pos].index == ref.index and (not out or out[-1] != user):
                out.append(user)
        return out


class _DerivedUsers:
    """users[i] of a rewritten graph, computed per node on first access from the old graph's users."""

    __slots__ = ("old", "old_to_new", "new_to_old", "changed", "extra", "cache", "depth", "size")

    def __init__(self, old, graph: Graph, old_to_new, new_to_old, changed: set[int]):
        self.old, self.old_to_new, self.new_to_old, self.changed = old, old_to_new, new_to_old, changed
        self.depth = old.depth + 1 if isinstance(old, _DerivedUsers) else 1
        self.size = len(graph.nodes)
        extra: dict[int, list[tuple[int, int]]] = {}
        for c in changed:
            for pos, r in enumerate(graph.nodes[c].inputs):
                extra.setdefault(r.node, []).append((c, pos))
        self.extra = extra
        self.cache: dict[int, tuple[tuple[int, int], ...]] = {}

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> tuple[tuple[int, int], ...]:
        got = self.cache.get(i)
        if got is None:
            acc = list(self.extra.get(i, ()))
            j = self.new_to_old[i]
            if j >= 0:
                old_to_new, changed = self.old_to_new, self.changed
                for u, pos in self.old[j]:
                    nu = old_to_new[u]
                    if nu >= 0 and nu not in changed:
                        acc.append((nu, pos))
            acc.sort()
            got = self.cache[i] = tuple(acc)
        return got


def index_of(graph: Graph) -> GraphIndex:
    """The graph's index, computed on first use and cached on the (immutable) graph."""
    cached = graph.__dict__.get(_CACHE_KEY)
    if cached is None:
        cached = GraphIndex(graph)
        object.__setattr__(graph, _CACHE_KEY, cached)
    return cached


def seed_index(graph: Graph, index: GraphIndex) -> None:
    """Cache an index made elsewhere (by `GraphIndex.derived`) on `graph`."""
    object.__setattr__(graph, _CACHE_KEY, index)


def neighbourhood(index: GraphIndex, seeds, radius: int) -> dict[int, int]:
    """Undirected distance (through operands and users) from `seeds`, up to `radius`."""
    users = index.users
    nodes = index.graph.nodes
    dist = {s: 0 for s in seeds}
    frontier = list(dist)
    for d in range(1, radius + 1):
        if not frontier:
            break
        nxt = []
        for v in frontier:
            for r in nodes[v].inputs:
                if r.node not in dist:
                    dist[r.node] = d
                    nxt.append(r.node)
            for u, _pos in users[v]:
                if u not in dist:
                    dist[u] = d
                    nxt.append(u)
        frontier = nxt
    return dist


def describe_node(graph: Graph, i: int) -> str:
    """`%12 conv2d` or, for sources, `input 'x'` / `weight 'conv1.w'`."""
    node = graph.nodes[i]
    if node.op in ("input", "weight"):
        return f"{node.op} '{node.attr('name')}'"
    return f"%{i} {node.op}"
