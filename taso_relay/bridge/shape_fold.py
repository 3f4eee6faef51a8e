"""The shape arithmetic of ONNX imports evaluated in numpy, where FoldConstant would build kernels.

TVM's ONNX importer reads shape-dependent values through `R.shape_of` and `R.shape_to_tensor`, then
small integer arithmetic: Swin-T's Q/K/V unbinding computes each index as
`where(less(i, 0), add(i, take(shape_to_tensor(shape_of(x)), 0)), i)`. The graph has no place for a
shape value, so such a function was imported after FoldConstant, which builds and runs one TIR kernel
per folded call: 182 of them, 6-7 s of Swin-T's pass. Every one is a scalar or a few integers.

`fold_shape_values` does what FoldConstant did there, in numpy: shapes of statically shaped tensors,
and calls of the ops below whose arguments are all constants or folded values, of any dtype (a BERT's
position ids and a Swin's relative position bias are gathers from constant tables: folded before,
they must be folded now, or they stay opaque calls). These ops compute exactly (indexing, integer
and elementwise float arithmetic, comparisons), so numpy gives FoldConstant's numbers. Uses of a
folded value read a constant instead. None when a shape value stays (one of unknown extent, or
computed by an op not here): the caller falls back to FoldConstant.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import Constant
from tvm.relax.expr_functor import PyExprMutator, mutator

_TAKE_MODES = {"wrap": "wrap", "clip": "clip", "fast": "raise"}  # fast: out of range is undefined: refuse


def _take(args, attrs):
    mode = str(attrs.mode)
    if mode == "fast" and (np.asarray(args[1]) < 0).any():
        raise IndexError("a negative index of a fast take: TVM's kernel does not wrap it")
    return np.take(args[0], args[1], axis=None if attrs.axis is None else int(attrs.axis), mode=_TAKE_MODES[mode])


def _gather_elements(args, attrs):
    if (np.asarray(args[1]) < 0).any():
        raise IndexError("a negative index of gather_elements: TVM's kernel does not wrap it")
    return np.take_along_axis(args[0], args[1], axis=int(attrs.axis))


def _binary(fn: Callable) -> Callable:
    return lambda args, attrs: fn(args[0], args[1])


OPS: dict[str, Callable[[list, Any], Any]] = {
    "relax.shape_to_tensor": lambda args, attrs: np.asarray(args[0], dtype="int64"),
    "relax.take": _take,
    "relax.add": _binary(np.add),
    "relax.subtract": _binary(np.subtract),
    "relax.multiply": _binary(np.multiply),
    "relax.floor_divide": _binary(lambda a, b: np.floor_divide(a, b) if np.issubdtype(np.result_type(a, b), np.integer)
                                  else np.floor(np.divide(a, b))),  # TVM: floor(a / b); numpy's float one rounds
    "relax.maximum": _binary(np.maximum),
    "relax.minimum": _binary(np.minimum),
    "relax.less": _binary(np.less),
    "relax.less_equal": _binary(np.less_equal),
    "relax.greater": _binary(np.greater),
    "relax.greater_equal": _binary(np.greater_equal),
    "relax.equal": _binary(np.equal),
    "relax.not_equal": _binary(np.not_equal),
    "relax.logical_and": _binary(np.logical_and),
    "relax.logical_or": _binary(np.logical_or),
    "relax.logical_not": lambda args, attrs: np.logical_not(args[0]),
    "relax.negative": lambda args, attrs: np.negative(args[0]),
    "relax.where": lambda args, attrs: np.where(args[0], args[1], args[2]),
    "relax.astype": lambda args, attrs: args[0],  # the binding's dtype is applied to every result
    "relax.expand_dims": lambda args, attrs: np.expand_dims(args[0], tuple(int(a) for a in attrs.axis)),
    "relax.squeeze": lambda args, attrs: np.squeeze(
        args[0], None if attrs.axis is None else tuple(int(a) for a in attrs.axis)),
    "relax.concat": lambda args, attrs: np.concatenate(args[0], axis=int(attrs.axis)),
    "relax.reshape": lambda args, attrs: np.reshape(args[0], tuple(args[1])),
    "relax.broadcast_to": lambda args, attrs: np.broadcast_to(args[0], tuple(args[1])),
    "relax.zeros": lambda args, attrs: np.zeros(tuple(args[0])),
    "relax.ones": lambda args, attrs: np.ones(tuple(args[0])),
    "relax.full": lambda args, attrs: np.full(tuple(args[0]), args[1]),
    "relax.gather_elements": _gather_elements,
    "relax.permute_dims": lambda args, attrs: np.transpose(
        args[0], None if attrs.axes is None else tuple(int(a) for a in attrs.axes)),
}


class _Shape(tuple):
    """A known shape value (R.Shape), as opposed to a known integer tensor."""


def _static_dims(ty) -> tuple[int, ...] | None:
    shape = getattr(ty, "shape", None)
    if not isinstance(ty, relax.TensorType) or shape is None:
        return None
    try:
        return tuple(int(d) for d in shape.values)
    except (TypeError, AttributeError):
        return None


class _Folder:
    def __init__(self):
        self.known: dict[Any, Any] = {}  # dataflow var -> _Shape | np.ndarray

    def read(self, expr):
        """The known value of an argument, or None."""
        if isinstance(expr, Constant):
            return expr.value.numpy()
        if isinstance(expr, relax.Var):
            return self.known.get(expr)
        if isinstance(expr, relax.ShapeExpr):
            try:
                return _Shape(int(v) for v in expr.values)
            except TypeError:  # a symbolic extent
                return None
        if isinstance(expr, relax.Tuple):
            items = [self.read(f) for f in expr.fields]
            return None if any(i is None for i in items) else items
        return None

    def visit(self, binding) -> None:
        var, value = binding.var, binding.value
        if not isinstance(var, relax.DataflowVar) or not isinstance(value, relax.Call):
            return  # a value leaving the block keeps its binding
        name = getattr(value.op, "name", None)
        if name == "relax.shape_of":
            dims = _static_dims(value.args[0].ty)
            if dims is not None:
                self.known[var] = _Shape(dims)
            return
        if name not in OPS or not isinstance(var.ty, relax.TensorType):
            return
        args = [self.read(a) for a in value.args]
        if any(a is None for a in args):
            return
        dims = _static_dims(var.ty)
        try:
            with np.errstate(all="raise"):
                result = np.asarray(OPS[name](args, value.attrs)).astype(str(var.ty.dtype))
        except Exception:  # noqa: BLE001 - not evaluable here (an index out of range, say): left as it is
            return
        if dims is not None and result.shape == dims:
            self.known[var] = result


def _as_expr(value):
    if isinstance(value, _Shape):
        return relax.ShapeExpr(list(value))
    return relax.const(value, str(value.dtype))


@mutator
class _Substitute(PyExprMutator):
    """Drops the bindings of folded values and reads their constants where they are used."""

    def __init__(self, known: dict):
        super().__init__()
        self.known = {var: _as_expr(value) for var, value in known.items()}

    def visit_var_binding_(self, binding) -> None:
        if binding.var not in self.known:
            super().visit_var_binding_(binding)

    def visit_dataflow_var_(self, var):
        value = self.known.get(var)  # (not `or`: the shape of a 0-d tensor, R.shape([]), is falsy)
        return value if value is not None else super().visit_dataflow_var_(var)


def fold_shape_values(func: relax.Function):
    """`func` with its shape arithmetic evaluated (module docstring), or None if a shape value stays."""
    if not isinstance(func, relax.Function) or not isinstance(func.body, relax.SeqExpr):
        return None
    folder = _Folder()
    for block in func.body.blocks:
        for binding in block.bindings:
            if isinstance(binding, relax.VarBinding):
                folder.visit(binding)
    if not folder.known:
        return None
    try:
        folded = _Substitute(folder.known).visit_expr(func)
    except Exception:  # noqa: BLE001 - TVM refused the substituted function: FoldConstant's way instead
        return None
    bindings = (b for block in folded.body.blocks for b in block.bindings)
    if any(isinstance(b.var.ty, relax.ShapeType) for b in bindings):
        return None
    return folded


def constant_calls(func: relax.Function) -> int:
    """Calls of an operator on constants alone left in `func` (an op this module does not evaluate):
    FoldConstant would have folded them."""
    def constant(expr) -> bool:
        if isinstance(expr, relax.Tuple):
            return all(constant(f) for f in expr.fields)
        return not isinstance(expr, (relax.Var, tvm.ir.GlobalVar))

    bindings = (b for block in func.body.blocks for b in block.bindings)
    return sum(isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op)
               and all(constant(a) for a in b.value.args) for b in bindings)
