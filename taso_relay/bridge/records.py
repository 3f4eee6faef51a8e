"""What the import keeps beside the graph so the export can rebuild the same function.

The graph holds the computation; a `Signature` holds what surrounds it in
Relax (the parameter variables, which variables leave the dataflow block and
how the result is shaped), and `CallRecord`s in Graph.payloads hold Relax
calls to re-emit: opaque calls verbatim, and one template per distinct
modelled call so that attributes the graph form ignores (batch-norm momentum,
the spelling of a split) survive a round trip unchanged.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from tvm import relax
from tvm.ir.expr import Constant

from ..graph import TensorType


@dataclass(frozen=True)
class CallRecord:
    """A Relax call and the tuple items the source bound right after it (re-emitted in that order).

    leaves: one entry per variable argument, in argument order: None for a
    tensor, n for a tuple of n tensors (the node takes its n items as inputs).
    """

    call: Any
    leaves: tuple[int | None, ...] = ()
    tgi: tuple[int, ...] = ()


@dataclass(frozen=True)
class ExportRef:
    """The j-th variable that leaves the dataflow block (in Signature.exports)."""

    index: int


@dataclass(frozen=True)
class Export:
    """A non-dataflow variable of the block.

    structure: a graph output index, or nested tuples of them.
    direct: the source bound it to the producing call itself (`gv = R.add(..)`) or to an
    item of its tuple (`gv = lv[0]`), rather than to an alias or a tuple of earlier
    variables (`gv = lv3`).
    """

    structure: Any
    direct: bool


@dataclass(frozen=True)
class Signature:
    """How a function surrounds its graph: reused by the export for an exact round trip."""

    name: str
    params: tuple  # the original relax.Var objects, in order
    input_names: tuple[str, ...]  # graph input node name of each param
    exports: tuple[Export, ...]
    result: Any  # graph output index | ExportRef | nested tuple of those
    attrs: dict = field(default_factory=dict)
    is_pure: bool = True


def template_key(op: str, attrs, input_types: Sequence[TensorType]) -> str:
    """Payload key of the Relax template for nodes with this operator, attributes and input types."""
    text = repr((op, tuple(attrs), tuple((t.shape, t.dtype) for t in input_types)))
    return "template:" + hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


# ---- argument leaves -------------------------------------------------------------
def is_value_var(expr) -> bool:
    """A relax variable holding a tensor or tuple (tir variables share the class, not the type)."""
    return isinstance(expr, relax.Var) and isinstance(expr.ty, (relax.TensorType, relax.TupleType))


def is_tensor_leaf(expr) -> bool:
    """A variable or constant tensor: the arguments a modelled call takes as graph inputs."""
    return (is_value_var(expr) or isinstance(expr, Constant)) and isinstance(expr.ty, relax.TensorType)


def leaves(args: Sequence, is_leaf: Callable[[Any], bool]) -> Iterator:
    """Leaves of call arguments, depth first through tuples, in argument order."""
    for arg in args:
        if is_leaf(arg):
            yield arg
        elif isinstance(arg, relax.Tuple):
            yield from leaves(arg.fields, is_leaf)


def replace_leaves(args: Sequence, is_leaf: Callable[[Any], bool], new: Iterator) -> list:
    """The arguments with each leaf replaced by the next value of `new` (same walk as `leaves`)."""
    out = []
    for arg in args:
        if is_leaf(arg):
            out.append(next(new))
        elif isinstance(arg, relax.Tuple):
            out.append(relax.Tuple(replace_leaves(arg.fields, is_leaf, new)))
        else:
            out.append(arg)
    return out


def recall(record: CallRecord, args: list, is_leaf: Callable[[Any], bool]):
    """The recorded call on new arguments: same operator, attributes and type arguments."""
    call = record.call
    new_args = replace_leaves(call.args, is_leaf, iter(args))
    return relax.Call(call.op, new_args, call.attrs, call.ty_args)


def group_args(args: Sequence, arity: Sequence[int | None]) -> list:
    """Regroup an opaque node's flat inputs into its call's variable arguments (tuples rebuilt)."""
    out, pos = [], 0
    for n in arity:
        if n is None:
            out.append(args[pos])
            pos += 1
        else:
            out.append(relax.Tuple(list(args[pos:pos + n])))
            pos += n
    return out


def recall_opaque(record: CallRecord, args: Sequence):
    """An opaque node's recorded call on new input expressions (one per node input)."""
    return recall(record, group_args(args, record.leaves), is_value_var)
