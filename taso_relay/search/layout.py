"""Every conv to NHWC, and the transposes that costs carried away until they cancel: one step, priced whole.

One conv alone in NHWC is dearer (two transposes around it); the gain is only
there once every conv is converted and the transposes between them cancel, so
no backtracking step would take the first rewrite. Like the merge saturation
(search/saturate.py) the proved layout rules (rules/layout/nhwc.json,
generator/layout_rules.py) are applied to their fixpoint and the result is one
candidate, for a judge that times tuned kernels: the analytic model prices a
conv the same in either layout, so only the transposes would count.
"""
from __future__ import annotations

import time
from functools import lru_cache
from types import SimpleNamespace

from ..graph import Graph, Ref
from ..graph.broadcasts import drop_implied_broadcasts
from ..graph.spell_group_norms import spell_group_norms
from ..graph.spell_shuffles import spell_shuffles
from ..graph.cse import merge_common_subexpressions
from ..graph.moves import collapse_moves
from ..subst.apply import RewriteRejected, apply_many
from ..subst.match import Match, Matcher, check_context
from ..subst.rule_io import load_rules, shipped_rules_dir
from .saturate import _fixpoint

LAYOUTS = ("nhwc",)
CONV_RULE = "l-conv-nhwc"  # the rule that converts a conv; the others move and cancel transposes
MAX_STEPS = 4096


@lru_cache(maxsize=None)
def layout_matchers(layout: str) -> tuple[Matcher, ...]:
    """The proved rules of `layout` (a file under rules/layout/), compiled once."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    rules = load_rules(shipped_rules_dir() / "layout" / f"{layout}.json", status="PROVED")
    return tuple(Matcher(r) for r in rules)


@lru_cache(maxsize=None)
def carried_ops(layout: str) -> frozenset:
    """The operators `layout`'s rules carry a transpose through (all their source operators but the convs they
    convert and the transposes they move)."""
    return frozenset(n.op for m in layout_matchers(layout) for n in m.rule.source) - {"transpose", "conv2d"}


class _DenseOnly:
    """A matcher's matches less the conversions of grouped convs (depthwise ones included)."""

    def __init__(self, matcher: Matcher):
        self.matcher = matcher

    def find(self, graph: Graph) -> list[Match]:
        return [m for m in self.matcher.find(graph) if m.rule.id != CONV_RULE or m.variables.get("g", 1) == 1]


def has_grouped_convs(graph: Graph) -> bool:
    return any(n.op == "conv2d" and n.attr("groups") != 1 for n in graph.nodes)


def convert_layout(graph: Graph, layout: str = "nhwc", deadline: float | None = None,
                   limit: int = MAX_STEPS, grouped: bool = True) -> tuple[Graph, list[tuple[Match, Graph]], bool]:
    """`graph` with the layout rules applied until none matches; the trail of (match, graph before);
    whether it got there (False: the deadline or the step limit came first). grouped=False leaves
    grouped and depthwise convs in their layout: tuned, they may run slower in NHWC than dense ones do
    (nobody has measured it for every target), so the search offers both conversions to its judge.

    The conv rule goes first, then the rules that move and cancel transposes, round after round
    until a round changes nothing; then the chains of transposes and reshapes left are written shorter
    where they can be, and the rounds go on. Each rule only moves an NHWC-to-NCHW transpose down the
    graph, cancels a pair, or turns an NCHW conv into an NHWC one, and each chain written has fewer
    transposes or nodes (or its one transpose where the rules move it, or, once, the transpose to NCHW it
    started with moved to its end for them), so the rounds end."""
    deadline = time.perf_counter() + 60.0 if deadline is None else deadline
    trail: list[tuple[Match, Graph]] = []
    if any(n.op == "conv2d" for n in graph.nodes):  # operators the rules carry transposes through:
        graph, _ = spell_shuffles(graph)  # ShuffleNet's, pixel shuffles
        graph, _ = spell_group_norms(graph)  # PyTorch's exported GroupNorm
        graph, _ = drop_implied_broadcasts(graph)  # a gate's expand_as before its multiply
    matchers = layout_matchers(layout) if grouped else tuple(_DenseOnly(m) for m in layout_matchers(layout))
    changed = True
    while changed and len(trail) < limit and time.perf_counter() < deadline:
        changed = False
        graph = _unshare_repeated_transposes(graph)
        for matcher in matchers:
            graph, steps = _all_at_once(graph, matcher, deadline, limit - len(trail))
            trail.extend(steps)
            changed = changed or bool(steps)
        if not changed and trail:
            # at the rules' fixpoint: the chains of moves they left where a transpose met a reshape, written
            # shorter or with the transpose last for the rules to carry on (graph/moves.py)
            before = graph
            graph, said = collapse_moves(graph, layout=True, carried=carried_ops(layout))
            trail.extend((Collapsed(where), before) for where in said)
            changed = bool(said)
    complete = not changed and time.perf_counter() < deadline  # a round cut short is not the fixpoint
    # each conv got its own transpose of its input: where several read one value (an Inception
    # block's branches, the model's input) one transpose serves them all
    graph, _ = merge_common_subexpressions(graph)
    return graph, trail, complete


class Collapsed:
    """A trail's record of a chain of moves written shorter (graph/moves.py): not a rule's match, but read as
    one by the report (its rule's id and text, and where)."""

    rule = SimpleNamespace(id="moves-collapse", text="transposes and reshapes => at most reshape, transpose, "
                                                      "reshape moving each element alike")

    def __init__(self, where: str):
        self.where = where

    def describe(self, graph: Graph) -> str:
        return self.where


def _unshare_repeated_transposes(graph: Graph) -> Graph:
    """A node that reads one transpose's result more than once (concat(q, q, q)) reads copies of it.

    A rule's pattern nodes match distinct graph nodes, so the concat rules, whose pattern has one
    transpose per input, left such a concat in NCHW between two transposes. The copies are one
    value computed alike: the conversion's closing merge of common subexpressions joins what is left
    of them."""
    nodes = list(graph.nodes)
    for i, node in enumerate(graph.nodes):
        inputs, seen = list(node.inputs), set()
        for k, ref in enumerate(inputs):
            if ref in seen and graph.nodes[ref.node].op == "transpose":
                nodes.append(graph.nodes[ref.node])
                inputs[k] = Ref(len(nodes) - 1, ref.index)
            seen.add(ref)
        if tuple(inputs) != node.inputs:
            nodes[i] = type(node)(node.op, node.attrs, tuple(inputs), node.types)
    return graph if len(nodes) == len(graph.nodes) else graph.rebuilt(nodes, graph.outputs)


def _all_at_once(graph: Graph, matcher: Matcher, deadline: float, limit: int):
    """Like saturate._fixpoint, but each pass over the graph applies every match that does not touch
    another one chosen in it (apply_many): a model's hundreds of convs take a few passes, not one
    pass each (full-size graphs would not convert within the search's time otherwise)."""
    steps: list[tuple[Match, Graph]] = []
    while len(steps) < limit and time.perf_counter() < deadline:
        chosen, taken, replaced, read = [], set(), set(), set()
        for match in matcher.find(graph):
            outs, ins = set(match.source_outputs), set(match.inputs)
            if taken.intersection(match.nodes) or ins & replaced or outs & read:
                continue
            if check_context(match, graph) is not None:
                continue
            chosen.append(match)
            taken.update(match.nodes)
            replaced |= outs
            read |= ins
            if len(steps) + len(chosen) >= limit:
                break
        if not chosen:
            break
        try:
            rewritten = apply_many(graph, chosen).graph
        except RewriteRejected:  # e.g. a cycle through two of them: one at a time, as saturation does
            graph, more = _fixpoint(graph, matcher, deadline, limit - len(steps))
            steps.extend(more)
            break
        steps.extend((m, graph) for m in chosen)
        graph = rewritten
    return graph, steps
