"""The static part of a function the graph form cannot take whole, as a function of its own.

A function with control flow (an ONNX If) or a shape known only when it runs (NonZero's match_cast) has no
graph form; but what it computes before and beside those, from its inputs alone with shapes known ahead
(a detector's backbone before its NonZero), does. `split_static_part` takes those bindings out as a
function of the same parameters that returns the values the rest reads; `StaticPart.splice` puts that
function's optimized form back in their place, the rest untouched: its variables keep their bindings,
each read value re-bound to the optimized function's (`lv3 = gv`), so no expression is rewritten.
"""
from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax
from tvm.ir.expr import Constant

from .ops_table import Unsupported, static_shape

MIN_BINDINGS = 2  # a static part smaller than this is not worth a graph
_VALUES = (relax.Call, relax.TupleGetItem, relax.Tuple, relax.Var, Constant)


@dataclass
class StaticPart:
    """`head` computes the static bindings of `func` and returns `reads`, the values the rest uses."""

    func: relax.Function
    head: relax.Function
    static: frozenset  # the static bindings' variables
    reads: tuple  # their variables the rest of the function reads, in binding order

    @property
    def sizes(self) -> tuple[int, int]:
        """(static bindings, all bindings)."""
        return len(self.static), sum(len(block.bindings) for block in self.func.body.blocks)

    def splice(self, head: relax.Function) -> relax.Function | None:
        """`func` with its static bindings replaced by `head`'s (an optimized form of self.head); None where
        `head` is not one dataflow block returning a tuple of as many values."""
        body = head.body
        if (not isinstance(body, relax.SeqExpr) or len(body.blocks) != 1
                or not isinstance(body.blocks[0], relax.DataflowBlock)):
            return None
        fields = list(body.body.fields) if isinstance(body.body, relax.Tuple) else None
        if fields is None or len(fields) != len(self.reads):
            return None
        value_of = dict(zip(self.reads, fields))
        first = list(body.blocks[0].bindings)
        first += [relax.VarBinding(v, value_of[v]) for v in self.reads if not isinstance(v, relax.DataflowVar)]
        blocks = [relax.DataflowBlock(first)]
        for block in self.func.body.blocks:
            rest = [b for b in block.bindings if b.var not in self.static]
            if not rest:
                continue
            if isinstance(block, relax.DataflowBlock):  # its dataflow values the rest reads, bound here again
                again = [relax.VarBinding(b.var, value_of[b.var]) for b in block.bindings
                         if b.var in value_of and isinstance(b.var, relax.DataflowVar)]
                blocks.append(relax.DataflowBlock(again + rest))
            else:
                blocks.append(relax.BindingBlock(rest))
        f = self.func
        return _normalized(relax.Function(f.params, relax.SeqExpr(blocks, f.body.body), f.ret_ty, f.is_pure, f.attrs))


def split_static_part(func: relax.Function) -> StaticPart | None:
    """The static part of `func` (pure bindings of tensors with static shapes, computed from static
    parameters, constants and each other), or None where there is none worth taking out, or nothing else
    (the graph form takes such a function whole)."""
    body = func.body
    if not isinstance(body, relax.SeqExpr) or not func.is_pure:  # (effects keep their order)
        return None
    params = [p for p in func.params if _static(p)]
    known = set(params)
    static, order, used = set(), [], set()
    bindings = [b for block in body.blocks for b in block.bindings]  # (TVM's importer writes a function with an
    for b in bindings:  # If as one block outside dataflow)
        if isinstance(b, relax.VarBinding) and not _pure(b.value):
            break  # nothing after an effect moves before it
        operands = relax.analysis.free_vars(b.value) if isinstance(b, relax.VarBinding) else ()
        if (isinstance(b, relax.VarBinding) and isinstance(b.value, _VALUES) and _static(b.var)
                and all(v in known for v in operands) and _no_symbolic_shape(b.value)):
            known.add(b.var)
            static.add(b.var)
            order.append(b)
            used.update(operands)
    if len(static) < MIN_BINDINGS or len(static) == len(bindings):
        return None
    reads = _read_by_the_rest(func, static)
    if not reads or not all(isinstance(v.ty, relax.TensorType) for v in reads):
        return None
    head_params = [p for p in params if p in used]
    if not head_params:  # computed from constants alone: FoldConstant's (a dynamic input's weights, reshaped)
        return None
    return StaticPart(func, _head(func, head_params, order, reads), frozenset(static), reads)


def _static(var) -> bool:
    """A tensor with every dimension known (a tuple's items all such)."""
    ty = var.ty
    if isinstance(ty, relax.TupleType):
        return all(isinstance(f, relax.TensorType) and _known(f) for f in ty.fields)
    return isinstance(ty, relax.TensorType) and _known(ty)


def _known(ty) -> bool:
    try:
        static_shape(ty)
    except Unsupported:
        return False
    return True


def _read_by_the_rest(func, static: set) -> tuple:
    """The static variables that bindings outside the part, or the function's result, read, in binding
    order."""
    read = set(relax.analysis.free_vars(func.body.body))
    for block in func.body.blocks:
        for b in block.bindings:
            if b.var not in static:
                read |= set(relax.analysis.free_vars(b.value))
    return tuple(b.var for block in func.body.blocks for b in block.bindings if b.var in static and b.var in read)


def _head(func, params, bindings, reads) -> relax.Function:
    """The static bindings as a function of `params` returning `reads`. Each is bound again, in a dataflow
    block: the rest's read values as outputs, all others as dataflow values (a value bound outside dataflow,
    as TVM's importer binds them around an If, would be an output the graph must keep)."""
    bb = relax.BlockBuilder()
    attrs = {k: (len(params) if k == "num_input" else v) for k, v in (func.attrs or {}).items()}
    new, read = {}, set(reads)
    with bb.function("main", params, attrs=attrs, pure=True, private=True):
        with bb.dataflow():
            for b in bindings:
                value = _substituted(b.value, new)
                new[b.var] = (bb.emit_output if b.var in read else bb.emit)(value, name_hint=b.var.name)
        gvar = bb.emit_func_output(relax.Tuple([new[v] for v in reads]))
    return bb.get()[gvar]


def _substituted(expr, new: dict):
    """`expr` (a binding's value) reading the variables `new` maps to."""
    if isinstance(expr, relax.Var):
        return new.get(expr, expr)
    if isinstance(expr, relax.Call):
        return relax.Call(expr.op, [_substituted(a, new) for a in expr.args], expr.attrs, expr.ty_args)
    if isinstance(expr, relax.Tuple):
        return relax.Tuple([_substituted(f, new) for f in expr.fields])
    if isinstance(expr, relax.TupleGetItem):
        return relax.TupleGetItem(_substituted(expr.tuple_value, new), expr.index)
    return expr


def _normalized(func: relax.Function) -> relax.Function:
    """`func` with the types of the expressions built here filled in."""
    return relax.transform.Normalize()(tvm.IRModule({"main": func}))["main"]


_IN_PLACE = frozenset({"relax.call_tir_inplace", "relax.call_inplace_packed"})  # "pure", but write an argument


def _pure(value) -> bool:
    """Not a call with effects (printing, a packed function, one that writes its argument) nor a call of
    another function (whose effects are not read here): such a call, and what comes after it, keep their
    place."""
    if not isinstance(value, relax.Call):
        return True
    op = value.op
    return isinstance(op, tvm.ir.Op) and bool(op.get_attr("FPurity")) and op.name not in _IN_PLACE


def _no_symbolic_shape(value) -> bool:
    """No shape argument with a dimension known only when the function runs."""
    args = value.args if isinstance(value, relax.Call) else ()
    return not any(isinstance(a, relax.ShapeExpr) and not all(isinstance(getattr(d, "value", None), int)
                                                                for d in a.values) for a in args)
