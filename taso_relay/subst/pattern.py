"""Rule source patterns compiled for matching: attribute templates, nodes, search plans.

Compiling once per rule keeps the matcher's inner loop free of parsing:
attribute templates become tagged tuples (LIT, VAR, EXPR, TUP), pattern nodes
know their attribute slots, their operands' operators and their consumers'
operators (for a cheap first check, `CompiledNode.quick`), and a `Plan` says
in which order a match anchored at a given pattern node binds the rest.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..graph import Pattern, get_op
from ..graph.ops.registry import REQUIRED
from . import expr
from .index import GraphIndex
from .rule import Rule, split_ref

# compiled attribute templates
LIT, VAR, EXPR, TUP = range(4)
# pattern operand kinds
IN, NODE = 0, 1


@dataclass(frozen=True)
class CompiledNode:
    """One source pattern node, ready to be compared with graph nodes."""

    id: str
    position: int  # in Rule.source
    op: str
    commutative: bool
    inputs: tuple[tuple[int, str, int], ...]  # (kind, input name or node id, output index)
    attrs: tuple[tuple[str, int, tuple], ...]  # (key, slot in Node.attrs, compiled template)
    operand_ops: tuple[tuple[int, str, int], ...] = ()  # (position, op, output index) of node operands
    user_ops: tuple[str, ...] = ()  # operators of the pattern nodes that consume this one

    def quick(self, index: GraphIndex, g: int) -> bool:
        """A cheap necessary condition for this pattern node to match graph node g."""
        nodes = index.graph.nodes
        node = nodes[g]
        if node.op != self.op or len(node.inputs) != len(self.inputs):
            return False
        attrs = node.attrs
        for key, slot, template in self.attrs:
            if template[0] != LIT:
                break  # literals come first
            if slot >= len(attrs) or attrs[slot][0] != key or attrs[slot][1] != template[1]:
                return False
        refs = node.inputs
        if not self.commutative:
            for pos, op, out in self.operand_ops:
                r = refs[pos]
                if r.index != out or nodes[r.node].op != op:
                    return False
        if self.user_ops:
            ops = {nodes[u].op for u, _pos in index.users[g]}
            if not ops.issuperset(self.user_ops):
                return False
        return True


@dataclass(frozen=True)
class Step:
    """After the anchor's cone is bound: bind pattern node `pid` (and its cone) next."""

    pid: str
    via: tuple[int, str, int] | None  # a bound value whose users are the candidates; None: scan nearby
    reach: int = 0  # for a scan: how far from the bound nodes its candidates may be


@dataclass(frozen=True)
class Plan:
    """How a match anchored at pattern node `anchor` binds the whole source pattern."""

    anchor: str
    steps: tuple[Step, ...]


def compile_template(value):
    """An attribute template (literal, "?var", "=expr", or a tuple of them) as a tagged tuple."""
    if expr.is_var(value):
        return (VAR, value[1:])
    if expr.is_expr(value):
        return (EXPR, value[1:])
    if isinstance(value, (tuple, list)):
        parts = tuple(compile_template(v) for v in value)
        if all(p[0] == LIT for p in parts):
            return (LIT, tuple(p[1] for p in parts))
        return (TUP, parts)
    return (LIT, value)


def freeze(value):
    if isinstance(value, (tuple, list)):
        return tuple(freeze(v) for v in value)
    return value


def show_template(template, variables) -> str:
    kind = template[0]
    if kind == LIT:
        return repr(template[1])
    if kind == VAR:
        name = template[1]
        return f"?{name}" + (f" = {variables[name]!r}" if name in variables else "")
    if kind == EXPR:
        return f"={template[1]}"
    return "(" + ", ".join(show_template(t, variables) for t in template[1]) + ")"


def unify(template, value, variables: dict, deferred: list, key: str) -> bool:
    """Match an attribute value against a template, binding variables; "=expr" parts are
    appended to `deferred` (checked once every input's shape is known)."""
    kind = template[0]
    if kind == LIT:
        return value == template[1]
    if kind == VAR:
        name = template[1]
        if name in variables:
            return variables[name] == value
        variables[name] = value
        return True
    if kind == EXPR:
        deferred.append((key, template[1], value))
        return True
    parts = template[1]
    if not isinstance(value, tuple) or len(value) != len(parts):
        return False
    return all(unify(t, v, variables, deferred, key) for t, v in zip(parts, value))


def unmatchable(rule: Rule) -> str | None:
    """Why no graph can ever match the rule's source (None: some graph can)."""
    used = {split_ref(r)[0] for pn in rule.source for r in pn.inputs}
    for pin in rule.inputs:
        if pin.name not in used:
            return f"rule {rule.id}: pattern input '{pin.name}' is not used by the source, so it cannot be bound"
    for pn in rule.source:
        if get_op(pn.op).pattern in (Pattern.OPAQUE, Pattern.SOURCE) and pn.op != "constant":
            return f"rule {rule.id}: source node '{pn.id}' is {pn.op}, which is never rewritten"
    return None


def compile_node(pn, position: int, rule: Rule) -> CompiledNode:
    input_names = set(rule.input_names)
    ops = {p.id: p.op for p in rule.source}
    user_ops = sorted({p.op for p in rule.source if any(split_ref(r)[0] == pn.id for r in p.inputs)})
    opdef = get_op(pn.op)
    slots = {key: k for k, key in enumerate(sorted(opdef.attrs))}
    attrs = []
    for key in sorted(opdef.attrs):
        if key in pn.attrs:
            template = compile_template(pn.attrs[key])
        elif opdef.attrs[key] is REQUIRED:
            continue  # nothing to compare with: any value
        elif pn.op == "constant" and key == "dtype":
            continue  # any dtype: a target's constants take the matched tensors' float type (types are checked)
        else:
            template = (LIT, freeze(opdef.attrs[key]))
        attrs.append((key, slots[key], template))
    attrs.sort(key=lambda a: a[2][0] != LIT)  # cheap literal checks first
    inputs = []
    operand_ops = []
    for pos, r in enumerate(pn.inputs):
        name, index = split_ref(r)
        inputs.append((IN if name in input_names else NODE, name, index))
        if name not in input_names:
            operand_ops.append((pos, ops[name], index))
    return CompiledNode(pn.id, position, pn.op, opdef.commutative, tuple(inputs), tuple(attrs), tuple(operand_ops),
                        tuple(user_ops))


def make_plan(rule: Rule, anchor: str, gap: int) -> Plan:
    """Anchor, then its input cone (backwards); then, repeatedly, an unbound pattern node that
    consumes a bound value (found among that value's users), or, for a part of the pattern not
    connected to what is bound, a node within `gap` (plus the part's size) of it."""
    by_id = {pn.id: pn for pn in rule.source}
    names = {p.name for p in rule.inputs}

    def cone(pid: str, acc: set) -> None:
        if pid in acc:
            return
        acc.add(pid)
        for r in by_id[pid].inputs:
            name = split_ref(r)[0]
            if name in names:
                acc.add(name)
            else:
                cone(name, acc)

    bound: set[str] = set()
    cone(anchor, bound)
    steps: list[Step] = []
    while any(pn.id not in bound for pn in rule.source):
        chosen = None
        for pn in rule.source:
            if pn.id in bound:
                continue
            vias = []
            for r in pn.inputs:
                name, index = split_ref(r)
                if name in bound:
                    vias.append((IN if name in names else NODE, name, index))
            if vias:
                vias.sort(key=lambda v: v[0] != NODE)  # a node's users are fewer than an input's
                chosen = Step(pn.id, vias[0])
                break
        if chosen is None:
            pn = next(p for p in rule.source if p.id not in bound)
            chosen = Step(pn.id, None, gap + eccentricity(rule, pn.id))
        steps.append(chosen)
        cone(chosen.pid, bound)
    return Plan(anchor, tuple(steps))


def pattern_graph(rule: Rule) -> dict[str, set[str]]:
    """The source pattern as an undirected graph over node ids and input names."""
    adjacency: dict[str, set[str]] = {}
    for pn in rule.source:
        adjacency.setdefault(pn.id, set())
        for r in pn.inputs:
            name = split_ref(r)[0]
            adjacency[pn.id].add(name)
            adjacency.setdefault(name, set()).add(pn.id)
    return adjacency


def distances(adjacency: dict[str, set[str]], start: str) -> dict[str, int]:
    dist = {start: 0}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in adjacency[v]:
                if w not in dist:
                    dist[w] = dist[v] + 1
                    nxt.append(w)
        frontier = nxt
    return dist


def eccentricity(rule: Rule, start: str) -> int:
    return max(distances(pattern_graph(rule), start).values())


def pattern_parts(rule: Rule) -> tuple[tuple[str, ...], ...]:
    """The connected parts of the source pattern (node ids and input names of each)."""
    adjacency = pattern_graph(rule)
    parts, seen = [], set()
    for pn in rule.source:
        if pn.id not in seen:
            part = tuple(sorted(distances(adjacency, pn.id)))
            seen.update(part)
            parts.append(part)
    return tuple(parts)


def parts_close(parts, vertex: Callable[[str], int], index: GraphIndex, gap: int) -> bool:
    """Whether the pattern's parts, as matched (vertex: pattern name -> graph node), are linked
    by chains of parts within `gap` edges of each other.

    Symmetric in the parts, so a match is found whichever part anchors the search.
    """
    vertex_sets = [{vertex(v) for v in part} for part in parts]
    linked = {0}
    frontier = [0]
    while frontier:
        i = frontier.pop()
        near = frozenset().union(*(index.ball(v, gap) for v in vertex_sets[i]))
        for j in range(len(parts)):
            if j not in linked and not near.isdisjoint(vertex_sets[j]):
                linked.add(j)
                frontier.append(j)
    return len(linked) == len(parts)
