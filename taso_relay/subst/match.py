"""Matching rules (plain data) against graphs.

A `Matcher` compiles one rule's source pattern into plans, one per choice of
anchor (the pattern node matched first). A plan matches the anchor and its
whole input cone backwards, from outputs towards inputs (torch.fx's
discipline); the remaining pattern nodes -- the other outputs of a
multi-output rule, such as the second of two convs sharing an input -- are
then reached forwards through the users of values already bound, so their
candidates are a handful of nodes, not the whole graph.

A pattern in unconnected parts (``relu(x1), relu(x2) => split(relu(concat(x1,
x2)))``, common among generated rules) would match any pair of places in the
graph; it matches only where its parts lie within `gap` edges of each other.

A *structural* match depends only on the matched nodes and their input edges
(and, for a pattern in parts, on how far apart they are):
operators, attribute templates (literals, ``?var`` bindings, ``=expr``
values), commutative operands in either order, shape constraints, and a
target that instantiates with the same output types. Whether the match may be
applied in a particular graph (no escaping intermediates, weight-only inputs
really weight-only, not a weight-only computation) is `check_context`; whether
applying it creates a cycle is the applier's business. `explain` says which of
these stopped a rule at a given node.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable, Iterator, Mapping, Sequence

from ..graph import Graph, GraphBuilder, Node, Ref
from ..graph.types import GraphError
from . import expr
from .index import GraphIndex, describe_node, index_of
from .pattern import (IN, LIT, CompiledNode, Plan, Step, compile_node, distances, freeze, make_plan,
                      parts_close, pattern_graph, pattern_parts, show_template, unify, unmatchable)
from .rule import Rule, split_ref

DEFAULT_LIMIT = 32  # matches enumerated per anchor node (symmetric patterns can explode)
# A pattern in unconnected parts (relu(x1), relu(x2) => split(relu(concat(x1, x2)))) matches any pair
# of places: quadratic in the graph, and only ever useful for nearby ones. A part not connected to
# what is already bound is looked for within this many edges (undirected) of it.
DEFAULT_GAP = 2


# ---- results ------------------------------------------------------------------
@dataclass(frozen=True)
class TargetPlan:
    """The rule's target instantiated once for a match, in scratch numbering.

    Scratch refs 0..k-1 are the rule's pattern inputs (in `Rule.inputs` order);
    refs k.. are `nodes`. The applier renumbers them into the graph.
    """

    nodes: tuple[Node, ...]
    outputs: tuple[Ref, ...]
    n_inputs: int


class Match:
    """Where a rule's source pattern sits in one graph (node numbers are that graph's)."""

    __slots__ = ("rule", "nodes", "inputs", "variables", "target", "source_outputs", "key")

    def __init__(self, rule: Rule, nodes: tuple[int, ...], inputs: tuple[Ref, ...], variables: Mapping[str, Any],
                 target: TargetPlan, source_outputs: tuple[Ref, ...]):
        self.rule = rule
        self.nodes = nodes  # graph node per source pattern node (Rule.source order)
        self.inputs = inputs  # graph value per pattern input (Rule.inputs order)
        self.variables = variables
        self.target = target  # the rule's target, instantiated for these bindings
        self.source_outputs = source_outputs  # values the rule's outputs replace (Rule.outputs order)
        self.key = (rule.id, nodes, inputs)  # identifies the match within its graph

    @property
    def node_set(self) -> frozenset[int]:
        return frozenset(self.nodes)

    def remapped(self, old_to_new: Sequence[int]) -> "Match | None":
        """The same match in a graph whose node i became old_to_new[i] (-1: removed)."""
        nodes = tuple(old_to_new[g] for g in self.nodes)
        if min(nodes) < 0:
            return None
        inputs = tuple(Ref(old_to_new[r.node], r.index) for r in self.inputs)
        if any(r.node < 0 for r in inputs):
            return None
        outs = tuple(Ref(old_to_new[r.node], r.index) for r in self.source_outputs)
        return Match(self.rule, nodes, inputs, self.variables, self.target, outs)

    def describe(self, graph: Graph) -> str:
        """Where the match is, readable without node numbers: outputs, their shapes and operands."""
        parts = []
        for ref in self.source_outputs:
            node = graph.nodes[ref.node]
            parts.append(f"{node.op}%{ref.node}{'.' + str(ref.index) if ref.index else ''}"
                         f":{node.types[ref.index]}")
        names = []
        for pin, ref in zip(self.rule.inputs, self.inputs):
            names.append(f"{pin.name}={describe_node(graph, ref.node)}")
        return ", ".join(parts) + " (" + ", ".join(names) + ")"

    def __repr__(self) -> str:
        return f"Match({self.rule.id}, nodes={list(self.nodes)})"


@dataclass(frozen=True)
class MatchResult:
    """A match, or why there is none (ONNX Script's MatchResult.fail("reason"))."""

    match: Match | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.match is not None

    def __bool__(self) -> bool:
        return self.ok

    @classmethod
    def fail(cls, reason: str) -> "MatchResult":
        return cls(None, reason)


class _State:
    """Partial match; copied on extension so that backtracking needs no undo."""

    __slots__ = ("nodes", "used", "inputs", "variables", "deferred")

    def __init__(self, nodes, used, inputs, variables, deferred):
        self.nodes, self.used, self.inputs = nodes, used, inputs
        self.variables, self.deferred = variables, deferred

    @property
    def depth(self) -> int:
        return 2 * len(self.nodes) + len(self.inputs)

    def vertex(self, name: str) -> int:
        """The graph node bound to a pattern node or input."""
        return self.nodes[name] if name in self.nodes else self.inputs[name].node


class _Why:
    """Collects the failure that got furthest, for `explain`; None in the fast path."""

    def __init__(self):
        self.depth = -1
        self.reason = "no candidate node"

    def fail(self, depth: int, reason: str) -> None:
        if depth > self.depth:
            self.depth, self.reason = depth, reason


# ---- the matcher ----------------------------------------------------------------
class Matcher:
    """One rule's source pattern, compiled. Between calls it keeps only caches (plans per anchor,
    verdicts per binding), so one Matcher serves any number of graphs."""

    def __init__(self, rule: Rule, limit: int = DEFAULT_LIMIT, gap: int = DEFAULT_GAP):
        self.rule = rule
        self.limit = limit
        self.gap = gap
        self.problem = unmatchable(rule)
        self.pnodes: dict[str, CompiledNode] = {}
        if self.problem is None:
            for k, pn in enumerate(rule.source):
                self.pnodes[pn.id] = compile_node(pn, k, rule)
        self.output_ids = [split_ref(r)[0] for r in rule.side_outputs("source")]
        self.source_refs = [split_ref(r) for r in rule.side_outputs("source")]
        self._plans: dict[str, Plan] = {}
        self._verdicts: dict[tuple, tuple] = {}  # finish() memo: bound types and attributes -> verdict

    @cached_property
    def ops(self) -> frozenset[str]:
        return frozenset(pn.op for pn in self.rule.source)

    def plan(self, anchor: str | None = None) -> Plan:
        anchor = anchor or self.output_ids[0]
        plan = self._plans.get(anchor)
        if plan is None:
            plan = self._plans[anchor] = make_plan(self.rule, anchor, self.gap)
        return plan

    def best_anchor(self, index: GraphIndex) -> str:
        """The pattern node whose operator is rarest in the graph (fewest anchors to try)."""
        order = self.output_ids + [pn.id for pn in self.rule.source if pn.id not in self.output_ids]
        return min(order, key=lambda pid: len(index.by_op.get(self.pnodes[pid].op, ())))

    # -- enumeration ----------------------------------------------------------------
    def find(self, graph: Graph) -> list[Match]:
        """All structural matches in `graph`, in a deterministic order."""
        if self.problem is not None:
            return []
        index = index_of(graph)
        anchor = self.best_anchor(index)
        plan = self.plan(anchor)
        pn = self.pnodes[anchor]
        found: list[Match] = []
        for g in index.by_op.get(pn.op, []):
            if pn.quick(index, g):
                found.extend(self._matches_at(plan, graph, index, g, None))
        return found

    def find_anchored(self, graph: Graph, anchors: Iterable[tuple[str, int]]) -> list[Match]:
        """The structural matches with pattern node pid at graph node g, for each (pid, g) given
        (distinct matches, in the order found)."""
        if self.problem is not None:
            return []
        index = index_of(graph)
        found: list[Match] = []
        seen: set[tuple] = set()
        for pid, g in anchors:
            for m in self._matches_at(self.plan(pid), graph, index, g, None):
                if m.key not in seen:
                    seen.add(m.key)
                    found.append(m)
        return found

    def find_touching(self, graph: Graph, nodes_by_op: Mapping[str, Sequence[int]]) -> list[Match]:
        """The structural matches that use at least one of the given nodes (grouped by operator).

        Incremental matching: every new match of a rewritten graph uses a node the
        rewrite added or redirected, so each pattern node is anchored at each of them.
        """
        if self.problem is not None:
            return []
        index = index_of(graph)
        found: list[Match] = []
        seen: set[tuple] = set()
        for pid, pn in self.pnodes.items():
            anchors = nodes_by_op.get(pn.op)
            if not anchors:
                continue
            plan = self.plan(pid)
            for g in anchors:
                if not pn.quick(index, g):
                    continue
                for m in self._matches_at(plan, graph, index, g, None):
                    if m.key not in seen:
                        seen.add(m.key)
                        found.append(m)
        return found

    # -- patterns in unconnected parts ------------------------------------------------
    @cached_property
    def parts(self) -> tuple[tuple[str, ...], ...]:
        return pattern_parts(self.rule) if self.problem is None else ()

    @cached_property
    def part_reach(self) -> int:
        """For a pattern in several parts: how far from a changed node a match whose parts
        became (or stopped being) close can lie. 0 for a connected pattern."""
        if len(self.parts) < 2:
            return 0
        adjacency = pattern_graph(self.rule)
        diameter = max(max(distances(adjacency, v).values()) for part in self.parts for v in part)
        return self.gap + 1 + diameter

    def parts_close(self, graph: Graph, match: Match) -> bool:
        """Whether a match's parts are still within `gap` of each other in `graph`."""
        where = {pn.id: g for pn, g in zip(self.rule.source, match.nodes)}
        where.update((pin.name, r.node) for pin, r in zip(self.rule.inputs, match.inputs))
        return parts_close(self.parts, where.__getitem__, index_of(graph), self.gap)

    def matches_at(self, graph: Graph, node: int, anchor: str | None = None) -> list[Match]:
        """Structural matches whose `anchor` pattern node (default: first output) is `node`."""
        if self.problem is not None:
            return []
        return list(self._matches_at(self.plan(anchor), graph, index_of(graph), node, None))

    def explain_at(self, graph: Graph, node: int, anchor: str | None = None) -> MatchResult:
        """The first structural match at `node`, or the reason of the failure that got furthest."""
        if self.problem is not None:
            return MatchResult.fail(self.problem)
        why = _Why()
        for m in self._matches_at(self.plan(anchor), graph, index_of(graph), node, why):
            return MatchResult(m)
        return MatchResult.fail(why.reason)

    def _matches_at(self, plan: Plan, graph: Graph, index: GraphIndex, g: int, why) -> Iterator[Match]:
        return self._finished(self._bindings_at(plan, graph, index, g, why), graph, index, why)

    def _bindings_at(self, plan: Plan, graph: Graph, index: GraphIndex, g: int, why) -> Iterator[_State]:
        """Every binding of the whole source pattern with the plan's anchor at g (structure only)."""
        run = _Run(self, graph, index, why)
        for st in run.node(plan.anchor, g, _State({}, frozenset(), {}, {}, ())):
            yield from run.steps(plan.steps, 0, st)

    def _finished(self, bindings: Iterable[_State], graph: Graph, index: GraphIndex, why) -> Iterator[Match]:
        """The bindings that pass this rule's own checks, as matches (at most `limit`, no repeats)."""
        seen = set()
        count = 0
        run = _Run(self, graph, index, why)
        for full in bindings:
            m = run.finish(full)
            if m is None or m.key in seen:
                continue
            seen.add(m.key)
            yield m
            count += 1
            if count >= self.limit:
                return

    # -- rules with the same source pattern -------------------------------------------
    @cached_property
    def structure(self) -> tuple | None:
        """Everything the structural search depends on (not the constraints or the target, which
        `finish` checks): rules that share it have the same bindings, found once for all of them
        (generated rule sets hold many rules per source pattern: 4,440 shipped, about two per source).
        None: unmatchable, or not hashable (then matched alone)."""
        if self.problem is not None:
            return None
        key = (tuple(self.pnodes.values()), tuple(self.rule.inputs), tuple(self.source_refs), self.gap, self.limit)
        try:
            hash(key)
        except TypeError:
            return None
        return key

    @staticmethod
    def find_shared(members: Sequence["Matcher"], graph: Graph,
                    anchors: Iterable[tuple[str, int]] | None = None) -> list[list[Match]]:
        """`find` (or `find_anchored` at `anchors`) for each of several matchers of one `structure`:
        each binding is searched for once, then checked by every member (same results, same order)."""
        first = members[0]
        index = index_of(graph)
        if anchors is None:
            anchor = first.best_anchor(index)
            pn = first.pnodes[anchor]
            anchors = [(anchor, g) for g in index.by_op.get(pn.op, []) if pn.quick(index, g)]
        found: list[list[Match]] = [[] for _ in members]
        seen: list[set] = [set() for _ in members]
        for pid, g in anchors:
            copies = itertools.tee(first._bindings_at(first.plan(pid), graph, index, g, None), len(members))
            for m, bindings, out, keys in zip(members, copies, found, seen):
                for match in m._finished(bindings, graph, index, None):
                    if match.key not in keys:
                        keys.add(match.key)
                        out.append(match)
        return found


class _Run:
    """One matching attempt against one graph (holds what the recursion shares)."""

    __slots__ = ("m", "graph", "nodes", "index", "why")

    def __init__(self, matcher: Matcher, graph: Graph, index: GraphIndex, why: _Why | None):
        self.m, self.graph, self.nodes, self.index, self.why = matcher, graph, graph.nodes, index, why

    def _fail(self, st: _State, reason: str) -> None:
        self.why.fail(st.depth, reason)

    def node(self, pid: str, g: int, st: _State) -> Iterator[_State]:
        pn = self.m.pnodes[pid]
        bound = st.nodes.get(pid)
        if bound is not None:
            if bound == g:
                yield st
            elif self.why:
                self._fail(st, f"pattern node '{pid}' is %{bound} on one path and %{g} on another")
            return
        node = self.nodes[g]
        if node.op != pn.op:
            if self.why:
                self._fail(st, f"pattern node '{pid}' needs {pn.op}, found {describe_node(self.graph, g)}")
            return
        if g in st.used:
            if self.why:
                self._fail(st, f"%{g} is already matched by another pattern node (matches are one-to-one)")
            return
        if len(node.inputs) != len(pn.inputs):
            if self.why:
                self._fail(st, f"pattern node '{pid}' has {len(pn.inputs)} operands, %{g} has {len(node.inputs)}")
            return
        variables, deferred = st.variables, st.deferred
        if pn.attrs:
            attrs = node.attrs
            copied = False
            for key, slot, template in pn.attrs:
                if slot < len(attrs) and attrs[slot][0] == key:
                    value = attrs[slot][1]
                else:
                    value = dict(attrs).get(key)
                if template[0] == LIT:
                    if value != template[1]:
                        if self.why:
                            self._fail(st, f"attribute {key} of %{g} {node.op} is {value!r}, "
                                           f"pattern node '{pid}' needs {template[1]!r}")
                        return
                    continue
                if not copied:
                    variables, deferred, copied = dict(variables), list(deferred), True
                before = dict(variables) if self.why else None
                if not unify(template, value, variables, deferred, key):
                    if self.why:
                        self._fail(st, f"attribute {key} of %{g} {node.op} is {value!r}, pattern node "
                                       f"'{pid}' needs {show_template(template, before)}")
                    return
            deferred = tuple(deferred)
        nodes = dict(st.nodes)
        nodes[pid] = g
        st = _State(nodes, st.used | {g}, st.inputs, variables, deferred)
        refs = node.inputs
        yield from self.operands(pn, refs, 0, st)
        if pn.commutative and len(refs) == 2 and refs[0] != refs[1]:
            yield from self.operands(pn, (refs[1], refs[0]), 0, st)

    def operands(self, pn: CompiledNode, refs, k: int, st: _State) -> Iterator[_State]:
        if k == len(refs):
            yield st
            return
        kind, name, index = pn.inputs[k]
        ref = refs[k]
        if kind == IN:
            prev = st.inputs.get(name)
            if prev is None:
                inputs = dict(st.inputs)
                inputs[name] = ref
                st = _State(st.nodes, st.used, inputs, st.variables, st.deferred)
            elif prev != ref:
                if self.why:
                    self._fail(st, f"pattern input '{name}' is %{prev.node}.{prev.index} for one use and "
                                   f"%{ref.node}.{ref.index} for another (operand {k} of '{pn.id}')")
                return
            yield from self.operands(pn, refs, k + 1, st)
            return
        if ref.index != index:
            if self.why:
                self._fail(st, f"operand {k} of '{pn.id}' must be output {index} of '{name}', "
                               f"found output {ref.index} of %{ref.node}")
            return
        for st2 in self.node(name, ref.node, st):
            yield from self.operands(pn, refs, k + 1, st2)

    def steps(self, steps: Sequence[Step], s: int, st: _State) -> Iterator[_State]:
        if s == len(steps):
            yield st
            return
        step = steps[s]
        if step.pid in st.nodes:
            yield from self.steps(steps, s + 1, st)
            return
        op = self.m.pnodes[step.pid].op
        if step.via is None:  # a part of the pattern not connected to what is bound: look nearby
            seeds = set(st.used).union(r.node for r in st.inputs.values())
            near = frozenset().union(*(self.index.ball(v, step.reach) for v in seeds))
            candidates = sorted(u for u in near if self.nodes[u].op == op)
        else:
            kind, name, idx = step.via
            ref = st.inputs[name] if kind == IN else Ref(st.nodes[name], idx)
            candidates = [u for u in self.index.uses_of(ref) if self.nodes[u].op == op]
        free = [u for u in candidates if u not in st.used]
        if not free and self.why:
            where = (f"within {step.reach} edges of the nodes matched so far" if step.via is None
                     else f"among the users of '{step.via[1]}'")
            taken = f" other than %{', %'.join(map(str, candidates))}, already matched" if candidates else ""
            self._fail(st, f"no {op} {where}{taken} for pattern node '{step.pid}'")
        for u in free:
            for st2 in self.node(step.pid, u, st):
                yield from self.steps(steps, s + 1, st2)

    def finish(self, st: _State) -> Match | None:
        """Checks that need every binding: inputs, distance of unconnected parts, =expr attributes,
        constraints, the target. The last three depend only on the bound types and attribute
        values, so their verdict is memoised per rule."""
        rule, graph = self.m.rule, self.graph
        inputs = []
        for pin in rule.inputs:
            ref = st.inputs[pin.name]
            if ref.node in st.used:
                if self.why:
                    self.why.fail(1000, f"pattern input '{pin.name}' would be %{ref.node}, which the match "
                                        f"itself computes")
                return None
            inputs.append(ref)
        if len(self.m.parts) > 1 and not parts_close(self.m.parts, st.vertex, self.index, self.m.gap):
            if self.why:
                self.why.fail(1000, f"the unconnected parts of the pattern are more than {self.m.gap} edges apart")
            return None
        try:
            key = (tuple(graph.type_of(r) for r in inputs), tuple(sorted(st.variables.items())), st.deferred)
            verdict = self.m._verdicts.get(key)
        except TypeError:  # an unhashable attribute value: no memo
            key, verdict = None, None
        if verdict is None:
            verdict = self._verdict(st, inputs)
            if key is not None:
                if len(self.m._verdicts) > 4096:
                    self.m._verdicts.clear()
                self.m._verdicts[key] = verdict
        target, depth, reason = verdict
        if target is None:
            if self.why:
                self.why.fail(depth, reason)
            return None
        source_outputs = tuple(Ref(st.nodes[pid], idx) for pid, idx in self.m.source_refs)
        nodes = tuple(st.nodes[pn.id] for pn in rule.source)
        return Match(rule, nodes, tuple(inputs), dict(st.variables), target, source_outputs)

    def _verdict(self, st: _State, inputs: list[Ref]) -> tuple[TargetPlan | None, int, str]:
        rule, graph = self.m.rule, self.graph
        depth = 1001
        shapes: dict[str, tuple] = {}
        for pin, ref in zip(rule.inputs, inputs):
            shapes[pin.name] = graph.type_of(ref).shape
        for pn in rule.source:
            types = graph.nodes[st.nodes[pn.id]].types
            shapes[pn.id] = types[0].shape
            for k, t in enumerate(types):
                shapes[f"{pn.id}:{k}"] = t.shape
        env = expr.Env(shapes, st.variables)
        for key, text, value in st.deferred:
            try:
                wanted = freeze(expr.evaluate(text, env))
            except (expr.ExprError, IndexError, TypeError, ZeroDivisionError) as exc:
                return None, depth, f"attribute {key}: cannot evaluate ={text}: {exc}"
            if wanted != value:
                return None, depth, f"attribute {key} is {value!r}, pattern computes ={text} = {wanted!r}"
        ok, reason = rule.constraints_hold(shapes, st.variables)
        if not ok:
            return None, depth + 1, reason
        target = _instantiate_target(rule, graph, inputs, st.variables, shapes)
        if isinstance(target, str):
            return None, depth + 2, target
        for (src_text, tgt_text), (pid, idx), tgt in zip(rule.outputs, self.m.source_refs, target.outputs):
            want = graph.type_of(Ref(st.nodes[pid], idx))
            got = _scratch_type(target, inputs, graph, tgt)
            if want != got:
                return None, depth + 2, (f"target output {tgt_text} has type {got}, source output "
                                         f"{src_text} has {want}")
        return target, depth, ""


def _scratch_type(target: TargetPlan, inputs, graph: Graph, ref: Ref):
    if ref.node < target.n_inputs:
        return graph.type_of(inputs[ref.node])
    return target.nodes[ref.node - target.n_inputs].types[ref.index]


FLOATS = ("float16", "float32", "float64")  # what numpy builds constants in (not bfloat16 or float8)


def _instantiate_target(rule: Rule, graph: Graph, inputs: Sequence[Ref], variables, shapes) -> TargetPlan | str:
    builder = GraphBuilder()
    bound = {}
    dtypes = set()
    for pin, ref in zip(rule.inputs, inputs):
        t = graph.type_of(ref)
        bound[pin.name] = builder.input(pin.name, t.shape, t.dtype)
        dtypes.add(t.dtype)
    # the target's constants in the matched tensors' float type where they share one (float16 models)
    constant_dtype = next(iter(dtypes)) if len(dtypes) == 1 and next(iter(dtypes)) in FLOATS else None
    try:
        refs = rule.instantiate("target", builder, bound, variables, shapes, constant_dtype)
        outs = tuple(_lookup(refs, r) for r in rule.side_outputs("target"))
    except (GraphError, expr.ExprError, IndexError, TypeError, ZeroDivisionError) as exc:
        return f"target does not instantiate here: {exc}"
    k = len(rule.inputs)
    return TargetPlan(tuple(builder.nodes[k:]), outs, k)


def _lookup(refs, ref_text: str) -> Ref:
    if ref_text in refs:
        return refs[ref_text]
    name, index = split_ref(ref_text)
    return refs[f"{name}:{index}"]


# ---- context checks -------------------------------------------------------------
def check_context(match: Match, graph: Graph) -> str | None:
    """Why `match` may not be applied in `graph` (None: it may).

    - an intermediate value the rule does not map is used outside the match
      (or is a graph output): replacing the match would lose it;
    - a pattern input of kind "weight" is bound to a value that depends on an
      activation, or one of kind "input" to a weight-only value;
    - every matched node computes on weights only: FoldConstant folds that
      subgraph, so rewriting it gains nothing.
    """
    index = index_of(graph)
    matched = match.node_set
    mapped = set(match.source_outputs)
    nodes = graph.nodes
    for pn, g in zip(match.rule.source, match.nodes):
        node = nodes[g]
        for k in range(len(node.types)):
            ref = Ref(g, k)
            if ref in mapped:
                continue
            if ref in index.outputs:
                return (f"intermediate {describe_node(graph, g)} (pattern node '{pn.id}') is a graph output "
                        f"that the rule does not map")
            for user in index.uses_of(ref):
                if user not in matched:
                    return (f"intermediate {describe_node(graph, g)} (pattern node '{pn.id}') is also used "
                            f"by {describe_node(graph, user)} outside the match, and the rule does not map it")
    for pin, ref in zip(match.rule.inputs, match.inputs):
        if pin.kind == "weight" and not index.foldable[ref.node]:
            return (f"pattern input '{pin.name}' must be weight-only, but {describe_node(graph, ref.node)} "
                    f"depends on an activation")
        if pin.kind == "input" and index.foldable[ref.node]:
            return (f"pattern input '{pin.name}' must be an activation, but {describe_node(graph, ref.node)} "
                    f"is weight-only")
    if all(index.foldable[g] for g in match.nodes):
        return "the match computes on weights only; FoldConstant folds it, so it is left alone"
    return None


# ---- conveniences -----------------------------------------------------------------
def find_matches(graph: Graph, rules: Iterable[Rule | Matcher], *, check: bool = True,
                 overlapping: bool = True) -> list[Match]:
    """Every match of every rule (structural, and applicable here unless check=False).

    overlapping=False keeps the first of matches that share a node (torch.fx's
    choice when several rewrites are to be applied to one graph at once).
    """
    found = []
    taken: set[int] = set()
    for item in rules:
        matcher = item if isinstance(item, Matcher) else Matcher(item)
        for m in matcher.find(graph):
            if check and check_context(m, graph) is not None:
                continue
            if not overlapping:
                if not taken.isdisjoint(m.nodes):
                    continue
                taken.update(m.nodes)
            found.append(m)
    return found


def match_at(rule: Rule | Matcher, graph: Graph, node: int) -> MatchResult:
    """A match of `rule` that uses graph node `node`, applicable here; or why there is none.

    `node` may be the image of any source pattern node of the same operator
    (outputs are tried first). The reason is that of the attempt that got furthest.
    """
    matcher = rule if isinstance(rule, Matcher) else Matcher(rule)
    rule = matcher.rule
    if not 0 <= node < len(graph.nodes):
        return MatchResult.fail(f"there is no node %{node} (the graph has {len(graph.nodes)})")
    if matcher.problem is not None:
        return MatchResult.fail(matcher.problem)
    op = graph.nodes[node].op
    anchors = [p for p in matcher.output_ids if matcher.pnodes[p].op == op]
    anchors += [pn.id for pn in rule.source if pn.op == op and pn.id not in anchors]
    if not anchors:
        ops = ", ".join(sorted(matcher.ops))
        return MatchResult.fail(f"the source pattern has no {op} (its operators: {ops})")
    first_failure: MatchResult | None = None
    context_failure: MatchResult | None = None
    for pid in anchors:
        result = matcher.explain_at(graph, node, pid)
        if not result.ok:
            if first_failure is None:
                first_failure = MatchResult.fail(f"as pattern node '{pid}': {result.reason}")
            continue
        for m in matcher.matches_at(graph, node, pid):
            reason = check_context(m, graph)
            if reason is None:
                return MatchResult(m)
            if context_failure is None:
                context_failure = MatchResult.fail(reason)
    return context_failure if context_failure is not None else first_failure


def explain(rule: Rule | Matcher, graph: Graph, node: int) -> str:
    """One line: whether `rule` applies at graph node `node`, and if not, why."""
    from .apply import RewriteRejected, apply  # the applier imports this module

    matcher = rule if isinstance(rule, Matcher) else Matcher(rule)
    where = f"%{node} {graph.nodes[node].op}" if 0 <= node < len(graph.nodes) else f"%{node}"
    result = match_at(matcher, graph, node)
    if not result.ok:
        return f"rule {matcher.rule.id} does not apply at {where}: {result.reason}"
    try:
        apply(graph, result.match)
    except RewriteRejected as exc:
        return f"rule {matcher.rule.id} does not apply at {where}: {exc}"
    return f"rule {matcher.rule.id} applies at {where}: {result.match.describe(graph)}"


__all__ = ["Match", "MatchResult", "Matcher", "TargetPlan", "check_context", "explain", "find_matches",
           "match_at"]
