"""Partition a Graph into the kernels TVM will run, the way Relax `FuseOps` forms them.

The lowerings this mimics are in `lowering.py`: "default" (LegalizeOps,
AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR, then `tvm.compile`,
which rewrites lone reshapes into views) and "tuning" (the same after
DecomposeOpsForInference, as static_shape_tuning runs it). The rules:

1. Sources (inputs, weights, constants) are no kernel.
2. Weight-only nodes -- computed purely from weights and constants, e.g. the
   transpose of a Gemm weight or the concat of two conv kernels -- are folded by
   FoldConstant at compile time: free. Their results are weights of the kernels
   that read them.
3. Every other node gets the pattern AnnotateTIROpPattern gives its legalized
   PrimFunc (`tvm_pattern`; this differs from the graph form's own table for a
   few ops: mean, softmax and layer norm are out-elementwise-fusable, a binary
   op is element-wise when one operand already has the output shape, strided
   slice is element-wise, squeeze/expand_dims are broadcast). Batch norm is
   one tuple-returning kernel that FuseOps fuses as injective under "default"
   (so it does not fuse into the conv before it, but joins the add and relu
   after it), and element-wise arithmetic that fuses into the conv under
   "tuning".
4. Groups are formed with FuseOps' post-dominator algorithm
   (src/relay/analysis/graph_partitioner.cc, shared by Relax):
   phase 0: a conv/matmul/pool/mean (OUT_EWISE_FUSABLE) absorbs the chain of
   element-wise/broadcast ops that post-dominates it (bias add, relu, decomposed
   batch norm, residual add); element-wise/broadcast ops fuse into an injective
   or reduce post-dominator (an element-wise prologue of a reduce);
   phase 1: injective ops (concat, split, transpose, pad, ...) fuse into an
   injective-only post-dominator path.
   Where two kernels compete for one element-wise consumer, the first visited
   takes it. TVM visits in binding order; here the order depends only on the
   fusable chains around each node, so a rewrite does not re-form kernels far
   from it and the search can price it on the region around it.
   Outputs of tuple-returning calls (split, batch norm) go through
   tuple-get-item nodes (injective),
   graph outputs are external references (never fused into their users), and
   opaque calls stay alone.
5. A group made only of reshape/squeeze/expand_dims is rewritten by
   RewriteDataflowReshape into a view: free -- unless it computes a value the
   function returns (those stay copies). Everything else is a kernel, so a
   concat or transpose of activations costs its memory traffic.

`tests/cost/test_cost_fusion_tvm.py` checks the kernel count against what FuseOps
produces on real modules.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

from ..graph import Graph, Pattern, get_op, weight_only
from .kernel import Kernel, make_kernel

ELEMWISE, BROADCAST, INJECTIVE = Pattern.ELEMWISE, Pattern.BROADCAST, Pattern.INJECTIVE
REDUCE, OUT_EWISE, OPAQUE, SOURCE = Pattern.REDUCE, Pattern.OUT_EWISE_FUSABLE, Pattern.OPAQUE, Pattern.SOURCE

SOURCE_OPS = frozenset({"input", "weight", "constant"})
# Ops whose lone group RewriteDataflowReshape turns into a no-copy view.
VIEW_OPS = frozenset({"reshape", "squeeze", "expand_dims"})

# AnnotateTIROpPattern on the legalized PrimFunc, where it differs from OpDef.pattern.
TVM_PATTERN = {
    "mean": OUT_EWISE, "variance": OUT_EWISE, "softmax": OUT_EWISE, "layer_norm": OUT_EWISE,
    "group_norm": OUT_EWISE,
    "exported_group_norm": OUT_EWISE,  # its spelling's last kernel: the arithmetic after the two reductions
    "strided_slice": ELEMWISE, "squeeze": BROADCAST, "expand_dims": BROADCAST, "broadcast_to": BROADCAST,
    "batch_norm": INJECTIVE,  # legalized alone: a PrimFunc returning (out, mean, var), fused as injective
    "enlarge": INJECTIVE, "pad": INJECTIVE,
}
# Under the "tuning" lowering DecomposeOpsForInference first turns batch norm into element-wise
# arithmetic on x (its parameter math folds), which then fuses into the conv before it.
DECOMPOSED_PATTERN = {"batch_norm": ELEMWISE}
# Ops whose Relax call returns a tuple even when the graph node has one output.
TUPLE_CALLS = {"default": frozenset({"batch_norm"}), "tuning": frozenset()}
TUPLE_ITEM = INJECTIVE  # FuseOps gives tuple-get-item bindings the injective pattern
MAX_FUSE_DEPTH = 256  # FuseOps' default max_fuse_depth


def tvm_pattern(graph: Graph, i: int, lowering: str = "default") -> int:
    """The fusion pattern TVM assigns to node i under `lowering` ("default" or "tuning")."""
    node = graph.nodes[i]
    op = node.op
    if lowering == "tuning" and op in DECOMPOSED_PATTERN:
        return DECOMPOSED_PATTERN[op]
    if op in TVM_PATTERN:
        return TVM_PATTERN[op]
    opdef = get_op(op)
    if "binary" in opdef.tags:
        out = node.types[0].shape
        full = any(graph.type_of(r).shape == out for r in node.inputs)
        return ELEMWISE if full else BROADCAST
    return opdef.pattern


@dataclass(frozen=True)
class Partition:
    """Kernels of a graph, plus what costs nothing (folded weight-only nodes and views)."""

    kernels: tuple[Kernel, ...]
    folded: tuple[int, ...]  # weight-only nodes, computed at compile time
    views: tuple[int, ...]  # lone reshapes TVM turns into views
    group_of: tuple[int, ...]  # per node: kernel index, or -1 (source, folded, view)


def canonical_order(graph: Graph) -> list[int]:
    """A topological order that depends only on the graph's identity, not on how it was built.

    Forward ids follow it, so equal graphs (equal hashes) list their kernels alike, and the
    fusion visit order (`_Forward._visit_order`) falls back to it between identical nodes.
    """
    import heapq

    hashes = graph.node_hashes
    pending = [len(n.inputs) for n in graph.nodes]
    users = graph.users
    ready = [(hashes[i], i) for i, n in enumerate(graph.nodes) if not n.inputs]
    heapq.heapify(ready)
    order = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for j, _pos in users[i]:
            pending[j] -= 1
            if pending[j] == 0:
                heapq.heappush(ready, (hashes[j], j))
    return order


class _Forward:
    """FuseOps' indexed forward graph over the nodes that run (plus tuple-get-item nodes)."""

    def __init__(self, graph: Graph, const: list[bool], opaque=None, lowering: str = "default"):
        self.graph = graph
        n = len(graph.nodes)
        self.fid = [-1] * n  # graph node -> forward node id
        self.tgi: dict[tuple[int, int], int] = {}  # (multi-output node, index) -> forward id
        self.gnode: list[int] = []  # forward id -> graph node (-1 for tuple-get-item)
        self.pattern: list[int] = []
        self.outputs: list[list[tuple[int, int]]] = []  # forward id -> [(consumer id, edge pattern)]
        self.extern: list[bool] = []
        tuple_calls = TUPLE_CALLS[lowering]
        used_items: dict[int, set[int]] = {}
        for ref in [r for node in graph.nodes for r in node.inputs] + list(graph.outputs):
            producer = graph.nodes[ref.node]
            if len(producer.types) > 1 or producer.op in tuple_calls:
                used_items.setdefault(ref.node, set()).add(ref.index)
        for i in canonical_order(graph):
            node = graph.nodes[i]
            if node.op in SOURCE_OPS or const[i]:
                continue
            if node.op == "opaque":
                pat = opaque.pattern(graph, i) if opaque is not None else OPAQUE
            else:
                pat = tvm_pattern(graph, i, lowering)
            self.fid[i] = self._add(i, pat)
            for r in node.inputs:
                src = self._source(r)
                if src >= 0:
                    self.outputs[src].append((self.fid[i], pat))
            for k in sorted(used_items.get(i, ())):
                t = self._add(-1, TUPLE_ITEM)
                self.tgi[(i, k)] = t
                self.outputs[self.fid[i]].append((t, TUPLE_ITEM))
        for r in graph.outputs:
            src = self._source(r)
            if src >= 0:
                self.extern[src] = True
        self.visit = self._visit_order()

    def _visit_order(self) -> list[int]:
        """FuseOps' visit order: producers before the element-wise and injective consumers that
        may join them, and otherwise by the fusable chains that lead to each node.

        TVM visits in post-DFS order; where two kernels compete for one element-wise consumer,
        the first visited takes it. Ordering by depth within the chains that can fuse, then by
        the chain itself (the node's operator, attributes and types, and those of the chain
        members before it) makes that choice depend only on the chains: a graph and a region
        cut around them (search/costing.py) form the same kernels, and a rewrite elsewhere
        changes nothing. Ties left are between identical chains: usually either choice costs the
        same, but not when one competitor shares an input with the consumer's kernel (a strict
        xfail in tests/search/test_costing.py).
        """
        graph = self.graph
        n = len(self.gnode)
        keys = [_local_key(graph, g) if g >= 0 else "" for g in self.gnode]
        for (i, k), t in self.tgi.items():
            keys[t] = f"#{k}"
        joins = [g < 0 or joins_producer(graph.nodes[g].op) for g in self.gnode]
        depth = [0] * n
        before: list[list[str]] = [[] for _ in range(n)]  # chains of the producers a node may join
        chain = [""] * n
        for v in range(n):  # forward ids are topological
            chain[v] = _chain_digest(keys[v], before[v])
            for c, _pat in self.outputs[v]:
                if joins[c]:
                    before[c].append(chain[v])
                    if depth[c] <= depth[v]:
                        depth[c] = depth[v] + 1
        return sorted(range(n), key=lambda v: (depth[v], chain[v], v))

    def _add(self, gnode: int, pattern: int) -> int:
        self.gnode.append(gnode)
        self.pattern.append(pattern)
        self.outputs.append([])
        self.extern.append(False)
        return len(self.gnode) - 1

    def _source(self, ref) -> int:
        if self.fid[ref.node] < 0:
            return -1
        return self.tgi.get((ref.node, ref.index), self.fid[ref.node])


def joins_producer(op: str) -> bool:
    """Element-wise, broadcast and injective operators may join their producer's kernel."""
    return get_op(op).pattern <= INJECTIVE


def _local_key(graph: Graph, i: int) -> str:
    node = graph.nodes[i]
    return _key_of(node.op, node.attrs, node.types, tuple(graph.type_of(r) for r in node.inputs))


@lru_cache(maxsize=65536)
def _key_of(op, attrs, types, in_types) -> str:
    return repr((op, attrs, types, in_types))


def _chain_digest(key: str, before: list[str]) -> str:
    if not before:
        return _digest_of(key)
    return _digest_of(key + "|" + ",".join(sorted(before)))


@lru_cache(maxsize=65536)
def _digest_of(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _post_dominators(fw: _Forward):
    """Post-dominator tree: (parent, depth, combined edge pattern) per forward node."""
    n = len(fw.gnode)
    parent, depth, pattern = [-1] * n, [1] * n, [OPAQUE] * n
    for v in range(n - 1, -1, -1):
        outs = fw.outputs[v]
        if fw.extern[v] or not outs:
            continue
        pat = ELEMWISE
        lca, edge = outs[0]
        pat = max(pat, edge)
        for node, edge in outs[1:]:
            a, b = lca, node
            while a != b:
                if a < 0 or b < 0:
                    a = -1
                    break
                if depth[a] < depth[b]:
                    pat, b = max(pat, pattern[b]), parent[b]
                elif depth[b] < depth[a]:
                    pat, a = max(pat, pattern[a]), parent[a]
                else:
                    pat = max(pat, pattern[a], pattern[b])
                    a, b = parent[a], parent[b]
            lca = a
            pat = max(pat, edge)
            if lca < 0:
                break
        parent[v] = lca
        depth[v] = depth[lca] + 1 if lca >= 0 else 1
        pattern[v] = pat
    return parent, pattern


class _Groups:
    """Union-find of fusion groups, as in GraphPartitioner."""

    def __init__(self, patterns: list[int]):
        self.parent = list(range(len(patterns)))
        self.pattern = list(patterns)
        self.anchored = [p == OUT_EWISE for p in patterns]
        self.size = [1] * len(patterns)

    def root(self, g: int) -> int:
        while self.parent[g] != g:
            self.parent[g] = self.parent[self.parent[g]]
            g = self.parent[g]
        return g

    def merge(self, child: int, into: int) -> None:
        child, into = self.root(child), self.root(into)
        if child == into:
            return
        self.size[into] += self.size[child]
        self.parent[child] = into
        if self.anchored[child]:
            self.anchored[into] = True
            self.pattern[into] = max(self.pattern[child], self.pattern[into])


def _path_ok(fw: _Forward, groups: _Groups, src: int, sink: int, cond) -> bool:
    seen, stack = set(), [c for c, _ in fw.outputs[src]]
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if not cond(groups.pattern[groups.root(v)], v == sink):
            return False
        if v != sink:
            stack.extend(c for c, _ in fw.outputs[v])
    return True


def _commit(fw: _Forward, groups: _Groups, src: int, sink: int) -> None:
    target = groups.root(sink)
    for v in _path_nodes(fw, src, sink):
        groups.merge(v, target)


def _path_nodes(fw: _Forward, src: int, sink: int) -> set[int]:
    seen, stack = set(), [src]
    while stack:
        v = stack.pop()
        if v == sink or v in seen:
            continue
        seen.add(v)
        stack.extend(c for c, _ in fw.outputs[v])
    return seen


def _fuse(fw: _Forward) -> _Groups:
    dom_parent, dom_pattern = _post_dominators(fw)
    groups = _Groups(fw.pattern)
    for phase in (0, 1):
        for v in fw.visit:
            pat = groups.pattern[v]  # the node's own group, as GraphPartitioner reads it
            p = dom_parent[v]
            if pat == OPAQUE or p < 0 or groups.root(v) == groups.root(p):
                continue
            if pat == OUT_EWISE:
                if phase != 0 or dom_pattern[v] != ELEMWISE:
                    continue
                cond = lambda kind, is_sink: kind <= BROADCAST  # noqa: E731
            elif pat <= BROADCAST:
                if not (dom_pattern[v] <= INJECTIVE or dom_pattern[v] == REDUCE):
                    continue
                cond = lambda kind, is_sink: kind <= INJECTIVE if not is_sink else (  # noqa: E731
                    kind <= OUT_EWISE)
            elif pat == INJECTIVE:
                if phase != 1:
                    continue
                cond = lambda kind, is_sink: kind <= INJECTIVE  # noqa: E731
            else:
                continue
            if not _path_ok(fw, groups, v, p, cond):
                continue
            extra = sum(groups.size[groups.root(u)] for u in {groups.root(u) for u in _path_nodes(fw, v, p)})
            if extra + groups.size[groups.root(p)] > MAX_FUSE_DEPTH:
                continue
            _commit(fw, groups, v, p)
    return groups


def partition(graph: Graph, opaque=None, lowering: str = "default") -> Partition:
    """The kernels of `graph` (in `canonical_order` of their first node) and the free nodes.

    opaque: an `opaque.OpaqueInfo` that tells the TVM pattern and workload key of opaque
    nodes; without it they stay alone and are keyed by call site.
    lowering: "default" (relax.get_default_pipeline) or "tuning" (static_shape_tuning).
    """
    if lowering not in TUPLE_CALLS:
        raise ValueError(f"unknown lowering '{lowering}'")
    const = weight_only(graph, opaque_folds=True)  # as FoldConstant treats most of them
    fw = _Forward(graph, const, opaque, lowering)
    groups = _fuse(fw)
    members: dict[int, list[int]] = {}
    for v, g in enumerate(fw.gnode):  # forward ids follow the canonical order
        if g >= 0:
            members.setdefault(groups.root(v), []).append(g)
    group_of = [-1] * len(graph.nodes)
    kernels, views = [], []
    returned = {r.node for r in graph.outputs}
    for nodes in members.values():
        if all(graph.nodes[i].op in VIEW_OPS for i in nodes) and not returned.intersection(nodes):
            views.extend(nodes)
            continue
        for i in nodes:
            group_of[i] = len(kernels)
        kernels.append(make_kernel(graph, tuple(nodes), const, opaque))
    folded = tuple(i for i, c in enumerate(const) if c and graph.nodes[i].op not in SOURCE_OPS)
    return Partition(tuple(kernels), folded, tuple(sorted(views)), tuple(group_of))
