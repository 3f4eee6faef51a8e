"""Batch lifting: give the 2-D activations of a rule leading batch dimensions.

The generator finds matmul rules on 2-D activations ((rows, features)), but a
transformer's linear layers see (batch, sequence, features). A rule that holds
for every 2-D activation also holds when those activations gain leading batch
dimensions shared by all of them and every operator is applied batch by batch:
matmul and elementwise operators already broadcast that way, concat, split and
transpose only need their axes moved past the batch. Weights keep their rank.

The lifted rules are new rules: they go through the verifier like any other
(`taso-relay rules verify`), so this argument only decides which rules are
worth proving, not whether they are right.
"""
from __future__ import annotations

import re
from typing import Iterable

from ..graph.ops import get_op
from ..subst.rule import Rule
from ..subst.rule_io import rule_from_dict, rule_to_dict

_AXIS_OPS = {"concat", "split"}   # one "axis" attribute, counted from the front
_PASS_THROUGH = {"matmul"}        # numpy batching semantics already
_DIM = re.compile(r"\bdim\((\w+),\s*(-?\d+)\)")
_RANK = re.compile(r"\brank\((\w+)\)\s*==\s*(\d+)")
_WHOLE = re.compile(r"\b(shape|numel)\((\w+)\)")


class NotLiftable(Exception):
    """The rule uses something batching would change (reported by `lift_rule`)."""


def lift_rule(rule: Rule, batch_dims: int = 1) -> Rule | None:
    """The rule with its 2-D activation inputs given `batch_dims` leading dimensions, or None."""
    try:
        return _lift(rule, batch_dims)
    except NotLiftable:
        return None


def lift_rules(rules: Iterable[Rule], batch_dims: Iterable[int] = (1,)) -> list[Rule]:
    """Every liftable rule, once per batch rank; ids gain a `b<k>` suffix."""
    out = []
    for rule in rules:
        for k in batch_dims:
            lifted = lift_rule(rule, k)
            if lifted is not None:
                out.append(lifted)
    return out


def _lift(rule: Rule, k: int) -> Rule:
    if k < 1:
        raise ValueError("batch_dims must be at least 1")
    data = rule_to_dict(rule)
    ranks = _input_ranks(rule)
    batched = {i.name for i in rule.inputs if i.kind != "weight" and ranks.get(i.name) == 2}
    # an activation of unconstrained rank would let the lifted axes land elsewhere
    if any(i.kind != "weight" and i.name not in ranks for i in rule.inputs):
        raise NotLiftable("an activation without a rank constraint")
    inputs = sorted(batched)
    if not batched:
        raise NotLiftable("no 2-D activation")
    for side in ("source", "target"):
        _lift_side(data[side], batched, k)
    for src, dst in rule.outputs:
        if (_ref_node(src) in batched) != (_ref_node(dst) in batched):
            raise NotLiftable("an output is batched on one side only")
    data["constraints"] = [s for c in rule.constraints for s in _shift_constraint(c, batched, k)] + _same_batch(inputs, k)
    example = dict(data.get("example") or {})
    shapes = dict(example.get("inputs") or {})
    lead = [3, 2][:k] + [2] * max(0, k - 2)
    for name in inputs:
        if name in shapes:
            shapes[name] = lead + list(shapes[name])
    example["inputs"] = shapes
    data["example"] = example
    data["id"] = f"{rule.id}b{k}"
    data["provenance"] = {**dict(rule.provenance), "lifted_from": rule.id, "batch_dims": k}
    data["verification"] = {}
    data["numerics"] = {}
    lifted = rule_from_dict(data)
    return lifted


def _lift_side(nodes: list[dict], batched: set[str], k: int) -> None:
    """Moves axes past the batch in place; adds each batched node id to `batched`."""
    for node in nodes:
        op = node["op"]
        ins = [_ref_node(r) for r in node["inputs"]]
        flags = [r in batched for r in ins]
        attrs = node["attrs"]
        for key, value in attrs.items():  # e.g. an identity matrix sized dim(x, 1)
            if isinstance(value, str) and value.startswith("="):
                attrs[key] = "=" + _shift(value[1:], batched, k)
        if not any(flags):
            continue
        if op in _PASS_THROUGH:
            pass  # fused activations are elementwise
        elif op in _AXIS_OPS:
            if not all(flags):
                raise NotLiftable(f"{op} joins batched and unbatched tensors")
            axis = attrs.get("axis", 0)
            if not isinstance(axis, int) or axis < 0:
                raise NotLiftable(f"{op} axis {axis!r}")
            attrs["axis"] = axis + k
        elif op == "transpose":
            perm = attrs.get("perm")
            if not isinstance(perm, list) or not all(isinstance(p, int) and p >= 0 for p in perm):
                raise NotLiftable("transpose without a literal permutation")
            attrs["perm"] = list(range(k)) + [p + k for p in perm]
        elif "elementwise" in get_op(op).tags:
            pass
        else:
            raise NotLiftable(f"{op} is not batch-transparent")
        batched.add(node["id"])


_SAME_SHAPE = re.compile(r"\s*shape\((\w+)\)\s*==\s*shape\((\w+)\)\s*")


def _shift_constraint(text: str, batched: set[str], k: int) -> list[str]:
    """rank(x) == 2 becomes 2 + k and dim(x, i) becomes dim(x, i + k) for batched x."""
    same = _SAME_SHAPE.fullmatch(text)
    if same and same.group(1) in batched and same.group(2) in batched:
        return [text]  # equal shapes stay equal with the same batch in front
    if same and (same.group(1) in batched) != (same.group(2) in batched):
        a, b = same.groups()
        if b in batched:
            a, b = b, a
        # a batched against a weight: the weight matches a's trailing (unbatched) dimensions
        return [f"rank({b}) == 2"] + [f"dim({a}, {i + k}) == dim({b}, {i})" for i in range(2)]
    return [_shift(text, batched, k)]


def _shift(text: str, batched: set[str], k: int) -> str:
    for m in _WHOLE.finditer(text):
        if m.group(2) in batched:
            raise NotLiftable(f"{m.group(0)} of a batched tensor")
    text = _RANK.sub(lambda m: f"rank({m.group(1)}) == {int(m.group(2)) + k}"
                     if m.group(1) in batched else m.group(0), text)

    def dim(m):
        name, axis = m.group(1), int(m.group(2))
        if name not in batched:
            return m.group(0)
        if axis < 0:
            return m.group(0)
        return f"dim({name}, {axis + k})"
    return _DIM.sub(dim, text)


def _same_batch(names: list[str], k: int) -> list[str]:
    """All batched inputs share their batch dimensions (no broadcasting between them)."""
    first = names[0]
    return [f"dim({first}, {a}) == dim({other}, {a})" for other in names[1:] for a in range(k)]


def _input_ranks(rule: Rule) -> dict[str, int]:
    ranks = {}
    for c in rule.constraints:
        m = _RANK.fullmatch(c.strip())
        if m:
            ranks[m.group(1)] = int(m.group(2))
    return ranks


def _ref_node(ref: str) -> str:
    return ref.split(":")[0]
