"""Rules applied before the search, everywhere they match (TASO's pre-defined fusions).

Some rewrites only ever remove work: folding a batch norm into the conv before
it leaves a conv and a bias add, the rest being weights that FoldConstant
computes once. The backtracking search would find each of them, but it takes
the largest predicted gains first, and a rewrite taken first (a conv moved
past a pool, two convs merged) can leave a batch norm no longer next to its
conv. TVM runs FoldBatchnormToConv2D before anything else for the same reason.

A rule opts in with `"phase": "first"` in its provenance (rules/handwritten_norm.json).
Each application must not raise the cost, so the search's guarantee holds.
"""
from __future__ import annotations

import time
from typing import Iterable

from ..graph import Graph
from ..subst.apply import RewriteRejected, apply
from ..subst.match import Match, Matcher, check_context
from ..subst.rule import Rule
from .costing import CostFn

REL_TOL = 1e-9


def first_phase_rules(rules: Iterable[Rule | Matcher]) -> list[Matcher]:
    out = []
    for r in rules:
        rule = r.rule if isinstance(r, Matcher) else r
        if dict(rule.provenance or {}).get("phase") == "first":
            out.append(r if isinstance(r, Matcher) else Matcher(rule))
    return out


def apply_first(graph: Graph, matchers: list[Matcher], cost_fn: CostFn, deadline: float,
                limit: int = 10_000) -> tuple[Graph, list[tuple[Match, Graph]]]:
    """`graph` with every first-phase rewrite applied that does not raise the cost; the trail."""
    trail: list[tuple[Match, Graph]] = []
    if not matchers:
        return graph, trail
    cost = cost_fn(graph)
    refused: set = set()  # (rule id, matched nodes' hashes): tried here, would cost more
    progress = True
    while progress and len(trail) < limit and time.perf_counter() < deadline:
        progress = False
        hashes = graph.node_hashes
        for matcher in matchers:
            for match in matcher.find(graph):
                key = (match.rule.id, tuple(sorted(hashes[i] for i in match.nodes)))
                if key in refused or check_context(match, graph) is not None:
                    continue
                try:
                    rewritten = apply(graph, match).graph
                except RewriteRejected:
                    refused.add(key)
                    continue
                new_cost = cost_fn(rewritten)
                if new_cost > cost * (1 + REL_TOL):
                    refused.add(key)
                    continue
                trail.append((match, graph))
                graph, cost, progress = rewritten, new_cost, True
                break  # the other matches refer to the old graph
            if progress:
                break
    return graph, trail
