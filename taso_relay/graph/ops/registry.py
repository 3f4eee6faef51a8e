"""The operator table: one `OpDef` per operator kind.

An OpDef is pure data plus three functions: a shape rule, a float reference in
numpy, and (where the operator is polynomial) an exact modular-integer
reference used for fingerprints. Nothing here knows Relax names; the bridge
maps them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..types import ShapeError, TensorType

REQUIRED = object()  # marks an attribute without a default


class Pattern:
    """How TVM's FuseOps treats an operator (mirrors relay/relax OpPatternKind)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    REDUCE = 3
    OUT_EWISE_FUSABLE = 4  # conv2d, matmul: element-wise epilogues fuse into them
    OPAQUE = 8
    SOURCE = 9  # inputs, weights and constant tensors: no kernel at all


ShapeRule = Callable[[Sequence[TensorType], Mapping[str, Any]], list[TensorType]]
FloatRef = Callable[[Sequence[Any], Mapping[str, Any]], list[Any]]
ModRef = Callable[[Sequence[Any], Mapping[str, Any], int], list[Any]]


@dataclass(frozen=True)
class OpDef:
    name: str
    arity: int | None  # None: variadic (concat)
    attrs: Mapping[str, Any]  # name -> default, or REQUIRED
    infer: ShapeRule
    ref: FloatRef | None
    modular: ModRef | None = None
    pattern: int = Pattern.INJECTIVE
    commutative: bool = False
    doc: str = ""
    tags: frozenset = field(default_factory=frozenset)
    # Rewrites attributes into one canonical spelling given the input types
    # (negative axes made positive, ...), so equal graphs hash equally.
    canon: Callable[[Sequence[TensorType], dict], dict] | None = None

    def normalize_attrs(self, given: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
        """Fill defaults, reject unknown names, freeze lists into tuples."""
        unknown = set(given) - set(self.attrs)
        if unknown:
            raise ShapeError(f"{self.name}: unknown attribute(s) {sorted(unknown)}")
        out = []
        for key in sorted(self.attrs):
            if key in given:
                value = _freeze(given[key])
            elif self.attrs[key] is REQUIRED:
                raise ShapeError(f"{self.name}: missing attribute '{key}'")
            else:
                value = _freeze(self.attrs[key])
            out.append((key, value))
        return tuple(out)


def _freeze(value):
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        return value.item()
    return value


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise ValueError(f"operator {op.name} registered twice")
    OPS[op.name] = op
    return op


def get_op(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise ShapeError(f"unknown operator '{name}'") from None


def fail(op: str, why: str, types: Sequence[TensorType]) -> ShapeError:
    shapes = ", ".join(str(list(t.shape)) for t in types)
    return ShapeError(f"{op}: {why} (input shapes: {shapes})")
