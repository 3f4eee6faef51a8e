"""Shared by the matcher, applier and search tests: the hand-written rules, a fixed cost,
a numeric comparison, and synthetic models in the graph form (no bridge needed).

tests/search/conftest.py puts this folder on sys.path.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from taso_relay.graph import Graph, GraphBuilder, Ref, evaluate, random_feeds
from taso_relay.subst import load_rules, rule_from_dict
from taso_relay.subst.index import SOURCE_OPS, index_of

RULES_FILE = Path(__file__).resolve().parent / "rules_fixture.json"


def fixture_rules(*ids: str):
    rules = {r.id: r for r in load_rules(RULES_FILE)}
    return [rules[i] for i in ids] if ids else list(rules.values())


class OpCost:
    """A fixed cost per operator kind; sources and weight-only nodes (FoldConstant's) are free."""

    TABLE = {"conv2d": 10.0, "matmul": 10.0, "batch_norm": 4.0, "softmax": 3.0, "layer_norm": 3.0}

    def __init__(self, table=None, default: float = 1.0):
        self.table = dict(self.TABLE if table is None else table)
        self.default = default
        self.calls = 0

    def graph_cost(self, graph: Graph) -> float:
        self.calls += 1
        foldable = index_of(graph).foldable
        return sum(self.table.get(n.op, self.default) for i, n in enumerate(graph.nodes)
                   if n.op not in SOURCE_OPS and not foldable[i])


PAD1 = (1, 1, 1, 1)


def nodes_of(g: Graph, op: str) -> list[int]:
    return [i for i, n in enumerate(g.nodes) if n.op == op]


def rule(id, inputs, source, target, outputs, constraints=()):
    def node(nid, op, ins, **attrs):
        return {"id": nid, "op": op, "inputs": ins, "attrs": attrs}

    return rule_from_dict({
        "id": id, "inputs": [i if isinstance(i, dict) else {"name": i} for i in inputs],
        "source": [node(*n[:3], **(n[3] if len(n) > 3 else {})) for n in source],
        "target": [node(*n[:3], **(n[3] if len(n) > 3 else {})) for n in target],
        "outputs": outputs, "constraints": list(constraints)})


def two_convs(stride2=(1, 1), kernel2=3, w2_from_activation=False) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (1, 4, 8, 8))
    c1 = b.op("conv2d", x, b.weight("w1", (3, 4, 3, 3)), padding=PAD1)
    if w2_from_activation:
        w2 = b.op("reshape", b.op("relu", b.input("y", (5 * 4 * kernel2 * kernel2,))), shape=(5, 4, kernel2, kernel2))
    else:
        w2 = b.weight("w2", (5, 4, kernel2, kernel2))
    c2 = b.op("conv2d", x, w2, padding=PAD1, strides=stride2)
    return b.build([c1, c2])


def count(graph: Graph, op: str) -> int:
    return graph.op_counts().get(op, 0)


def assert_same_outputs(before: Graph, after: Graph, seed: int = 0, rtol: float = 1e-4, atol: float = 1e-4):
    feeds = random_feeds(before, np.random.default_rng(seed), include_weights=True)
    for name in feeds:  # variances must be positive for batch norm
        if name.startswith("var"):
            feeds[name] = np.abs(feeds[name]) + 0.5
    want = evaluate(before, feeds, dtype="float64")
    got = evaluate(after, feeds, dtype="float64")
    assert len(want) == len(got)
    for a, b in zip(want, got):
        assert a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol)


# ---- synthetic models (graph form, no bridge needed) ----------------------------------
def _bn(b: GraphBuilder, x, c: int, name: str):
    params = [b.weight(f"{p}_{name}", (c,)) for p in ("gamma", "beta", "mean", "var")]
    return b.op("batch_norm", x, *params)


def inception_like(blocks: int = 6, channels: int = 16, size: int = 8) -> Graph:
    """Blocks of four parallel branches (1x1 convs on one input, conv+bn+relu), concatenated."""
    b = GraphBuilder()
    x = b.input("x", (1, channels, size, size))
    for k in range(blocks):
        branches = []
        for j, (kh, pad) in enumerate([(1, 0), (1, 0), (3, 1), (1, 0)]):
            w = b.weight(f"w{k}_{j}", (channels // 4, channels, kh, kh))
            c = b.op("conv2d", x, w, padding=(pad,) * 4)
            branches.append(b.op("relu", _bn(b, c, channels // 4, f"{k}_{j}")))
        x = b.op("concat", *branches, axis=1)
    return b.build([x])


def bert_like(layers: int = 4, seq: int = 8, hidden: int = 16, heads: int = 2) -> Graph:
    """Encoder layers: Q/K/V projections sharing their input, attention, FFN with relu, residuals."""
    b = GraphBuilder()
    x = b.input("x", (seq, hidden))
    hd = hidden // heads
    for k in range(layers):
        proj = []
        for name in ("q", "k", "v"):
            m = b.op("matmul", x, b.weight(f"{name}{k}", (hidden, hidden)))
            proj.append(b.op("add", m, b.weight(f"{name}b{k}", (hidden,))))
        q, kk, v = (b.op("transpose", b.op("reshape", p, shape=(seq, heads, hd)), perm=(1, 0, 2)) for p in proj)
        kt = b.op("transpose", kk, perm=(0, 2, 1))
        probs = b.op("softmax", b.op("matmul", q, kt), axis=2)
        ctx = b.op("reshape", b.op("transpose", b.op("matmul", probs, v), perm=(1, 0, 2)), shape=(seq, hidden))
        o = b.op("add", b.op("matmul", ctx, b.weight(f"o{k}", (hidden, hidden))), x)
        x = b.op("layer_norm", o, b.weight(f"ln{k}g", (hidden,)), b.weight(f"ln{k}b", (hidden,)))
        h = b.op("relu", b.op("matmul", x, b.weight(f"f1_{k}", (hidden, 2 * hidden))))
        o = b.op("add", b.op("matmul", h, b.weight(f"f2_{k}", (2 * hidden, hidden))), x)
        x = b.op("layer_norm", o, b.weight(f"ln2{k}g", (hidden,)), b.weight(f"ln2{k}b", (hidden,)))
    return b.build([x])


def rnn_like(steps: int = 3, hidden: int = 8, gates: int = 4, residual: bool = False) -> Graph:
    """An unrolled recurrent cell: per gate x @ W + h @ U, then a tree of element-wise gates that
    mixes every matmul of a step, and the state carried to the next step (as in NASRNN);
    `residual` adds the old state to the new one."""
    b = GraphBuilder()
    x = b.input("x", (1, hidden))
    h = b.weight("h0", (1, hidden))
    for s in range(steps):
        t = [b.op("add", b.op("matmul", x, b.weight(f"w{s}_{i}", (hidden, hidden))),
                  b.op("matmul", h, b.weight(f"u{s}_{i}", (hidden, hidden)))) for i in range(gates)]
        acts = ["sigmoid", "tanh", "relu"]
        gated = [b.op(acts[i % 3], v) for i, v in enumerate(t)]
        while len(gated) > 1:
            a, c = gated.pop(0), gated.pop(0)
            gated.append(b.op("tanh", b.op("mul" if len(gated) % 2 else "add", a, c)))
        h = b.op("add", gated[0], h) if s and residual else gated[0]
    return b.build([h])


def random_graph(seed: int, steps: int = 12) -> Graph:
    """A random small model mixing the fixture rules' patterns: convs (some parallel), batch norms,
    relus, adds; matmuls (some parallel, some chained). Weights have no values (tests feed them)."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder()
    maps = [b.input("x", (1, 4, 6, 6))]  # [1, 4, 6, 6] activations
    mats = [b.input("a", (4, 4))]  # [4, 4] activations
    for k in range(steps):
        kind = rng.integers(0, 7)
        if kind <= 1:  # conv, often on a value that already has a conv user
            src = maps[int(rng.integers(0, len(maps)))]
            kh = int(rng.choice([1, 3]))
            act = str(rng.choice(["none", "none", "relu"]))
            maps.append(b.op("conv2d", src, b.weight(f"cw{k}", (4, 4, kh, kh)), padding=(kh // 2,) * 4,
                             activation=act))
        elif kind == 2:
            maps.append(_bn(b, maps[-1], 4, str(k)))
        elif kind == 3:
            pool = maps if rng.integers(0, 2) else mats
            pool.append(b.op("relu", pool[-1]))
        elif kind == 4:
            pool = maps if rng.integers(0, 2) else mats
            i, j = rng.integers(0, len(pool), size=2)
            pool.append(b.op("add", pool[int(i)], pool[int(j)]))
        else:
            src = mats[int(rng.integers(0, len(mats)))]
            right = b.weight(f"mw{k}", (4, 4)) if rng.integers(0, 3) else mats[int(rng.integers(0, len(mats)))]
            mats.append(b.op("matmul", src, right))
    graph = b.build([maps[-1], mats[-1]])
    users = graph.users
    extra = [Ref(i, 0) for i, n in enumerate(graph.nodes)
             if not users[i] and n.op not in ("input", "weight") and Ref(i, 0) not in graph.outputs]
    return Graph(graph.nodes, graph.outputs + tuple(extra), graph.values, graph.payloads)


SLICE_READERS = ("h-merge-matmul", "h-split-slices", "h-slice-of-slice")


def without_slice_readers(index):
    """A RuleIndex of `index`'s rules less those that read a merge's parts by slices: what is left merges
    matmuls with a split after, which the analytic model prices uphill one merge at a time (the tests of
    saturation and of the judge are about crossing that hill)."""
    from taso_relay.subst.incremental import RuleIndex

    return RuleIndex([m for m in index.matchers if not m.rule.id.startswith(SLICE_READERS)])
