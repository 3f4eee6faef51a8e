"""Compare a rewritten graph with its original on the rewritten region only.

Evaluating a whole function twice costs seconds (and, with opaque nodes, two
TVM builds), while a search usually rewrites a few dozen nodes. Here both
graphs are walked together from their outputs: two values that are the same
node (equal Merkle hash) are equal; two nodes with the same operator and
attributes are equal when their inputs are, pair by pair. Where neither holds
(the rewritten region's outputs), the two values are computed by the numpy
interpreter from their cones, cut at nodes both graphs share: a cut value is
random, seeded by its hash, so both sides see the same one. A proven rewrite
is equal for every value of its inputs, so random cuts check what matters.

A pair that differs although its inputs were paired (e.g. relu(relu(x)) vs
relu(x)) is compared higher up, a few levels at most: past that, the
difference stands (and TASOPass asks the whole function to confirm it). An
opaque node (which the interpreter cannot run) inside a cone is paired with
the same call in the other graph; when its inputs agree, its outputs are one
random cut on both sides.

When rewrites are dense (a batch norm folded in every layer), cones are deep
and cuts cannot stay consistent. Values are then computed from the graph
inputs, shared between the graphs: a node of the rewritten graph that applies
the original's operator to values equal to the original's inputs takes the
original's value, and a value the rewrite computes afresh that equals one of
the original's takes its place. Only the rewritten nodes run twice: about one
evaluation of the function instead of two. Only numpy; never imports tvm.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..graph import INT_HIGH, Graph, NotModelled, Ref, TensorType, blas_on_free_cores, get_op

LEAVES = ("input", "weight", "constant")
MAX_UNCUT = 6  # levels of cuts made consistent before a pair is computed from the graph inputs instead
CUT_CONE = 200  # nodes a pair's cones may run with cuts; larger ones are computed from the graph inputs
SAMPLE = 64  # elements compared first when looking for an equal value
MAX_WIDEN = 3  # a pair that differs is compared again this many levels up before the difference stands


@dataclass
class RegionCheck:
    """Outcome of `check_region`: same is None when the region could not be evaluated."""

    same: bool | None
    pairs: int = 0  # value pairs visited from the outputs
    compared: int = 0  # pairs computed and compared numerically
    evaluated: int = 0  # nodes the interpreter ran
    note: str = ""

    def describe(self) -> str:
        what = {True: "equal", False: "differ", None: "not evaluated"}[self.same]
        text = f"region: {what}; {self.compared} of {self.pairs} value pairs compared, {self.evaluated} nodes run"
        return text + (f" ({self.note})" if self.note else "")


def check_region(before: Graph, after: Graph, close: Callable[[np.ndarray, np.ndarray], bool],
                 seed: int = 0) -> RegionCheck:
    """Whether `after` computes what `before` does, judged on the region where they differ."""
    if before.output_types != after.output_types:
        return RegionCheck(False, note="output types differ")
    walk = _Walk(before, after, close, seed)
    try:
        with np.errstate(all="ignore"), blas_on_free_cores():  # NaN or overflow on random inputs is compared
            same = walk.run()
    except NotModelled as exc:
        return RegionCheck(None, len(walk.results), walk.compared, walk.evaluated, str(exc))
    except Exception as exc:  # noqa: BLE001 - e.g. a random cut that is not a valid index
        return RegionCheck(None, len(walk.results), walk.compared, walk.evaluated,
                           f"{type(exc).__name__}: {exc}")
    return RegionCheck(same, len(walk.results), walk.compared, walk.evaluated)


class _Walk:
    def __init__(self, before: Graph, after: Graph, close, seed: int):
        self.b, self.a = before, after
        self.hb, self.ha = before.node_hashes, after.node_hashes
        self.shared = set(self.hb) & set(self.ha)
        self.close, self.seed = close, seed
        self.results: dict[tuple[Ref, Ref], bool] = {}
        self.widened: dict[tuple[Ref, Ref], int] = {}  # levels a difference was carried up to this pair
        self.cuts: dict[tuple[str, int], np.ndarray] = {}  # random values of cut edges, by hash
        self.leaves: dict[str, np.ndarray] = {}  # random graph inputs (and weights without values), by name
        self.compared = self.evaluated = 0
        # Cones of separate pairs overlap when rewrites are dense; past this many runs of nodes, values
        # are computed from the graph inputs once and shared instead.
        self.cut_budget = len(before.nodes)
        # values from the graph inputs, by node hash (the original's hash where the values are shared)
        self.values: dict[str, list[np.ndarray]] = {}
        self.canon: dict[tuple[int, int], tuple[str, int]] = {}  # edge of `after` -> where its value is
        self.b_index = {(n.op, n.attrs, tuple((self.hb[r.node], r.index) for r in n.inputs)): j
                        for j, n in enumerate(before.nodes)}
        self.b_hashes, self.a_hashes = set(self.hb), set(self.ha)
        self.replaced: dict[TensorType, _Samples] = {}  # by type: original values the rewrite replaced
        self.opaque = [{n.attr("ref"): i for i, n in enumerate(g.nodes) if n.op == "opaque"} for g in (after, before)]
        self.ids: dict[str, int] = {}  # both graphs' nodes, one id per hash
        self.ancestors: list[int] = []  # per id, a bit set of the ids upstream of it
        for graph, hashes in ((after, self.ha), (before, self.hb)):
            for node, h in zip(graph.nodes, hashes):
                if h not in self.ids:
                    self.ids[h] = len(self.ancestors)
                    bits = 0
                    for r in node.inputs:
                        up = self.ids[hashes[r.node]]
                        bits |= self.ancestors[up] | (1 << up)
                    self.ancestors.append(bits)

    def run(self) -> bool:
        roots = list(zip(self.a.outputs, self.b.outputs))
        for root in roots:
            self._settle(root)
        return all(self.results[r] for r in roots)

    # ---- pairing ------------------------------------------------------------------
    def _identical(self, ra: Ref, rb: Ref) -> bool:
        return ra.index == rb.index and self.ha[ra.node] == self.hb[rb.node]

    def _children(self, ra: Ref, rb: Ref):
        """Input pairs when the two nodes apply the same operator to same-typed inputs, else None."""
        na, nb = self.a.nodes[ra.node], self.b.nodes[rb.node]
        if (ra.index != rb.index or na.op != nb.op or na.op in LEAVES or na.attrs != nb.attrs
                or len(na.inputs) != len(nb.inputs)):
            return None
        if any(self.a.type_of(x) != self.b.type_of(y) for x, y in zip(na.inputs, nb.inputs)):
            return None
        return list(zip(na.inputs, nb.inputs))

    def _settle(self, root) -> None:
        """Decide every pair under `root`, children first (iterative: graphs are deep)."""
        stack = [(root, False)]
        while stack:
            pair, expanded = stack.pop()
            if pair in self.results:
                continue
            if self._identical(*pair):
                self.results[pair] = True
                continue
            children = self._children(*pair)
            if children is None:
                self.results[pair] = self._compare(*pair)
            elif not expanded:
                stack.append((pair, True))
                stack.extend((c, False) for c in children if c not in self.results)
            else:
                failed = [self.widened.get(c, 0) for c in children if not self.results[c]]
                if not failed:
                    self.results[pair] = True
                elif max(failed) >= MAX_WIDEN:  # a difference that holds this far up is real
                    self.results[pair], self.widened[pair] = False, MAX_WIDEN
                else:
                    self.results[pair] = self._compare(*pair)
                    self.widened[pair] = max(failed) + 1

    # ---- numeric comparison -----------------------------------------------------------
    def _compare(self, ra: Ref, rb: Ref) -> bool:
        if self.a.type_of(ra) != self.b.type_of(rb):
            return False
        self.compared += 1
        roots = {self.ha[ra.node], self.hb[rb.node]}
        cones = self._cones(ra.node, rb.node, roots) if self.evaluated <= self.cut_budget else None
        try:
            if cones is None:  # deep or overlapping cones: values from the graph inputs, shared
                return self._compare_real(ra, rb)
            memo: dict[str, list[np.ndarray]] = {}
            for side, cone in enumerate(cones):
                self._evaluate(side, cone, roots, memo)
        except _OpaqueDiffers:
            return False
        return self.close(memo[self.hb[rb.node]][rb.index], memo[self.ha[ra.node]][ra.index])

    def _cones(self, a_root: int, b_root: int, roots: set) -> list[dict[int, bool]] | None:
        """Nodes each side computes (node -> is a cut), cut at shared nodes where that is consistent.

        A cut value is random, so no other value the check uses may depend on it in reality:
        a shared node with an ancestor in either cone (e.g. the other side computes a rewritten
        form of it from its inputs) is computed from its inputs instead. None when that goes on
        for more than a few levels. Leaves do not count: the same weight or constant tensor feeds
        many layers, and a rewrite that relates a cut to a leaf also reads the cut's other inputs.
        """
        computed: set[str] = set()
        for _ in range(MAX_UNCUT):
            cones = [self._cone(0, a_root, roots, computed), self._cone(1, b_root, roots, computed)]
            used, cuts = 0, []
            for side, cone in enumerate(cones):
                graph, hashes = (self.a, self.ha) if side == 0 else (self.b, self.hb)
                for i, cut in cone.items():
                    if graph.nodes[i].op not in LEAVES:
                        used |= 1 << self.ids[hashes[i]]
                    if cut:
                        cuts.append(hashes[i])
            if sum(not cut for cone in cones for cut in cone.values()) > CUT_CONE:
                return None
            late = {h for h in cuts if self.ancestors[self.ids[h]] & used}
            if not late:
                return cones
            computed |= late
        return None

    def _cone(self, side: int, root: int, roots: set, computed: set) -> dict[int, bool]:
        graph, hashes = (self.a, self.ha) if side == 0 else (self.b, self.hb)
        cone: dict[int, bool] = {}
        stack = [root]
        while stack:
            i = stack.pop()
            if i in cone:
                continue
            node, h = graph.nodes[i], hashes[i]
            cut = h in self.shared and h not in roots and h not in computed and node.op not in LEAVES
            cone[i] = cut
            if not cut and node.op != "opaque":  # an opaque call is paired, not run
                stack.extend(r.node for r in node.inputs)
        return cone

    def _evaluate(self, side: int, cone: dict[int, bool], roots: set, memo: dict) -> None:
        graph, hashes = (self.a, self.ha) if side == 0 else (self.b, self.hb)
        for i in sorted(cone):  # nodes are in topological order
            h, node = hashes[i], graph.nodes[i]
            if h in memo:
                continue
            if cone[i]:
                memo[h] = [self._cut(h, k, t) for k, t in enumerate(node.types)]
            elif node.op == "opaque":
                memo[h] = self._opaque(side, i, node)
            else:
                memo[h] = self._run(graph, node, [memo[hashes[r.node]][r.index] for r in node.inputs])

    # ---- values from the graph inputs, shared between the graphs ----------------------------
    def _compare_real(self, ra: Ref, rb: Ref) -> bool:
        self._real_before(rb.node)
        self._real_after(ra.node)
        (ha, ka), hb = self.canon[(ra.node, ra.index)], self.hb[rb.node]
        if (ha, ka) == (hb, rb.index):
            return True
        return self.close(self.values[hb][rb.index], self.values[ha][ka])

    def _upstream(self, graph: Graph, root: int, done) -> list[int]:
        """The nodes `root` depends on that are not done yet, in topological order."""
        seen, stack = set(), [root]
        while stack:
            i = stack.pop()
            if i in seen or done(i):
                continue
            seen.add(i)
            stack.extend(r.node for r in graph.nodes[i].inputs)
        return sorted(seen)

    def _real_before(self, root: int) -> None:
        for i in self._upstream(self.b, root, lambda i: self.hb[i] in self.values):
            node, h = self.b.nodes[i], self.hb[i]
            if node.op == "opaque":
                self.values[h] = [self._cut(f"opaque:{node.attr('ref')}", k, t) for k, t in enumerate(node.types)]
            else:
                self.values[h] = self._run(self.b, node, [self.values[self.hb[r.node]][r.index] for r in node.inputs])
            if h not in self.a_hashes:  # a value the rewrite replaced: a candidate to share
                for k, (t, v) in enumerate(zip(node.types, self.values[h])):
                    self.replaced.setdefault(t, _Samples()).add((h, k), _sample(v))

    def _real_after(self, root: int) -> None:
        for i in self._upstream(self.a, root, lambda i: (i, 0) in self.canon):
            node, h = self.a.nodes[i], self.ha[i]
            inputs = tuple(self.canon[(r.node, r.index)] for r in node.inputs)
            if h in self.b_hashes:  # the very node of the original
                if h not in self.values:
                    self.values[h] = self._run(self.a, node, [self.values[c][k] for c, k in inputs])
                where = [(h, k) for k in range(len(node.types))]
            elif (node.op, node.attrs, inputs) in self.b_index:  # the original's operator on equal values
                j = self.b_index[(node.op, node.attrs, inputs)]
                self._real_before(j)
                where = [(self.hb[j], k) for k in range(len(node.types))]
            elif node.op == "opaque":  # the same call in the original, if its inputs have equal values
                j = self._opaque_counterpart(node, inputs)
                where = [(self.hb[j], k) for k in range(len(node.types))]
            else:
                self.values[h] = self._run(self.a, node, [self.values[c][k] for c, k in inputs])
                where = [self._equal_value(t, v) or (h, k) for k, (t, v) in enumerate(zip(node.types, self.values[h]))]
            for k, w in enumerate(where):
                self.canon[(i, k)] = w

    def _opaque_counterpart(self, node, inputs) -> int:
        j = self.opaque[1].get(node.attr("ref"))
        if j is None:
            raise NotModelled(f"opaque call {node.attr('label') or node.attr('ref')} has no counterpart to pair with")
        self._real_before(j)
        theirs = self.b.nodes[j].inputs
        same = len(theirs) == len(inputs) and all(self.close(self.values[self.hb[r.node]][r.index], self.values[c][k])
                                                  for r, (c, k) in zip(theirs, inputs))
        if not same:
            raise _OpaqueDiffers(node.attr("ref"))
        return j

    def _equal_value(self, t: TensorType, value: np.ndarray):
        """An original value the rewrite replaced that equals `value`, to share from here on."""
        candidates = self.replaced.get(t)
        if candidates is None:
            return None
        sample = _sample(value)
        for (h, k), theirs in candidates.near(sample):
            if self.close(theirs, sample) and self.close(self.values[h][k], value):
                return h, k
        return None

    def _opaque(self, side: int, i: int, node) -> list[np.ndarray]:
        """Outputs of an opaque call: one random cut for both graphs, if its inputs agree in both."""
        key = node.attr("ref")
        other = self.opaque[1 - side].get(key)
        if other is None:
            raise NotModelled(f"opaque call {node.attr('label') or key} has no counterpart to pair with")
        mine, theirs = node.inputs, self.b.nodes[other].inputs if side == 0 else self.a.nodes[other].inputs
        if len(mine) != len(theirs):
            raise _OpaqueDiffers(key)
        for pair in zip(mine, theirs) if side == 0 else zip(theirs, mine):
            self._settle(pair)
            if not self.results[pair]:
                raise _OpaqueDiffers(key)
        return [self._cut(f"opaque:{key}", k, t) for k, t in enumerate(node.types)]

    def _run(self, graph: Graph, node, args) -> list[np.ndarray]:
        attrs = node.attr_dict
        if node.op in ("input", "weight"):
            name = attrs["name"]
            if node.op == "weight" and name in graph.values:
                return [np.asarray(graph.values[name])]
            if name not in self.leaves:
                self.leaves[name] = _random(TensorType(attrs["shape"], attrs["dtype"]), self._rng(name))
            return [self.leaves[name]]
        opdef = get_op(node.op)
        if opdef.ref is None:
            raise NotModelled(f"{node.op} cannot be evaluated by the interpreter")
        self.evaluated += 1
        return [np.asarray(o) for o in opdef.ref(args, attrs)]

    def _cut(self, h: str, k: int, t: TensorType) -> np.ndarray:
        if (h, k) not in self.cuts:
            self.cuts[(h, k)] = _random(t, self._rng(f"{h}:{k}"))
        return self.cuts[(h, k)]

    def _rng(self, key: str) -> np.random.Generator:
        """Seeded by the key, so a value does not depend on the order things are visited in."""
        digest = hashlib.blake2b(key.encode(), digest_size=8).digest()  # hash() is salted per process
        return np.random.default_rng([self.seed, int.from_bytes(digest, "little")])


def _sample(value: np.ndarray) -> np.ndarray:
    """A few fixed elements: a cheap first comparison before the whole tensors."""
    flat = np.asarray(value).reshape(-1)
    return flat[np.linspace(0, flat.size - 1, min(flat.size, SAMPLE)).astype(np.int64)] if flat.size else flat


class _Samples:
    """Samples of values of one type, stacked: one vectorised comparison finds the few near a new
    value, which `close` then judges (one `close` per candidate took 1.1 s of full NASNet-A's pass,
    57,000 calls). Near is at least 100x looser than TASOPass's `close` (which scales by the largest
    magnitude alone, not 1 + it): a value it misses is only not shared."""

    LOOSE = 1e-2  # of 1 + the sample's largest finite magnitude

    def __init__(self):
        self.keys: list = []
        self.samples: list[np.ndarray] = []
        self._rows = np.empty((0, 0))  # the samples as float64 rows; capacity doubles
        self._tol = np.empty(0)
        self._stacked = 0

    def add(self, key, sample: np.ndarray) -> None:
        self.keys.append(key)
        self.samples.append(sample)

    def near(self, sample: np.ndarray):
        """(key, sample) of the samples near `sample`, in the order they were added."""
        self._stack()
        rows, s = self._rows[:len(self.samples)], sample.astype(np.float64).reshape(-1)
        with np.errstate(invalid="ignore"):
            ok = (np.abs(rows - s) <= self._tol[:len(self.samples), None]) | (rows == s) \
                | (np.isnan(rows) & np.isnan(s))
        return [(self.keys[i], self.samples[i]) for i in np.flatnonzero(ok.all(axis=1))]

    def _stack(self) -> None:
        n, width = len(self.samples), self.samples[0].size
        if n > len(self._rows):
            grown = np.empty((max(n, 2 * len(self._rows), 8), width))
            if self._stacked:
                grown[:self._stacked] = self._rows[:self._stacked]
            self._rows, self._tol = grown, np.resize(self._tol, len(grown))
        for i in range(self._stacked, n):
            row = self.samples[i].astype(np.float64).reshape(-1)
            self._rows[i] = row
            finite = np.abs(row[np.isfinite(row)])
            self._tol[i] = self.LOOSE * (1.0 + (float(finite.max()) if finite.size else 0.0))
        self._stacked = n


class _OpaqueDiffers(Exception):
    """The inputs of an opaque call differ between the graphs: so may everything computed from it."""


def _random(t: TensorType, rng: np.random.Generator) -> np.ndarray:
    """Floats in [-1, 1), small non-negative integers: what the whole-function check feeds too."""
    if np.issubdtype(np.dtype(t.dtype), np.floating):
        return rng.uniform(-1, 1, size=t.shape).astype(t.dtype)
    return rng.integers(0, INT_HIGH, size=t.shape).astype(t.dtype)
