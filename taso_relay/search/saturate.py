"""Merge rules applied to a fixpoint, the result priced as one step (TVM's CombineParallel* passes).

Merging k parallel matmuls that read one input takes k-1 pairwise merges, and
each one alone is uphill: its split stands between the matmul and the bias add
and activation that used to fuse into it. NASRNN's cells read x and h with
eight matmuls each; merged, the analytic model prices the quick model 1.86x
cheaper (TVM's CombineParallelMatmul measures 1.79x under MetaSchedule), yet
the backtracking search never crosses the hill (not even with alpha 1.5). So
each merge rule (one that leaves fewer matmuls or convs, with a concat or a
split) is applied wherever it matches, again and again, and the graph it
reaches is kept only if it costs less than the graph before.
"""
from __future__ import annotations

import time
from collections import Counter
from typing import Iterable

from ..graph import Graph
from ..subst.apply import RewriteRejected, apply
from ..subst.match import Match, Matcher, check_context
from .costing import CostFn
from .first import REL_TOL

HEAVY = ("matmul", "conv2d")


def merge_rules(matchers: Iterable[Matcher]) -> list[Matcher]:
    """The rules that merge heavy operators: fewer matmuls or convs, and a concat or split in the target."""
    out = []
    for matcher in matchers:
        rule = matcher.rule
        source, target = Counter(p.op for p in rule.source), Counter(p.op for p in rule.target)
        if any(target[op] < source[op] for op in HEAVY) and ("concat" in target or "split" in target):
            out.append(matcher)
    return out


def saturate(graph: Graph, matchers: list[Matcher], cost_fn: CostFn, deadline: float,
             limit: int = 256) -> tuple[Graph, list[tuple[Match, Graph]]]:
    """`graph` with each merge rule applied to its fixpoint where that lowers the cost; the trail."""
    trail: list[tuple[Match, Graph]] = []
    cost = cost_fn(graph)
    for matcher in matchers:
        reached, steps = _fixpoint(graph, matcher, deadline, limit - len(trail))
        if not steps:
            continue
        new_cost = cost_fn(reached)
        if new_cost < cost * (1 - REL_TOL):
            graph, cost = reached, new_cost
            trail.extend(steps)
        if time.perf_counter() > deadline or len(trail) >= limit:
            break
    return graph, trail


def _fixpoint(graph: Graph, matcher: Matcher, deadline: float, limit: int):
    steps: list[tuple[Match, Graph]] = []
    refused: set = set()
    while len(steps) < limit and time.perf_counter() < deadline:
        hashes = graph.node_hashes
        for match in matcher.find(graph):
            key = tuple(sorted(hashes[i] for i in match.nodes))
            if key in refused or check_context(match, graph) is not None:
                continue
            try:
                rewritten = apply(graph, match).graph
            except RewriteRejected:
                refused.add(key)
                continue
            steps.append((match, graph))
            graph = rewritten
            break
        else:
            break  # no match went through: the fixpoint
    return graph, steps
