"""A graph substitution as plain data.

A rule has pattern inputs (tensor variables), a source pattern and a target
pattern (lists of nodes referring to inputs or earlier nodes by name, with
``"n1:1"`` naming output 1 of a multi-output node), the mapping of source
outputs to target outputs, constraints (boolean expressions), and provenance.

Attribute templates: a literal must match exactly; ``"?v"`` binds a variable
(the same variable in two places must have the same value); ``"=expr"`` is
computed from shapes and variables. An attribute a pattern leaves out must
equal the operator's default, so a rule never matches more than it says.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..graph import GraphBuilder, Ref, TensorType, get_op
from ..graph.types import GraphError, ShapeError
from . import expr

INPUT_KINDS = ("any", "weight", "input")


@dataclass(frozen=True)
class PatternInput:
    name: str
    kind: str = "any"  # "weight": must be computable from weights alone (foldable)


@dataclass(frozen=True)
class PatternNode:
    id: str
    op: str
    inputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "attrs", {k: _freeze(v) for k, v in dict(self.attrs).items()})


def _freeze(value):
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return {k: _freeze(v) for k, v in value.items()}
    return value


def split_ref(ref: str) -> tuple[str, int]:
    name, _, index = ref.partition(":")
    return name, int(index) if index else 0


@dataclass(frozen=True)
class Rule:
    id: str
    inputs: tuple[PatternInput, ...]
    source: tuple[PatternNode, ...]
    target: tuple[PatternNode, ...]
    outputs: tuple[tuple[str, str], ...]  # (source ref, target ref)
    constraints: tuple[str, ...] = ()
    example: Mapping[str, Any] = field(default_factory=dict)  # {"inputs": {name: shape}, "vars": {...}}
    provenance: Mapping[str, Any] = field(default_factory=dict)
    verification: Mapping[str, Any] = field(default_factory=dict)
    numerics: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "example", _freeze(dict(self.example)))
        object.__setattr__(self, "constraints", tuple(self.constraints))
        validate(self)

    # ---- views ----------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.inputs]

    def side(self, which: str) -> tuple[PatternNode, ...]:
        if which not in ("source", "target"):
            raise ValueError(f"side must be 'source' or 'target', not {which!r}")
        return self.source if which == "source" else self.target

    def side_outputs(self, which: str) -> list[str]:
        k = 0 if which == "source" else 1
        return [pair[k] for pair in self.outputs]

    @property
    def status(self) -> str:
        return self.verification.get("status", "UNVERIFIED")

    @property
    def variables(self) -> set[str]:
        names = set()
        for node in self.source + self.target:
            for value in _flatten(node.attrs.values()):
                if expr.is_var(value):
                    names.add(value[1:])
                elif expr.is_expr(value):
                    names |= expr.variables_in(value[1:])
        for c in self.constraints:
            names |= expr.variables_in(c)
        return names

    @property
    def text(self) -> str:
        src = ", ".join(render(self.source, r) for r in self.side_outputs("source"))
        dst = ", ".join(render(self.target, r) for r in self.side_outputs("target"))
        cond = f"  if {' and '.join(self.constraints)}" if self.constraints else ""
        return f"{src} => {dst}{cond}"

    def __str__(self) -> str:
        return f"{self.id}: {self.text}"

    # ---- instantiation --------------------------------------------------
    def instantiate(self, which: str, builder: GraphBuilder, bound: Mapping[str, Ref],
                    variables: Mapping[str, Any], shapes: Mapping[str, tuple] | None = None,
                    constant_dtype: str | None = None) -> dict[str, Ref]:
        """Add one side's nodes to `builder`; returns refs for every pattern name.

        `bound` maps pattern inputs to refs already in the builder. Expressions
        see the shapes of inputs and of the side's own nodes as they are built.
        A constant whose rule gives no dtype takes `constant_dtype` (the matched
        tensors' own, so a float16 model gets float16 kernels; the rules are
        proven over reals, whatever the float type).
        Raises ShapeError (or expr.ExprError) when the side does not type-check.
        """
        refs: dict[str, Ref] = dict(bound)
        shapes = dict(shapes or {})
        for name, ref in bound.items():
            shapes.setdefault(name, builder.type_of(ref).shape)
        env = expr.Env(shapes, variables)
        for node in self.side(which):
            attrs = {k: expr.resolve(v, env) for k, v in node.attrs.items()}
            if node.op == "constant" and constant_dtype is not None:
                attrs.setdefault("dtype", constant_dtype)
            args = [_lookup(refs, r) for r in node.inputs]
            result = builder.op(node.op, *args, **attrs)
            outs = (result,) if isinstance(result, Ref) else result
            refs[node.id] = outs[0]
            for k, out in enumerate(outs):
                refs[f"{node.id}:{k}"] = out
                shapes[f"{node.id}:{k}"] = builder.type_of(out).shape
            shapes[node.id] = builder.type_of(outs[0]).shape
        return refs

    def example_graph(self, which: str, input_shapes: Mapping[str, tuple] | None = None,
                      variables: Mapping[str, Any] | None = None, dtype: str = "float32"):
        """A standalone Graph of one side (pattern inputs become graph inputs/weights)."""
        input_shapes = dict(input_shapes or self.example.get("inputs", {}))
        variables = dict(variables if variables is not None else self.example.get("vars", {}))
        b = GraphBuilder()
        bound = {}
        for pin in self.inputs:
            if pin.name not in input_shapes:
                raise ShapeError(f"rule {self.id}: no shape given for input '{pin.name}'")
            shape = tuple(input_shapes[pin.name])
            maker = b.weight if pin.kind == "weight" else b.input
            bound[pin.name] = maker(pin.name, shape, dtype)
        refs = self.instantiate(which, b, bound, variables, constant_dtype=dtype)
        return b.build([_lookup(refs, r) for r in self.side_outputs(which)])

    def constraints_hold(self, shapes: Mapping[str, tuple], variables: Mapping[str, Any]) -> tuple[bool, str]:
        env = expr.Env(shapes, variables)
        for c in self.constraints:
            try:
                if not expr.evaluate(c, env):
                    return False, f"constraint failed: {c}"
            except (expr.ExprError, IndexError, TypeError, ZeroDivisionError) as exc:
                return False, f"constraint {c!r} could not be evaluated: {exc}"
        return True, ""


def _lookup(refs: Mapping[str, Ref], ref: str) -> Ref:
    if ref in refs:
        return refs[ref]
    name, index = split_ref(ref)
    key = f"{name}:{index}"
    if key in refs:
        return refs[key]
    raise expr.ExprError(f"unknown pattern reference '{ref}'")


def _flatten(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _flatten(v)
        else:
            yield v


def validate(rule: Rule) -> None:
    """Structural checks so that a malformed rule file fails at load, with the rule id."""
    def bad(why):
        return ValueError(f"rule {rule.id}: {why}")

    names = {i.name for i in rule.inputs}
    if len(names) != len(rule.inputs):
        raise bad("duplicate input names")
    for pin in rule.inputs:
        if pin.kind not in INPUT_KINDS:
            raise bad(f"input '{pin.name}' has unknown kind '{pin.kind}'")
    for which in ("source", "target"):
        seen = set(names)
        for node in rule.side(which):
            try:
                opdef = get_op(node.op)
            except GraphError:
                raise bad(f"{which} node '{node.id}' uses operator '{node.op}', which the graph form does not have") \
                    from None
            if node.id in seen:
                raise bad(f"{which} node id '{node.id}' is used twice")
            if opdef.arity is not None and len(node.inputs) != opdef.arity:
                raise bad(f"{which} node '{node.id}' ({node.op}) needs {opdef.arity} inputs")
            unknown = set(node.attrs) - set(opdef.attrs)
            if unknown:
                raise bad(f"{which} node '{node.id}' has unknown attributes {sorted(unknown)}")
            for r in node.inputs:
                if split_ref(r)[0] not in seen:
                    raise bad(f"{which} node '{node.id}' uses '{r}' before it is defined")
                if split_ref(r)[0] in names and r not in names:
                    raise bad(f"{which} node '{node.id}' uses '{r}': an input has one value, named without ':k'")
            seen.add(node.id)
        # A target output may be an input (transpose(transpose(x)) => x); a source output may not:
        # the rewrite replaces the values the source computes.
        for r in rule.side_outputs(which):
            if split_ref(r)[0] not in (seen - names if which == "source" else seen) or (
                    split_ref(r)[0] in names and r not in names):
                raise bad(f"{which} output '{r}' is not a {which} node" + (" or input" if which == "target" else ""))
    if not rule.outputs:
        raise bad("no outputs")
    source_vars = set()
    for node in rule.source:
        for value in _flatten(node.attrs.values()):
            if expr.is_var(value):
                source_vars.add(value[1:])
    for node in rule.target:
        for value in _flatten(node.attrs.values()):
            used = {value[1:]} if expr.is_var(value) else expr.variables_in(value[1:]) if expr.is_expr(value) else set()
            if used - source_vars:
                raise bad(f"target uses variables {sorted(used - source_vars)} not bound by the source")


def render(nodes: Sequence[PatternNode], ref: str) -> str:
    """Readable nested text of a pattern output, e.g. matmul(matmul(a, b), c)."""
    by_id = {n.id: n for n in nodes}
    name, index = split_ref(ref)
    node = by_id.get(name)
    if node is None:
        return name
    opdef = get_op(node.op)
    shown = []
    for k, v in sorted(node.attrs.items()):
        default = opdef.attrs.get(k)
        if v == default or (isinstance(v, list) and tuple(v) == default):
            continue
        shown.append(f"{k}={_fmt(v)}")
    args = ", ".join(render(nodes, r) for r in node.inputs)
    head = node.op + (f"[{', '.join(shown)}]" if shown else "")
    text = f"{head}({args})"
    return text + (f".{index}" if len(ref.split(":")) > 1 or node.op == "split" else "")


def _fmt(v):
    if isinstance(v, (list, tuple)):
        return "(" + ", ".join(_fmt(x) for x in v) + ")"
    return str(v)
