"""Incremental matching: the matches of a rewritten graph from those of its parent.

A rewrite changes few nodes: the target's nodes, and the nodes whose operands
were redirected to them (together, `Rewrite.dirty`). A structural match
depends only on its matched nodes and their operand edges, so

- a parent match none of whose nodes were removed or made dirty is still a
  match of the child, with node numbers mapped (`Match.remapped`);
- every other match of the child uses a dirty node: each pattern node whose
  operator a dirty node has is anchored at that node (after a cheap check of
  its operands' and users' operators), and nothing else is tried.

Patterns in unconnected parts are the exception: whether their parts are close
depends on paths that a rewrite can shorten or cut, so their matches within
`Matcher.part_reach` of the rewrite are looked for again.

Context checks (escaping intermediates, foldability) depend on users and are
redone per graph by whoever applies the matches; they are cheap.
"""
from __future__ import annotations

from typing import Iterable, Iterator

from ..graph import Graph
from .apply import Rewrite
from .index import index_of, neighbourhood
from .match import Match, Matcher, check_context
from .rule import Rule


class RuleIndex:
    """A rule list prepared for incremental matching: pattern nodes grouped by operator, and
    identical pattern nodes (common across generated rules) checked once per graph node."""

    def __init__(self, rules: Iterable[Rule | Matcher]):
        self.matchers = [r if isinstance(r, Matcher) else Matcher(r) for r in rules]
        groups: dict[tuple, tuple] = {}
        for i, m in enumerate(self.matchers):
            for pid, pn in m.pnodes.items():
                lits = tuple((k, slot, t) for k, slot, t in pn.attrs if t[0] == 0)
                key = (pn.op, len(pn.inputs), lits, pn.commutative, pn.operand_ops, pn.user_ops)
                if key not in groups:
                    groups[key] = (pn, [])
                groups[key][1].append((i, pid))
        self.by_op: dict[str, list[tuple]] = {}  # operator -> [(representative node, [(rule, pid)])]
        for pn, members in groups.values():
            self.by_op.setdefault(pn.op, []).append((pn, members))
        # rules in unconnected parts: a rewrite anywhere near can bring parts together or apart
        self.parted = frozenset(i for i, m in enumerate(self.matchers) if m.part_reach)
        self.part_reach = max((self.matchers[i].part_reach for i in self.parted), default=0)
        # rules with the same source pattern, whose bindings are searched for once (Matcher.structure)
        shared: dict[tuple, list[int]] = {}
        for i, m in enumerate(self.matchers):
            shared.setdefault(m.structure if m.structure is not None else (i,), []).append(i)
        self.groups: list[list[int]] = list(shared.values())

    def anchors(self, graph: Graph, nodes: Iterable[int]) -> dict[int, list[tuple[str, int]]]:
        """For each rule, the (pattern node, graph node) pairs that pass the cheap check."""
        index = index_of(graph)
        out: dict[int, list[tuple[str, int]]] = {}
        graph_nodes = graph.nodes
        for g in nodes:
            for pn, members in self.by_op.get(graph_nodes[g].op, ()):
                if pn.quick(index, g):
                    for i, pid in members:
                        out.setdefault(i, []).append((pid, g))
        return out


class MatchSet:
    """Every structural match of a list of rules in one graph (stored by rule, non-empty only)."""

    def __init__(self, graph: Graph, rules: RuleIndex, by_rule: dict[int, list[Match]],
                 carried: dict[tuple, Match] | None = None):
        self.graph = graph
        self.rules = rules
        self.by_rule = by_rule
        # For a derived set: the parent match each kept match came from (by key), so that a
        # caller can reuse what it computed for it (costs, say) where nothing near it changed.
        self.carried = carried or {}

    @property
    def matchers(self) -> list[Matcher]:
        return self.rules.matchers

    @classmethod
    def build(cls, graph: Graph, rules: "Iterable[Rule | Matcher] | RuleIndex") -> "MatchSet":
        index = rules if isinstance(rules, RuleIndex) else RuleIndex(rules)
        by_rule = {}
        for group in index.groups:
            members = [index.matchers[i] for i in group]
            results = Matcher.find_shared(members, graph) if len(group) > 1 else [members[0].find(graph)]
            for i, found in zip(group, results):
                if found:
                    by_rule[i] = found
        return cls(graph, index, by_rule)

    def derive(self, rewrite: Rewrite) -> "MatchSet":
        """The match set of rewrite.graph, reusing this one (rewrite must apply to self.graph)."""
        child = rewrite.graph
        dirty = rewrite.dirty
        matchers = self.rules.matchers
        anchors = self.rules.anchors(child, sorted(dirty))
        parted = self.rules.parted
        reach = self.rules.part_reach
        near = neighbourhood(index_of(child), dirty, reach) if reach else {}
        by_rule: dict[int, list[Match]] = {}
        carried: dict[tuple, Match] = {}
        old_to_new = rewrite.old_to_new
        fresh = self._anchored(child, anchors)
        for i in sorted(set(self.by_rule) | set(anchors) | parted):
            kept = []
            for m in self.by_rule.get(i, ()):
                moved = m.remapped(old_to_new)
                if moved is not None and dirty.isdisjoint(moved.nodes):
                    kept.append(moved)
                    carried[moved.key] = m
            if i in parted:
                kept = self._parts_update(matchers[i], child, kept, near)
            elif i in anchors:
                kept.extend(fresh[i])
            if kept:
                by_rule[i] = kept
        return MatchSet(child, self.rules, by_rule, carried)

    def _anchored(self, child: Graph, anchors: dict[int, list[tuple[str, int]]]) -> dict[int, list[Match]]:
        """find_anchored for every connected rule with anchors, searched once per source pattern and
        set of anchors (rules of one pattern get the same anchors from RuleIndex.anchors)."""
        matchers, parted = self.rules.matchers, self.rules.parted
        out: dict[int, list[Match]] = {}
        for group in self.rules.groups:
            same: dict[tuple, list[int]] = {}
            for i in group:
                if i in anchors and i not in parted:
                    same.setdefault(tuple(anchors[i]), []).append(i)
            for where, members in same.items():
                if len(members) == 1:
                    out[members[0]] = matchers[members[0]].find_anchored(child, where)
                else:
                    out.update(zip(members, Matcher.find_shared([matchers[i] for i in members], child, where)))
        return out

    @staticmethod
    def _parts_update(matcher: Matcher, child: Graph, kept: list[Match], near: dict[int, int]) -> list[Match]:
        """A pattern in unconnected parts matches where its parts are close; a rewrite can change
        which parts are close anywhere within `part_reach` of it, so look again there."""
        reach = matcher.part_reach
        out = [m for m in kept
               if min(near.get(g, reach + 1) for g in m.nodes) > reach or matcher.parts_close(child, m)]
        seen = {m.key for m in out}
        around: dict[str, list[int]] = {}
        for g in sorted(g for g, d in near.items() if d <= reach):
            around.setdefault(child.nodes[g].op, []).append(g)
        out.extend(m for m in matcher.find_touching(child, around) if m.key not in seen)
        return out

    def __iter__(self) -> Iterator[Match]:
        for i in sorted(self.by_rule):
            yield from self.by_rule[i]

    def __len__(self) -> int:
        return sum(len(ms) for ms in self.by_rule.values())

    def applicable(self) -> Iterator[Match]:
        """The matches that pass the context checks in this graph."""
        for m in self:
            if check_context(m, self.graph) is None:
                yield m


__all__ = ["MatchSet", "RuleIndex"]
