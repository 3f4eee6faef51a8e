"""TASO's pruning of redundant candidate pairs (SOSP'19, section 3.3).

* Input renaming: two pairs equal up to renaming inputs of a role (and up to
  swapping the two sides) are one substitution; keep the first.
* Common subgraph: if both graphs contain the same operator on the same
  inputs, the pair is implied by a smaller one (replace the common part by a
  fresh input).
* Common final operator: if every output is produced on both sides by the
  same operator whose other operands are the same graph inputs, the pair is
  the smaller pair under that operator. Looser than TASO's: the operand that
  differs is not required to have one shape on both sides, so conv(x, w) and
  conv(x, enlarge(w)) (other paddings) are dropped though w and enlarge(w) are
  no pair. Requiring it adds 24 proven rule directions (all enlarge); measured
  in session 34, they changed no result on the benchmark models and cost the
  search 6-22% more time, so the looser test stays (bench/rulesets/README.md).
* Independent parts (an addition to TASO's list): both sides are made of
  pieces that share no tensor, so the pair is smaller pairs side by side.
* Non-canonical input order is enforced during enumeration (enumerate.py):
  input copies are used in order of first use, so those graphs never exist.

Renaming-equivalent pairs share a collapsed-fingerprint bucket, so the
renaming stage works per bucket and buckets stay independent tasks.
"""
from __future__ import annotations

from .enumerate import Engine
from .pairing import Pair, node_keys, rename, renamings


def pair_key(eng: Engine, pair: Pair) -> tuple:
    """Canonical form of a pair under renaming inputs within roles and swapping sides."""
    best = None
    for perm in renamings(eng, pair.g1):
        g1, g2 = rename(pair.g1, perm, eng.P), rename(pair.g2, perm, eng.P)
        k1 = node_keys(eng, g1, lambda i: (0, i, (), (), 0))
        k2 = node_keys(eng, g2, lambda i: (0, i, (), (), 0))
        s1 = tuple(sorted(k1[o.first] for o in g1.ops))
        s2 = tuple(sorted(k2[o.first] for o in g2.ops))
        m = tuple(sorted((k1[a], k2[b]) for a, b in pair.mapping))
        cand = min((s1, s2, m), (s2, s1, tuple(sorted((b, a) for a, b in m))))
        if best is None or cand < best:
            best = cand
    return best


def dedup_renamings(eng: Engine, pairs: list[Pair]) -> list[Pair]:
    seen, out = set(), []
    for p in pairs:
        k = pair_key(eng, p)
        if k not in seen:
            seen.add(k)
            out.append(p)
    return out


def _op_keys(eng: Engine, g) -> set:
    keys = node_keys(eng, g, lambda i: (0, i, (), (), 0))
    return {keys[o.first] for o in g.ops}


def common_subgraph(eng: Engine, pair: Pair) -> bool:
    return bool(_op_keys(eng, pair.g1) & _op_keys(eng, pair.g2))


def common_final_op(eng: Engine, pair: Pair) -> bool:
    def producer(g, tensor):
        for op in g.ops:
            if op.first <= tensor < op.first + len(op.shapes):
                return op
        raise KeyError(tensor)

    for a, b in pair.mapping:
        oa, ob = producer(pair.g1, a), producer(pair.g2, b)
        if oa.tid != ob.tid or a - oa.first != b - ob.first or not oa.inputs:
            return False
        orders = [ob.inputs]
        if eng.templates[oa.tid].commutative:
            orders.append(tuple(reversed(ob.inputs)))
        diff = min(sum(1 for x, y in zip(oa.inputs, ins) if x != y or x >= eng.P) for ins in orders)
        if diff > 1:
            return False
    return True


def _components(g) -> int:
    """Number of connected pieces of g (operators joined by any shared tensor, inputs included)."""
    parent = list(range(len(g.ops)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[int, int] = {}
    for k, op in enumerate(g.ops):
        for t in list(op.inputs) + list(range(op.first, op.first + len(op.shapes))):
            if t in owner:
                parent[find(k)] = find(owner[t])
            else:
                owner[t] = k
    return len({find(k) for k in range(len(g.ops))})


def independent_parts(eng: Engine, pair: Pair) -> bool:
    """Both sides fall apart into pieces that share nothing: the pair is smaller pairs side by side."""
    return _components(pair.g1) > 1 and _components(pair.g2) > 1
