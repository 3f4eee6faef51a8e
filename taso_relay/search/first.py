"""Rules applied before the search, everywhere they match (TASO's pre-defined fusions).

Some rewrites only ever remove work: folding a batch norm into the conv before
it leaves a conv and a bias add, the rest being weights that FoldConstant
computes once. The backtracking search would find each of them, but it takes
the largest predicted gains first, and a rewrite taken first (a conv moved
past a pool, two convs merged) can leave a batch norm no longer next to its
conv. TVM runs FoldBatchnormToConv2D before anything else for the same reason.

The same holds for summing the branches of a re-parameterizable block (RepVGG's, MobileOne's: one conv
instead of several, rules/handwritten_sum.json); applied in sweeps, MobileOne-S0's 170 such rewrites go
through at once, where the search, one rewrite per expansion, ran out of time before they were done.

A rule opts in with `"phase": "first"` in its provenance (rules/handwritten_norm.json, handwritten_pad.json,
handwritten_sum.json). No step (a sweep, or one rewrite) may raise the cost, so the search's guarantee holds;
a sweep is judged on its total, so a rule given this phase must never raise the cost on its own either.
"""
from __future__ import annotations

import time
from typing import Iterable

from ..graph import Graph
from ..subst.apply import RewriteRejected, apply, apply_many
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
    """`graph` with every first-phase rewrite applied that does not raise the cost; the trail.

    Each sweep applies all disjoint matches at once (one rewrite, one costing: a model folds
    its batch norms in a sweep or two); a sweep that cannot go through whole, or would cost
    more, falls back to one match at a time.
    """
    trail: list[tuple[Match, Graph]] = []
    if not matchers:
        return graph, trail
    cost = cost_fn(graph)
    refused: set = set()  # (rule id, matched nodes' hashes): tried here, would cost more
    while len(trail) < limit and time.perf_counter() < deadline:
        hashes = graph.node_hashes
        candidates, used = [], set()
        for matcher in matchers:
            for match in matcher.find(graph):
                key = (match.rule.id, tuple(sorted(hashes[i] for i in match.nodes)))
                if key in refused or used & set(match.nodes) or check_context(match, graph) is not None:
                    continue
                candidates.append((key, match))
                used.update(match.nodes)
        if not candidates:
            break
        if len(candidates) > 1:
            try:
                rewritten = apply_many(graph, [m for _k, m in candidates]).graph
            except RewriteRejected:
                rewritten = None
            if rewritten is not None:
                new_cost = cost_fn(rewritten)
                if new_cost <= cost * (1 + REL_TOL):
                    trail.extend((m, graph) for _k, m in candidates)
                    graph, cost = rewritten, new_cost
                    continue
        progress = False
        for key, match in candidates:  # one at a time: the first that goes through, then sweep again
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
            break
        if not progress:
            break
    return graph, trail
