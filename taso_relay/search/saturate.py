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

A `judge` (a dearer model: kernels tuned and timed) may decide instead of the
search's model. The analytic model prices BERT's Q/K/V merge 1% dearer: its
FLOPs are the same, and two split kernels are added. Tuned, the merged matmul
ran 20% faster than the three it replaced. Time spent judging does not count
against the deadline; a merge the search's model prices far dearer
(JUDGE_SLACK) is not judged at all, since judging means tuning its kernels.
"""
from __future__ import annotations

import time
import weakref
from collections import Counter
from typing import Iterable

from ..graph import Graph
from ..subst.apply import RewriteRejected, apply
from ..subst.match import Match, Matcher, check_context
from .costing import CostFn
from .first import REL_TOL

HEAVY = ("matmul", "conv2d")

# How much dearer than the graph before the search's model may price a merge and still have the
# judge tune and time it. Measured under the tuning lowering: BERT's Q/K/V merge was priced 1%
# dearer and tuned 20% faster per kernel; ResNeXt's and NASNet's merges 1.5% and 2.5% dearer;
# Inception-v3's conv merges 9.7% dearer, and judging them took 24 minutes of tuning, for nothing.
JUDGE_SLACK = 0.05


def merge_rules(matchers: Iterable[Matcher]) -> list[Matcher]:
    """The rules that merge heavy operators: fewer matmuls or convs, and a concat or split in the target.

    Those whose parts are read by slices come last: saturating pairwise merges of k matmuls with them
    leaves slices of slices, while the split ones leave a split whose bias adds `hoist_rules` move into
    the merged matmul (on NASRNN's cells the analytic model prices that 0.4% cheaper); the search can
    still read the split as slices afterwards (h-split-slices*)."""
    out = []
    for matcher in matchers:
        rule = matcher.rule
        source, target = Counter(p.op for p in rule.source), Counter(p.op for p in rule.target)
        if any(target[op] < source[op] for op in HEAVY) and ("concat" in target or "split" in target):
            out.append(matcher)
    return sorted(out, key=lambda m: any(p.op == "strided_slice" for p in m.rule.target))


def merges_matmuls(rule) -> bool:
    """Whether `rule` leaves fewer matmuls than it matched by one on weights concatenated side by side
    (a wider matmul: what runs slower per flop under TVM's default CPU lowering). Merges that stack
    activations, or concatenate the inner dimension (x1 w1 + x2 w2), are not these."""
    source, target = Counter(p.op for p in rule.source), Counter(p.op for p in rule.target)
    if target["matmul"] >= source["matmul"]:
        return False
    concats = {p.id: p for p in rule.target if p.op == "concat"}
    for p in rule.target:
        if p.op == "matmul" and len(p.inputs) > 1 and p.inputs[1] in concats:
            axis = concats[p.inputs[1]].attrs.get("axis")
            if axis in (1, -1):  # 2-D weights side by side (rank-2 concat: axis 1 is the last)
                return True
    return False


def hoist_rules(matchers: Iterable[Matcher]) -> list[Matcher]:
    """The rules that do element-wise work once before a split instead of once per part.

    After a merge the bias adds of the merged matmuls read the split's parts, so they no longer
    fuse into the matmul (TVM's CombineParallelMatmul merges the biases too); `h-split-bias`
    (rules/handwritten_split.json) adds the concatenated biases before the split instead, as
    `h-split-bias-channels` does for merged convs' (1, C, 1, 1) biases, and `h-split-relu` (sigmoid,
    tanh) runs an activation once before the split.
    """
    out = []
    for matcher in matchers:
        rule = matcher.rule
        source, target = Counter(p.op for p in rule.source), Counter(p.op for p in rule.target)
        if source["split"] and target["split"] and _work(target) < _work(source) and not any(
                target[op] > source[op] for op in HEAVY):
            out.append(matcher)
    return out


_KINDS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def merges_and_hoists(index) -> tuple[list[Matcher], list[Matcher]]:
    """merge_rules and hoist_rules of a RuleIndex, sorted out once per index: the pass searches
    every function of a model with the same index of thousands of rules."""
    kinds = _KINDS.get(index)
    if kinds is None:
        kinds = _KINDS[index] = (merge_rules(index.matchers), hoist_rules(index.matchers))
    return kinds


def _work(ops: Counter) -> int:
    return sum(n for op, n in ops.items() if op not in ("split", "concat"))


def saturate(graph: Graph, matchers: list[Matcher], cost_fn: CostFn, deadline: float,
             limit: int = 256, judge: CostFn | None = None,
             hoist: list[Matcher] = (), margin: float = 0.0,
             slack: float = JUDGE_SLACK, refused: list | None = None) -> tuple[Graph, list[tuple[Match, Graph]]]:
    """`graph` with each merge rule applied to its fixpoint where that lowers the cost; the trail.

    hoist: rules applied to their fixpoints after each merge rule's, before the result is priced.
    judge: the cost that decides (default `cost_fn`); the time spent in it extends the deadline.
    margin: the fraction a rule's fixpoint must lower the cost by to be kept.
    slack: with a judge, a fixpoint `cost_fn` prices more than this fraction dearer is not judged.
    refused: a list that gets (graph, its trail, `cost_fn`'s price, the judge's) of each fixpoint
    the judge refused."""
    trail: list[tuple[Match, Graph]] = []
    decide = judge or cost_fn

    def priced(g: Graph) -> float:
        nonlocal deadline
        t = time.perf_counter()
        value = decide(g)
        deadline += time.perf_counter() - t
        return value

    cost = priced(graph)
    estimate = cost_fn(graph) if judge is not None else 0.0
    for matcher in matchers:
        reached, steps = _fixpoint(graph, matcher, deadline, limit - len(trail))
        if not steps:
            continue
        for other in hoist:
            reached, more = _fixpoint(reached, other, deadline, limit - len(trail) - len(steps))
            steps.extend(more)
        guess = cost_fn(reached) if judge is not None else 0.0
        if judge is not None and guess > estimate * (1 + slack):
            continue  # far out of reach: not worth tuning its new kernels to judge it
        new_cost = priced(reached)
        if new_cost < cost * (1 - max(REL_TOL, margin)):
            graph, cost, estimate = reached, new_cost, guess
            trail.extend(steps)
        elif refused is not None and judge is not None:
            refused.append((reached, trail + steps, guess, new_cost))
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
