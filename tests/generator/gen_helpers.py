"""Small generator settings for fast tests, and rule-shape helpers."""
from __future__ import annotations

from collections import Counter

from taso_relay.generator.config import Role, Settings

X2 = Role("x", (2, 4), "any", 2)
W2 = Role("w", (4, 4), "weight", 2)
I4 = Role("i", (2, 4, 5, 6), "any", 2)
K33 = Role("k", (4, 4, 3, 3), "weight", 2)
P11 = Role("p", (4, 4, 1, 1), "weight", 1)
SC = Role("c", (), "weight", 1)


def small(ops, k=2, roles=(X2, W2), **kw) -> Settings:
    return Settings(max_ops=k, ops=tuple(ops), roles=tuple(roles), **kw)


def op_bag(nodes) -> tuple:
    return tuple(sorted(Counter(n.op for n in nodes).items()))


def find(rules, source_ops: dict, target_ops: dict, outputs: int = 1):
    want_s = tuple(sorted(source_ops.items()))
    want_t = tuple(sorted(target_ops.items()))
    return [r for r in rules if op_bag(r.source) == want_s and op_bag(r.target) == want_t
            and len(r.outputs) == outputs]
