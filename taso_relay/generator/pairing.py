"""Buckets of equal fingerprints -> candidate pairs -> exact and floating-point checks.

Every pair of graphs in a bucket is a candidate. Buckets are keyed by the
collapsed fingerprint (renaming-invariant), so for each candidate we look for
a renaming of the second graph's inputs (within roles) under which the two
agree exactly on the distinct pool values; the renamed pair is kept. A kept
pair must then agree in float64, with the real operators (true relu and max),
on fresh random inputs at two seeds.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..graph import GraphBuilder, Ref, evaluate
from ..graph.types import GraphError
from . import fingerprint as fpm
from .enumerate import Engine
from .templates import node_attrs


@dataclass(frozen=True)
class COp:
    tid: int
    op: str
    attrs: tuple          # sorted (name, value) pairs
    inputs: tuple         # tensor numbers: < P pool, else operator outputs
    first: int            # tensor number of output 0
    shapes: tuple         # output shapes


@dataclass(frozen=True)
class CGraph:
    """A concrete enumerated graph over the pool (tensor numbers as in the enumeration)."""

    ops: tuple
    outputs: tuple        # tensor numbers of the outputs (unconsumed operator outputs)
    P: int                # pool size: tensor numbers below it are pool tensors

    @property
    def pool_inputs(self) -> list[int]:
        """Pool tensors used, in order of first use."""
        seen = []
        for op in self.ops:
            for i in op.inputs:
                if i < self.P and i not in seen:
                    seen.append(i)
        return seen


def decode(eng: Engine, row) -> CGraph:
    """Replay an encoded graph (template, in0, in1 per operator) into a CGraph."""
    shapes = {i: t.shape for i, t in enumerate(eng.pool)}
    splits = {i: t.split for i, t in enumerate(eng.pool)}
    pools = {i: t for i, t in enumerate(eng.pool)}
    nxt = eng.P
    ops = []
    uses: dict[int, int] = {}
    for k in range(0, len(row), 3):
        tid = int(row[k])
        if tid < 0:
            break
        t = eng.templates[tid]
        ins = tuple(int(v) for v in row[k + 1:k + 1 + t.arity])
        proxies = [_Proxy(shapes[i], splits[i], pools.get(i)) for i in ins]
        meta = t.infer(*proxies)
        attrs = node_attrs(t, [shapes[i] for i in ins], [s for s, _ in meta])
        ops.append(COp(tid, t.op, tuple(sorted(attrs.items())), ins, nxt, tuple(s for s, _ in meta)))
        for j, (s, sp) in enumerate(meta):
            shapes[nxt + j], splits[nxt + j] = s, sp
        for i in ins:
            uses[i] = uses.get(i, 0) + 1
        nxt += len(meta)
    outputs = tuple(i for i in range(eng.P, nxt) if uses.get(i, 0) == 0)
    return CGraph(tuple(ops), outputs, eng.P)


class _Proxy:
    __slots__ = ("shape", "split", "pool", "weight", "input_weight", "dval")

    def __init__(self, shape, split, pool_tensor):
        self.shape, self.split = shape, split
        self.pool = pool_tensor.pool if pool_tensor is not None else -1


class Evaluator:
    """Memoised modular evaluation in value-id space (values shared across graphs and renamings)."""

    def __init__(self, eng: Engine):
        self.eng = eng
        dist, _ = fpm.pool_values(eng.s)
        self.pool_ids = [fpm.digest(v) for v in dist]
        self.arrays = {i: v for i, v in zip(self.pool_ids, dist)}
        self.memo: dict = {}

    def output_ids(self, g: CGraph, perm: dict[int, int] | None = None) -> list[int]:
        perm = perm or {}
        eng = self.eng
        ids: dict[int, int] = {}
        for op in g.ops:
            ins = tuple(ids[i] if i >= eng.P else self.pool_ids[perm.get(i, i)] for i in op.inputs)
            key = (op.tid, ins, op.attrs if op.op == "split" else ())
            outs = self.memo.get(key)
            if outs is None:
                t = eng.templates[op.tid]
                vals = t.mod([self.arrays[i] for i in ins], dict(op.attrs), eng.p)
                outs = tuple(fpm.digest(v) for v in vals)
                for i, v in zip(outs, vals):
                    self.arrays.setdefault(i, v)
                self.memo[key] = outs
            for j, v in enumerate(outs):
                ids[op.first + j] = v
        return [ids[o] for o in g.outputs]


def renamings(eng: Engine, g: CGraph):
    """Every renaming of g's pool inputs onto the same copies, within roles (identity first)."""
    by_role: dict[int, list[int]] = {}
    for i in sorted(g.pool_inputs):
        by_role.setdefault(eng.role_of[i], []).append(i)
    roles = sorted(by_role)
    choices = [list(itertools.permutations(by_role[r])) for r in roles]
    for combo in itertools.product(*choices):
        perm = {}
        for r, image in zip(roles, combo):
            perm.update(dict(zip(by_role[r], image)))
        yield perm


def rename(g: CGraph, perm: dict[int, int], P: int) -> CGraph:
    ops = tuple(COp(o.tid, o.op, o.attrs, tuple(perm.get(i, i) if i < P else i for i in o.inputs), o.first, o.shapes)
                for o in g.ops)
    return CGraph(ops, g.outputs, P)


def role_signature(eng: Engine, g: CGraph) -> tuple:
    counts: dict[int, int] = {}
    for i in g.pool_inputs:
        counts[eng.role_of[i]] = counts.get(eng.role_of[i], 0) + 1
    return tuple(sorted(counts.items()))


@dataclass(frozen=True)
class Pair:
    g1: CGraph
    g2: CGraph
    mapping: tuple        # (g1 output tensor, g2 output tensor) pairs, in g1's output order


def process_bucket(eng: Engine, bucket: list, stats: dict, ev: Evaluator | None = None) -> list[Pair]:
    """Candidate pairs of one collapsed-fingerprint bucket that agree exactly (up to renaming).

    1. Graphs that are renamings of one another are one graph (kept once).
    2. Every remaining pair is a candidate; it agrees exactly when some renaming of the
       inputs makes the distinct-value fingerprints equal. Each graph is put in the naming
       that minimises its fingerprint, so agreeing graphs share that fingerprint and naming.
    """
    graphs, seen = [], set()
    for row in bucket:
        g = decode(eng, row)
        canon = min(structure_key(eng, rename(g, perm, eng.P)) for perm in renamings(eng, g))
        if canon in seen:
            stats["renamed_duplicates"] = stats.get("renamed_duplicates", 0) + 1
            continue
        seen.add(canon)
        graphs.append(g)
    n = len(graphs)
    stats["candidates"] = stats.get("candidates", 0) + n * (n - 1) // 2
    if n < 2:
        return []
    ev = ev or Evaluator(eng)
    groups: dict[int, list] = {}
    for g in graphs:
        best = None
        for perm in renamings(eng, g):
            ids = ev.output_ids(g, perm)
            fp = fpm.combine(ids)
            if best is None or fp < best[0]:
                best = (fp, perm, ids)
        fp, perm, ids = best
        groups.setdefault(fp, []).append((rename(g, perm, eng.P), ids))
    out = []
    for fp in groups:
        members = groups[fp]
        for (ga, ia), (gb, ib) in itertools.combinations(members, 2):
            pos = dict(zip(ib, gb.outputs))
            mapping = tuple((oa, pos[va]) for oa, va in zip(ga.outputs, ia))
            out.append(Pair(ga, gb, mapping))
    stats["exact"] = stats.get("exact", 0) + len(out)
    return out


def structure_key(eng: Engine, g: CGraph) -> tuple:
    """Exact identity of a graph: its operator expressions (names included), commutative-aware."""
    keys = node_keys(eng, g, lambda i: (0, i, (), (), 0))
    return tuple(sorted(keys[o.first] for o in g.ops)), tuple(sorted(keys[o] for o in g.outputs))


def node_keys(eng: Engine, g: CGraph, leaf) -> dict[int, tuple]:
    """Merkle key of every tensor; leaf(i) keys pool tensor i. Commutative operands are sorted.

    Keys are uniform 5-tuples (kind, number, operands, attributes, output index) so any two compare.
    """
    keys: dict[int, tuple] = {}

    def key_of(i):
        return keys[i] if i >= eng.P else leaf(i)

    for op in g.ops:
        t = eng.templates[op.tid]
        args = [key_of(i) for i in op.inputs]
        if t.commutative:
            args = sorted(args)
        attrs = op.attrs if t.op == "split" else ()
        for j in range(len(op.shapes)):
            keys[op.first + j] = (1, t.tid, tuple(args), attrs, j)
    return keys


# ---- graph-form graphs and the floating-point re-check -------------------------------------

def to_graph(eng: Engine, g: CGraph, outputs=None, names=None):
    """A graph-form Graph of g; pool tensors become inputs (activations) or weights by role."""
    names = names or eng.names
    b = GraphBuilder()
    refs = {}
    for i in g.pool_inputs:
        role = eng.s.roles[eng.role_of[i]]
        maker = b.weight if role.kind == "weight" else b.input
        refs[i] = maker(names[i], eng.pool[i].shape, "float32")
    for op in g.ops:
        args = [refs[i] for i in op.inputs]
        r = b.op(op.op, *args, **dict(op.attrs))
        outs = (r,) if isinstance(r, Ref) else r
        for j, ref in enumerate(outs):
            refs[op.first + j] = ref
    return b.build([refs[o] for o in (outputs or g.outputs)])


def float_check(eng: Engine, pair: Pair, seeds=(11, 12), rtol: float = 1e-6) -> bool:
    """Both graphs agree in float64 on fresh random inputs, for every seed."""
    try:
        ga = to_graph(eng, pair.g1, [a for a, _ in pair.mapping])
        gb = to_graph(eng, pair.g2, [b for _, b in pair.mapping])
    except GraphError:
        return False
    return graphs_agree(ga, gb, seeds, rtol)


def graphs_agree(ga, gb, seeds, rtol: float = 1e-6) -> bool:
    for seed in seeds:
        rng = np.random.default_rng(seed)
        feeds = {}
        for node in ga.nodes + gb.nodes:
            if node.op in ("input", "weight"):
                name = node.attr("name")
                if name not in feeds:
                    feeds[name] = rng.uniform(-1.0, 1.0, size=node.attr("shape"))
        try:
            ya = evaluate(ga, feeds, dtype="float64")
            yb = evaluate(gb, feeds, dtype="float64")
        except GraphError:
            return False
        for u, v in zip(ya, yb):
            u, v = np.asarray(u, np.float64), np.asarray(v, np.float64)
            if u.shape != v.shape:
                return False
            scale = max(1.0, float(np.max(np.abs(u), initial=0.0)))
            if not np.allclose(u, v, rtol=rtol, atol=rtol * scale):
                return False
    return True


def describe(eng: Engine, g: CGraph, outputs=None) -> str:
    """One-line text of a concrete graph over the pool's names, e.g. 'relu(conv2d(i1, k1))'."""
    def text(i):
        if i < eng.P:
            return eng.names[i]
        for op in g.ops:
            if op.first <= i < op.first + len(op.shapes):
                t = eng.templates[op.tid]
                suffix = f".{i - op.first}" if len(op.shapes) > 1 else ""
                return f"{t.label or t.family}({', '.join(text(j) for j in op.inputs)}){suffix}"
        raise KeyError(i)
    return ", ".join(text(o) for o in (outputs or g.outputs))
