"""An axiom is written once, as data, and used twice.

Each axiom is a small rule: a left-hand side, a right-hand side and a guard,
written with the project's own pattern language (``N("conv2d", "x", "w",
strides="?s")``). The Z3 form is

    ForAll(tensors, params) . wt(lhs) and guard  ->  lhs == rhs      (pattern: lhs)

(and the mirror image for axioms marked ``both_ways``), produced by the same
encoder that encodes the rules being proved. The concrete form builds both
sides as graphs and runs them through the interpreter (concrete.py).

Why ``wt(lhs)`` makes this sound: read T as real tensors plus one junk value
for ill-typed applications (operators are strict). An axiom is true in that
model exactly when every well-typed instance of its left side that satisfies
the guard has a well-typed right side with the same value — which is what
the concrete check tests ("LHS type-checks => RHS type-checks and is equal",
both ways for ``both_ways`` axioms).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Mapping

import z3

from ...subst.rule import PatternInput, PatternNode, Rule
from .. import vocab as V
from ..encode import RuleEncoder

_ids = itertools.count()


class N:
    """A pattern term: N(op, *inputs, **attrs); inputs are tensor names or other N."""

    def __init__(self, op: str, *inputs, **attrs):
        self.op, self.inputs, self.attrs = op, inputs, attrs
        self.index = 0

    def out(self, k: int) -> "N":
        ref = N.__new__(N)
        ref.op, ref.inputs, ref.attrs, ref.index, ref.base = None, (), {}, k, self
        return ref


def _flatten(term, nodes: list, seen: dict) -> str:
    if isinstance(term, str):
        return term
    if term.op is None:  # .out(k) of a multi-output node
        return f"{_flatten(term.base, nodes, seen)}:{term.index}"
    if id(term) in seen:
        return seen[id(term)]
    args = [_flatten(t, nodes, seen) for t in term.inputs]
    nid = f"n{len(nodes)}"
    nodes.append(PatternNode(nid, term.op, tuple(args), dict(term.attrs)))
    seen[id(term)] = nid
    return nid


@dataclass(frozen=True)
class Axiom:
    name: str
    family: str
    rule: Rule  # source = left side, target = right side, constraints = guard
    shapes: Mapping[str, tuple]  # per input: dims as ints, "sym" or "=expr" (for the concrete check)
    domains: Mapping[str, tuple]  # per attribute variable: candidate values (or "=expr")
    both_ways: bool = False
    dims: Mapping[str, tuple] = field(default_factory=dict)  # per shape symbol: candidate sizes
    doc: str = ""

    @property
    def text(self) -> str:
        return self.rule.text


def axiom(name: str, family: str, lhs: N, rhs, *, shapes: Mapping[str, tuple],
          guard=(), domains: Mapping[str, tuple] | None = None, both_ways: bool = False,
          dims: Mapping[str, tuple] | None = None, doc: str = "") -> Axiom:
    source: list[PatternNode] = []
    target: list[PatternNode] = []
    lref = _flatten(lhs, source, {})
    rref = _flatten(rhs, target, {}) if not isinstance(rhs, str) else rhs
    if isinstance(rhs, str):  # the right side is an input: identity node
        raise ValueError("right side must be an operator term; use an identity-free form")
    domains = dict(domains or {})
    example_vars = {k: v[0] for k, v in domains.items() if not (isinstance(v[0], str) and v[0].startswith("="))}
    rule = Rule(id=f"axiom:{name}", inputs=tuple(PatternInput(n) for n in shapes),
                source=tuple(source), target=tuple(target), outputs=((lref, rref),),
                constraints=tuple(guard), example={"vars": example_vars})
    return Axiom(name, family, rule, dict(shapes), domains, both_ways, dict(dims or {}), doc)


# ---- Z3 form ---------------------------------------------------------------
@dataclass
class Z3Axiom:
    name: str
    forms: list  # ForAll formulas
    lhs_funcs: frozenset
    rhs_funcs: frozenset
    both_ways: bool


def _flat_vars(value):
    if isinstance(value, tuple):
        for v in value:
            yield from _flat_vars(v)
    else:
        yield value


def _bound_in(term, bound_ids) -> set:
    found = set()
    stack = [term]
    while stack:
        t = stack.pop()
        if t.get_id() in bound_ids:
            found.add(t.get_id())
        stack.extend(t.children())
    return found


def _arith_over_bound(term, bound_ids) -> bool:
    stack = [term]
    while stack:
        t = stack.pop()
        if z3.is_app(t) and t.decl().kind() != z3.Z3_OP_UNINTERPRETED and t.num_args() > 0 \
                and _bound_in(t, bound_ids):
            return True
        stack.extend(t.children())
    return False


def _direction(name, bound, pat, other, guard):
    ids = {b.get_id() for b in bound}
    if _bound_in(pat, ids) != ids or _arith_over_bound(pat, ids) or not z3.is_app(pat) \
            or pat.decl().kind() != z3.Z3_OP_UNINTERPRETED or pat.num_args() == 0:
        raise ValueError(f"axiom {name}: side {pat} cannot serve as an E-matching pattern")
    body = z3.Implies(z3.And(V.wt(pat), *guard), pat == other)
    return z3.ForAll(bound, body, patterns=[pat], qid=name)  # qid: named in Z3's smt.qi.profile


def to_z3(ax: Axiom) -> Z3Axiom:
    enc = RuleEncoder(ax.rule, prefix=f"{ax.name}!")
    left, right = enc.side("source"), enc.side("target")
    guard = enc.constraints(left) + enc.domain
    bound = list(enc.inputs.values()) + [v for val in enc.vars.values() for v in _flat_vars(val)]
    (lt,), (rt,) = left.outputs, right.outputs
    forms = [_direction(ax.name, bound, lt, rt, guard + left.extra)]
    if ax.both_ways:
        forms.append(_direction(ax.name, bound, rt, lt, guard + right.extra))
    return Z3Axiom(ax.name, forms, frozenset(left.funcs), frozenset(right.funcs), ax.both_ways)
