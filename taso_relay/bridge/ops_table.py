"""Relax operator names and attribute spellings <-> graph-form operators.

The only place that knows how Relax spells an operator. Importers read a
relax Call into (graph op, attributes, tensor arguments) or raise
`Unsupported`, which makes the call an opaque node: a call whose attributes
the graph form cannot express exactly (another out_dtype, an out_layout
different from the input layout, batch norm in training mode, ...) must keep
its meaning, so it is never approximated. Exporters build the Relax
expression of a graph node from its attributes.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from tvm import relax, tirx
from tvm.ir.expr import Constant

from ..graph.ops.norm import group_norm_axes, group_norm_grouping
from ..graph.ops.sources import constant_value

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


class Unsupported(Exception):
    """This call (or function) cannot be expressed in the graph form; the message says why."""


# ---- reading Relax values ----------------------------------------------------
def static_shape(ty) -> tuple[int, ...]:
    """The shape of a TensorType as ints; raises Unsupported for unknown or symbolic dims."""
    if not isinstance(ty, relax.TensorType):
        raise Unsupported(f"expected a tensor, got {ty}")
    if ty.shape is None or ty.ndim < 0:
        raise Unsupported(f"tensor of unknown shape {ty}")
    dims = []
    for d in ty.shape.values:
        if not isinstance(getattr(d, "value", None), int):
            raise Unsupported(f"symbolic dimension '{d}' in {ty}; {_PIN_HINT.format(pin_example(d))}")
        dims.append(int(d.value))
    return tuple(dims)


# The search prices and rewrites static shapes; a user with a dynamic export pins the sizes it runs at.
_PIN_HINT = ("the search needs static shapes: pin the sizes first, e.g. with "
             "relax.transform.BindSymbolicVars({}) before the pass, or --input-shape on the command line")


def pin_example(dim) -> str:
    """``{'n': 1}`` for a dimension that is the variable n; the variables of an expression otherwise. A variable
    without a name cannot be bound by name: the hint says to pass the tir.Var itself."""
    names = sorted({v.name for v in tirx.analysis.undefined_vars(dim)}) or [str(dim)]
    hint = "{" + ", ".join(f"'{n}': 1" for n in names if n) + "}"
    if "" in names:
        unnamed = "the unnamed tir.Var itself as the key, e.g. {var: 1}, where var is the dimension's tir.Var"
        hint = unnamed if hint == "{}" else f"{hint}, and {unnamed}"
    return hint


def dtype_of(ty) -> str:
    dtype = str(ty.dtype)
    if dtype in ("", "void"):
        raise Unsupported(f"tensor of unknown dtype {ty}")
    return dtype


def tensor_spec(ty) -> tuple[tuple[int, ...], str]:
    return static_shape(ty), dtype_of(ty)


def as_number(expr) -> int | float:
    """The number a python number, IntImm, FloatImm or PrimValue holds."""
    while not isinstance(expr, (int, float)):
        value = getattr(expr, "value", None)
        if value is None or value is expr:
            raise Unsupported(f"not a constant: {expr}")
        expr = value
    return expr


def as_int(expr) -> int:
    """An int from a python int, IntImm or PrimValue."""
    value = as_number(expr)
    if not isinstance(value, int):
        raise Unsupported(f"not a constant integer: {expr}")
    return int(value)


def int_tuple(expr) -> tuple[int, ...]:
    fields = getattr(expr, "fields", None)
    if fields is None:
        fields = getattr(expr, "values", None)  # ShapeExpr
    if fields is None:
        raise Unsupported(f"not a constant integer tuple: {expr}")
    return tuple(as_int(f) for f in fields)


def _ints(values) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def _in_dtype(call, i=0) -> str:
    return dtype_of(call.args[i].ty)


def _default_out_dtype(call) -> None:
    """out_dtype None/void, or equal to the input dtype, is the graph form's semantics."""
    out = call.attrs.out_dtype
    if out is not None and str(out) not in ("", "void", _in_dtype(call)):
        raise Unsupported(f"{call.op.name} with out_dtype={out}")


def _same_out_layout(call, layout: str) -> None:
    out = call.attrs.out_layout
    if out is not None and str(out) not in ("", layout):
        raise Unsupported(f"{call.op.name} with out_layout={out} != {layout}")


def _float_only(call) -> None:
    if _in_dtype(call) not in FLOAT_DTYPES:
        raise Unsupported(f"{call.op.name} on {_in_dtype(call)}")


# ---- importers: Call -> (op, attrs, tensor args) ------------------------------
Reading = tuple[str, dict, list]
Importer = Callable[[Any], Reading]
# A call read as several graph ops, each taking the one before as its only input: the reading is
# (CHAIN, {"steps": ((op, attrs), ...)}, [the first op's input]).
CHAIN = "chain"
# A call read as several graph ops of any inputs: (PROGRAM, {"steps": ((op, attrs, inputs), ...)}, args),
# where an input k < len(args) is args[k] and k >= len(args) the output of step k - len(args); the last
# step's output is the call's value.
PROGRAM = "program"


def _conv2d(call) -> Reading:
    a = call.attrs
    _default_out_dtype(call)
    _same_out_layout(call, str(a.data_layout))
    return "conv2d", {"strides": _ints(a.strides), "padding": _ints(a.padding), "dilation": _ints(a.dilation),
                      "groups": int(a.groups), "data_layout": str(a.data_layout),
                      "kernel_layout": str(a.kernel_layout)}, list(call.args)


def _in_layouts(call, data: str, kernel: str):
    """The call's attrs, where it computes in the input dtype, in the one data and kernel layout the reading
    knows; else Unsupported."""
    a = call.attrs
    _default_out_dtype(call)
    _same_out_layout(call, data)
    if (str(a.data_layout), str(a.kernel_layout)) != (data, kernel):
        raise Unsupported(f"{call.op.name.removeprefix('relax.nn.')} in layout {a.data_layout}/{a.kernel_layout}")
    return a


def _conv2d_transpose(call) -> Reading:
    a = _in_layouts(call, "NCHW", "IOHW")
    return "conv2d_transpose", {"strides": _ints(a.strides), "padding": _ints(a.padding),
                                "output_padding": _ints(a.output_padding), "dilation": _ints(a.dilation),
                                "groups": int(a.groups)}, list(call.args)


# A 1-D call read as its 2-D operator over a unit axis inserted at 2 in every argument and removed from every
# result (conv1d as conv2d on (N, C, 1, L)); the reading is (LIFTED, {"op": 2-D op, "attrs": its attrs}, args).
# Exact: the 2-D operator with a unit kernel, stride and dilation and no padding along that axis computes the
# same sums in the same order; the rules over conv2d then hold for conv1d (a batch norm after it folds).
LIFTED = "lifted"


def _conv1d(call) -> Reading:
    a = _in_layouts(call, "NCW", "OIW")
    left, right = _pad_1d(call)
    attrs = {"strides": (1, *_ints(a.strides)), "padding": (0, left, 0, right), "dilation": (1, *_ints(a.dilation)),
             "groups": int(a.groups), "data_layout": "NCHW", "kernel_layout": "OIHW"}
    return LIFTED, {"op": "conv2d", "attrs": attrs}, list(call.args)


def _conv1d_transpose(call) -> Reading:
    a = _in_layouts(call, "NCW", "IOW")
    left, right = _pad_1d(call)
    attrs = {"strides": (1, *_ints(a.strides)), "padding": (0, left, 0, right),
             "output_padding": (0, *_ints(a.output_padding)), "dilation": (1, *_ints(a.dilation)),
             "groups": int(a.groups)}
    return LIFTED, {"op": "conv2d_transpose", "attrs": attrs}, list(call.args)


def _pad_1d(call) -> tuple[int, int]:
    padding = _ints(call.attrs.padding)  # (TVM writes (left, right); one number is both sides)
    return padding if len(padding) == 2 else (padding[0], padding[0])


def _pool1d(op: str) -> Importer:
    def read(call) -> Reading:
        a = call.attrs
        _same_out_layout(call, str(a.layout))
        if str(a.layout) != "NCW":
            raise Unsupported(f"{call.op.name} in layout {a.layout}")
        left, right = _pad_1d(call)
        attrs = {"kernel": (1, *_ints(a.pool_size)), "strides": (1, *_ints(a.strides)), "padding": (0, left, 0, right),
                 "dilation": (1, *_ints(a.dilation)), "ceil_mode": bool(a.ceil_mode), "layout": "NCHW"}
        if op == "avg_pool2d":
            attrs["count_include_pad"] = bool(a.count_include_pad)
        return LIFTED, {"op": op, "attrs": attrs}, list(call.args)
    return read


def _matmul(call) -> Reading:
    _default_out_dtype(call)
    return "matmul", {}, list(call.args)


def _einsum(call) -> Reading:
    """Two operands whose einsum is a matmul, as transposes, reshapes and that matmul (bridge/einsum.py)."""
    from . import einsum

    operands = call.args[0]
    if not isinstance(operands, relax.Tuple) or len(operands.fields) != 2:
        raise Unsupported("einsum of other than two operands")
    steps = einsum.plan(str(call.attrs.subscripts), *(static_shape(f.ty) for f in operands.fields))
    if steps is None:
        raise Unsupported(f"einsum '{call.attrs.subscripts}' is not a matmul")
    return PROGRAM, {"steps": tuple(steps)}, list(operands.fields)


def _pool(op: str) -> Importer:
    def read(call) -> Reading:
        a = call.attrs
        _same_out_layout(call, str(a.layout))
        attrs = {"kernel": _ints(a.pool_size), "strides": _ints(a.strides), "padding": _ints(a.padding),
                 "dilation": _ints(a.dilation), "ceil_mode": bool(a.ceil_mode), "layout": str(a.layout)}
        if op == "avg_pool2d":
            attrs["count_include_pad"] = bool(a.count_include_pad)
        return op, attrs, list(call.args)
    return read


def _batch_norm(call) -> Reading:
    a = call.attrs
    if bool(a.training):
        raise Unsupported("batch_norm in training mode (uses batch statistics)")
    if not (bool(a.center) and bool(a.scale)):
        raise Unsupported("batch_norm without center or scale")
    return "batch_norm", {"axis": int(a.axis), "epsilon": float(a.epsilon)}, list(call.args)


def _layer_norm(call) -> Reading:
    a = call.attrs
    # TVM's legalization ignores center/scale, so only the default is safe to model.
    if not (bool(a.center) and bool(a.scale)):
        raise Unsupported("layer_norm without center or scale")
    return "layer_norm", {"axes": _ints(a.axes), "epsilon": float(a.epsilon)}, list(call.args)


def _group_norm(call) -> Reading:
    a = call.attrs
    rank, axis = call.args[0].ty.ndim, int(a.channel_axis)
    axis %= max(rank, 1)
    if not (bool(a.center) and bool(a.scale)):  # (as for layer_norm: legalized without them)
        raise Unsupported("group_norm without center or scale")
    if rank < 3 or axis not in (1, rank - 1) or list(_ints(a.axes)) != group_norm_axes(rank, axis):
        raise Unsupported(f"group_norm over axes {_ints(a.axes)} of rank {rank} with channels on axis {axis}: "
                          "modelled with channels first or last, over every other axis but the batch's")
    return "group_norm", {"groups": int(a.num_groups), "epsilon": float(a.epsilon), "axis": axis}, list(call.args)


def _softmax(call) -> Reading:
    return "softmax", {"axis": int(call.attrs.axis)}, list(call.args)


def _concat(call) -> Reading:
    if call.attrs.axis is None:
        raise Unsupported("concat with axis=None (flattening)")
    fields = getattr(call.args[0], "fields", None)  # None: a tuple variable, expanded by the importer
    return "concat", {"axis": int(call.attrs.axis)}, list(fields) if fields is not None else [call.args[0]]


def _split(call) -> Reading:
    x = call.args[0]
    shape = static_shape(x.ty)
    axis = int(call.attrs.axis) % len(shape)
    dim = shape[axis]
    ios = call.attrs.indices_or_sections
    if isinstance(getattr(ios, "value", ios), int):
        n = as_int(ios)
        if n <= 0 or dim % n:
            raise Unsupported(f"split into {n} sections of an axis of size {dim}")
        sizes = (dim // n,) * n
    else:
        bounds = [0] + [min(max(as_int(i), 0), dim) for i in ios] + [dim]
        sizes = tuple(b - a for a, b in zip(bounds, bounds[1:]))
    if any(s <= 0 for s in sizes):
        raise Unsupported(f"split with an empty part (sizes {list(sizes)})")
    return "split", {"axis": axis, "sizes": sizes}, [x]


def _permute_dims(call) -> Reading:
    x = call.args[0]
    rank = len(static_shape(x.ty))
    axes = call.attrs.axes
    perm = tuple(reversed(range(rank))) if axes is None else tuple(int(a) % rank for a in axes)
    return "transpose", {"perm": perm}, [x]


def _reshape(call) -> Reading:
    return "reshape", {"shape": static_shape(call.ty)}, [call.args[0]]


def _broadcast_to(call) -> Reading:
    return "broadcast_to", {"shape": static_shape(call.ty)}, [call.args[0]]


def _strided_slice(call) -> Reading:
    x, axes, begin, end = call.args[:4]
    strides = int_tuple(call.args[4]) if len(call.args) > 4 and call.args[4] is not None else ()
    return "strided_slice", {"axes": int_tuple(axes), "begin": int_tuple(begin), "end": int_tuple(end),
                             "strides": strides}, [x]


def _take(call) -> Reading:
    """take at constant indices that run contiguously: a slice, squeezed or reshaped to take's shape.

    One index unbinds a merged Q/K/V or picks a class token (ONNX Gather at a scalar); torch.export
    spells some reshapes as a gather of arange. Other indices (a position bias table's lookups, token
    ids known only at run time) stay opaque; so does an index out of range in "fast" mode, which reads
    outside the tensor.
    """
    x, indices = call.args[:2]
    shape = static_shape(x.ty)
    if not isinstance(indices, Constant):
        raise Unsupported("take with indices known only at run time")
    try:
        index = np.asarray(indices.value.numpy())
    except Exception as exc:  # noqa: BLE001 - a constant of another kind: left opaque, never a failed import
        raise Unsupported(f"take with indices that are not a tensor constant ({type(exc).__name__})") from exc
    if not np.issubdtype(index.dtype, np.integer) or index.size == 0:
        raise Unsupported(f"take with {index.dtype} indices of shape {index.shape}")
    if call.attrs.axis is None:
        raise Unsupported("take from the flattened tensor (axis=None)")
    axis, mode = int(call.attrs.axis) % len(shape), str(call.attrs.mode)
    dim = shape[axis]
    flat = index.astype(np.int64).ravel()
    if mode == "wrap":
        flat = flat % dim
    elif mode == "clip":
        flat = np.clip(flat, 0, dim - 1)
    elif flat.min() < 0 or flat.max() >= dim:
        raise Unsupported(f"take at indices outside an axis of size {dim} in {mode} mode")
    begin = int(flat[0])
    if not np.array_equal(flat, np.arange(begin, begin + flat.size)):
        raise Unsupported("take at indices that are not one contiguous run")
    steps = []
    if flat.size != dim:
        steps.append(("strided_slice", {"axes": (axis,), "begin": (begin,), "end": (begin + flat.size,),
                                        "strides": ()}))
    if index.ndim == 0:
        steps.append(("squeeze", {"axes": (axis,)}))
    elif index.shape != (flat.size,):
        steps.append(("reshape", {"shape": static_shape(call.ty)}))
    if not steps:
        raise Unsupported("take of a whole axis in order (the identity)")  # rare; no graph op to read it as
    return CHAIN, {"steps": tuple(steps)}, [x]


def stack_axis(call) -> int:
    """The axis a relax.stack inserts, counted from 0 in its result."""
    rank = len(static_shape(call.ty))
    axis = 0 if call.attrs.axis is None else int(call.attrs.axis)
    if not -rank <= axis < rank:
        raise Unsupported(f"stack at axis {axis} of a rank-{rank} result")
    return axis % rank


def _stack(call) -> Reading:
    """torch.stack and ONNX Sum's import: each operand given the new axis, then concatenated along it."""
    operands = call.args[0]
    if not isinstance(operands, relax.Tuple) or not operands.fields:
        raise Unsupported("stack of a tuple variable")
    axis, n = stack_axis(call), len(operands.fields)
    steps = [("expand_dims", {"axes": (axis,)}, (k,)) for k in range(n)]
    steps.append(("concat", {"axis": axis}, tuple(range(n, 2 * n))))
    return PROGRAM, {"steps": tuple(steps)}, list(operands.fields)


def _squeeze(call) -> Reading:
    x = call.args[0]
    shape = static_shape(x.ty)
    axis = call.attrs.axis
    axes = tuple(i for i, d in enumerate(shape) if d == 1) if axis is None else _ints(axis)
    return "squeeze", {"axes": axes}, [x]


def _expand_dims(call) -> Reading:
    return "expand_dims", {"axes": _ints(call.attrs.axis)}, [call.args[0]]


def _reduce(op: str) -> Importer:
    def read(call) -> Reading:
        if op == "variance":  # TVM truncates an integer variance's two means; numpy's does not
            _float_only(call)
        axis = call.attrs.axis
        return op, {"axes": () if axis is None else _ints(axis), "keepdims": bool(call.attrs.keepdims)}, \
            [call.args[0]]
    return read


def _clip(call) -> Reading:
    _float_only(call)
    low, high = (float(as_number(a)) for a in call.args[1:3])
    if not low <= high:  # TVM and ONNX disagree on an empty range: not expressed
        raise Unsupported(f"clip with min {low} > max {high}")
    return "clip", {"min": low, "max": high}, [call.args[0]]


def _leakyrelu(call) -> Reading:
    _float_only(call)
    return "leaky_relu", {"alpha": float(call.attrs.alpha)}, [call.args[0]]


def _astype(call) -> Reading:
    return "cast", {"dtype": str(call.attrs.dtype)}, [call.args[0]]


RELAX_MIRROR_MODES = {"reflect": "reflect", "replicate": "edge"}  # Relax's pad modes => mirror_pad's (numpy's names)


def _pad(call) -> Reading:
    a = call.attrs
    mode = RELAX_MIRROR_MODES.get(str(a.pad_mode))
    if mode is not None:
        return "mirror_pad", {"pad_width": _ints(a.pad_width), "mode": mode}, [call.args[0]]
    if str(a.pad_mode) != "constant":
        raise Unsupported(f"pad mode {a.pad_mode}")
    return "pad", {"pad_width": _ints(a.pad_width), "value": float(a.pad_value)}, [call.args[0]]


def _resize2d(call) -> Reading:
    """ONNX Resize as TVM imports it, where graph/ops/resize.py has its reference; other resizes stay opaque."""
    from ..graph.ops.resize import COORDINATES, METHODS, ROUNDINGS

    _float_only(call)
    a = call.attrs
    size = int_tuple(call.args[1])  # Unsupported where the size is known only at run time
    _default_out_dtype(call)  # (topi reads the region of interest only for tf_crop_and_resize, left opaque)
    method, coordinates, rounding = str(a.method), str(a.coordinate_transformation_mode), str(a.rounding_method)
    if method not in METHODS or coordinates not in COORDINATES or rounding not in ROUNDINGS \
            or str(a.layout) not in ("NCHW", "NHWC"):
        raise Unsupported(f"resize2d {method}/{coordinates}/{rounding} in {a.layout}")
    if coordinates == "align_corners" and min(size) == 1:
        raise Unsupported("resize2d with align_corners onto a size of 1 (TVM cannot build it)")
    return "resize2d", {"size": size, "layout": str(a.layout), "method": method,
                        "coordinates": coordinates, "rounding": rounding}, [call.args[0]]


def _plain(op: str, floats_only: bool = False) -> Importer:
    def read(call) -> Reading:
        if floats_only:
            _float_only(call)
        return op, {}, list(call.args)
    return read


UNARY_RELAX = {
    "relu": "relax.nn.relu", "sigmoid": "relax.sigmoid", "tanh": "relax.tanh", "gelu": "relax.nn.gelu",
    "gelu_tanh": "relax.nn.gelu_tanh", "silu": "relax.nn.silu", "erf": "relax.erf", "exp": "relax.exp",
    "log": "relax.log", "sqrt": "relax.sqrt", "rsqrt": "relax.rsqrt", "neg": "relax.negative",
    "abs": "relax.abs",
}
EXACT_ON_INTEGERS = ("relu", "neg", "abs")
BINARY_RELAX = {
    "add": "relax.add", "sub": "relax.subtract", "mul": "relax.multiply", "div": "relax.divide",
    "pow": "relax.power", "maximum": "relax.maximum", "minimum": "relax.minimum",
}

IMPORTERS: dict[str, Importer] = {
    "relax.nn.conv2d": _conv2d,
    "relax.nn.conv1d": _conv1d,
    "relax.nn.conv2d_transpose": _conv2d_transpose,
    "relax.nn.conv1d_transpose": _conv1d_transpose,
    "relax.nn.max_pool1d": _pool1d("max_pool2d"),
    "relax.nn.avg_pool1d": _pool1d("avg_pool2d"),
    "relax.matmul": _matmul,
    "relax.einsum": _einsum,
    "relax.nn.max_pool2d": _pool("max_pool2d"),
    "relax.nn.avg_pool2d": _pool("avg_pool2d"),
    "relax.nn.batch_norm": _batch_norm,
    "relax.nn.layer_norm": _layer_norm,
    "relax.nn.group_norm": _group_norm,
    "relax.nn.softmax": _softmax,
    "relax.concat": _concat,
    "relax.split": _split,
    "relax.permute_dims": _permute_dims,
    "relax.reshape": _reshape,
    "relax.broadcast_to": _broadcast_to,
    "relax.strided_slice": _strided_slice,
    "relax.squeeze": _squeeze,
    "relax.take": _take,
    "relax.expand_dims": _expand_dims,
    "relax.stack": _stack,
    "relax.astype": _astype,
    "relax.clip": _clip,
    "relax.nn.leakyrelu": _leakyrelu,
    "relax.isnan": _plain("isnan", floats_only=True),
    "relax.where": _plain("where"),
    "relax.nn.pad": _pad,
    "relax.image.resize2d": _resize2d,
    **{f"relax.{op}": _reduce(op) for op in ("sum", "mean", "max", "min", "variance")},
    **{name: _plain(op, op not in EXACT_ON_INTEGERS) for op, name in UNARY_RELAX.items()},
    **{name: _plain(op, op in ("div", "pow")) for op, name in BINARY_RELAX.items()},
}


def import_call(call) -> Reading:
    """(graph op, attrs, tensor arguments) of a Relax call, or Unsupported."""
    name = getattr(call.op, "name", None)
    importer = IMPORTERS.get(name) if isinstance(name, str) else None
    if importer is None:
        raise Unsupported(f"{name or call.op} is not modelled")
    return importer(call)


# ---- exporters: graph node -> Relax expression ---------------------------------
Emit = Callable[[Any], Any]  # binds an expression, returns its variable
op = relax.op


def _activation(expr, activation: str, emit: Emit):
    if activation == "none":
        return expr
    return _UNARY_MAKERS[activation](emit(expr))


def _conv2d_out(a, xs, ts, emit):
    conv = op.nn.conv2d(xs[0], xs[1], strides=a["strides"], padding=a["padding"], dilation=a["dilation"],
                        groups=a["groups"], data_layout=a["data_layout"], kernel_layout=a["kernel_layout"],
                        out_layout=a["data_layout"])
    return _activation(conv, a["activation"], emit)


def _conv2d_transpose_out(a, xs, ts, emit):
    return op.nn.conv2d_transpose(xs[0], xs[1], strides=a["strides"], padding=a["padding"],
                                  output_padding=a["output_padding"], dilation=a["dilation"], groups=a["groups"])


def _pool_out(kind):
    def make(a, xs, ts, emit):
        return getattr(op.nn, kind)(xs[0], pool_size=a["kernel"], strides=a["strides"], padding=a["padding"],
                                    dilation=a["dilation"], ceil_mode=a["ceil_mode"],
                                    count_include_pad=a.get("count_include_pad", False), layout=a["layout"],
                                    out_layout=a["layout"])
    return make


def _split_out(a, xs, ts, emit):
    sizes = a["sizes"]
    if len(set(sizes)) == 1:
        return op.split(xs[0], len(sizes), axis=a["axis"])
    return op.split(xs[0], [int(v) for v in np.cumsum(sizes)[:-1]], axis=a["axis"])


def _enlarge_out(a, xs, ts, emit):
    kh, kw = a["kernel"]
    ph, pw = (kh - ts[0].shape[2]) // 2, (kw - ts[0].shape[3]) // 2
    return op.nn.pad(xs[0], [0, 0, 0, 0, ph, ph, pw, pw])


def _identity_or(make):
    """squeeze/expand_dims with no axes are the identity (Relax would read [] as 'all')."""
    def build(a, xs, ts, emit):
        return xs[0] if not a["axes"] else make(a, xs)
    return build


def _exported_group_norm_out(a, xs, ts, emit):
    """The spelling the graph op is defined as, in its layout (graph/ops/norm.py)."""
    x, eps, scale, bias = xs
    shape = tuple(ts[0].shape)
    grouped, axes = group_norm_grouping(shape, ts[2].shape[0], a["axis"])
    split = emit(op.reshape(x, grouped))
    mean, var = (emit(f(split, list(axes), keepdims=True)) for f in (op.mean, op.variance))
    normed = emit(op.divide(emit(op.subtract(split, mean)), emit(op.sqrt(emit(op.add(var, eps))))))
    return op.reshape(emit(op.add(emit(op.multiply(normed, scale)), bias)), shape)


def _reduce_out(name):
    return lambda a, xs, ts, emit: getattr(op, name)(xs[0], axis=list(a["axes"]) or None, keepdims=a["keepdims"])


_UNARY_MAKERS = {
    "relu": op.nn.relu, "sigmoid": op.sigmoid, "tanh": op.tanh, "gelu": op.nn.gelu, "gelu_tanh": op.nn.gelu_tanh,
    "silu": op.nn.silu, "erf": op.erf, "exp": op.exp, "log": op.log, "sqrt": op.sqrt, "rsqrt": op.rsqrt,
    "neg": op.negative, "abs": op.abs,
}
_BINARY_MAKERS = {
    "add": op.add, "sub": op.subtract, "mul": op.multiply, "div": op.divide, "pow": op.power,
    "maximum": op.maximum, "minimum": op.minimum,
}

def _shuffle_out(name: str):
    """A shuffle as the reshape, transpose, reshape it is defined as (graph/ops/shuffle.py), in its layout."""
    from ..graph.ops.shuffle import shuffle_spelling

    def out(a: dict, xs, ts, emit):
        split, perm, to = shuffle_spelling(name, ts[0].shape, a)
        parts = emit(op.permute_dims(emit(op.reshape(xs[0], split)), list(perm)))
        return op.reshape(parts, tuple(to))
    return out


def _subpixel_kernel_out(a: dict, xs, ts, emit):
    """The taps gathered from the kernel with a zero tap appended (graph/ops/subpixel.py), then its
    phases moved to the output channels; weights only, so FoldConstant computes it."""
    from ..graph.ops.subpixel import subpixel_taps

    c, o, kh, kw = ts[0].shape
    (sh, sw), (ph, pw) = a["strides"], a["padding"]
    th, tw = subpixel_taps(kh, sh, ph), subpixel_taps(kw, sw, pw)
    padded = emit(op.nn.pad(xs[0], [0, 0, 0, 0, 0, 1, 0, 1]))
    rows = emit(op.take(padded, relax.const(th.reshape(-1).astype("int64")), axis=2))
    taps = emit(op.take(rows, relax.const(tw.reshape(-1).astype("int64")), axis=3))
    split = emit(op.reshape(taps, (c, o, sh, th.shape[1], sw, tw.shape[1])))
    moved = emit(op.permute_dims(split, [1, 2, 4, 0, 3, 5]))
    return op.reshape(moved, (o * sh * sw, c, th.shape[1], tw.shape[1]))


Exporter = Callable[[dict, list, list, Emit], Any]  # attrs, arg exprs, arg TensorTypes, emit
EXPORTERS: dict[str, Exporter] = {
    "conv2d": _conv2d_out,
    "conv2d_transpose": _conv2d_transpose_out,
    "matmul": lambda a, xs, ts, emit: _activation(op.matmul(xs[0], xs[1]), a["activation"], emit),
    "max_pool2d": _pool_out("max_pool2d"),
    "avg_pool2d": _pool_out("avg_pool2d"),
    "resize2d": lambda a, xs, ts, emit: op.image.resize2d(
        xs[0], tuple(a["size"]), roi=(0.0, 0.0, 0.0, 0.0), layout=a["layout"], method=a["method"],
        coordinate_transformation_mode=a["coordinates"], rounding_method=a["rounding"]),
    "batch_norm": lambda a, xs, ts, emit: op.nn.batch_norm(*xs, axis=a["axis"], epsilon=a["epsilon"], training=False),
    "layer_norm": lambda a, xs, ts, emit: op.nn.layer_norm(*xs, axes=list(a["axes"]), epsilon=a["epsilon"]),
    "softmax": lambda a, xs, ts, emit: op.nn.softmax(xs[0], axis=a["axis"]),
    "group_norm": lambda a, xs, ts, emit: op.nn.group_norm(
        *xs, a["groups"], a["axis"], group_norm_axes(len(ts[0].shape), a["axis"]), a["epsilon"]),
    "exported_group_norm": _exported_group_norm_out,
    "concat": lambda a, xs, ts, emit: op.concat(list(xs), axis=a["axis"]),
    "split": _split_out,
    "transpose": lambda a, xs, ts, emit: op.permute_dims(xs[0], list(a["perm"])),
    "channel_shuffle": _shuffle_out("channel_shuffle"),
    "depth_to_space": _shuffle_out("depth_to_space"),
    "space_to_depth": _shuffle_out("space_to_depth"),
    "reshape": lambda a, xs, ts, emit: op.reshape(xs[0], a["shape"]),
    "broadcast_to": lambda a, xs, ts, emit: op.broadcast_to(xs[0], a["shape"]),
    "strided_slice": lambda a, xs, ts, emit: op.strided_slice(xs[0], list(a["axes"]), list(a["begin"]),
                                                          list(a["end"]), list(a["strides"]) or None),
    "squeeze": _identity_or(lambda a, xs: op.squeeze(xs[0], list(a["axes"]))),
    "expand_dims": _identity_or(lambda a, xs: op.expand_dims(xs[0], list(a["axes"]))),
    "cast": lambda a, xs, ts, emit: op.astype(xs[0], a["dtype"]),
    "clip": lambda a, xs, ts, emit: op.clip(xs[0], a["min"], a["max"]),
    "leaky_relu": lambda a, xs, ts, emit: op.nn.leakyrelu(xs[0], a["alpha"]),
    "isnan": lambda a, xs, ts, emit: op.isnan(xs[0]),
    "where": lambda a, xs, ts, emit: op.where(xs[0], xs[1], xs[2]),
    "pad": lambda a, xs, ts, emit: op.nn.pad(xs[0], list(a["pad_width"]), "constant", a["value"]),
    "mirror_pad": lambda a, xs, ts, emit: op.nn.pad(
        xs[0], list(a["pad_width"]), next(k for k, v in RELAX_MIRROR_MODES.items() if v == a["mode"])),
    "enlarge": _enlarge_out,
    "subpixel_kernel": _subpixel_kernel_out,
    **{name: _reduce_out(name) for name in ("sum", "mean", "max", "min", "variance")},
    **{name: (lambda f: lambda a, xs, ts, emit: f(xs[0]))(f) for name, f in _UNARY_MAKERS.items()},
    **{name: (lambda f: lambda a, xs, ts, emit: f(xs[0], xs[1]))(f) for name, f in _BINARY_MAKERS.items()},
}

# Graph ops whose Relax expression is a tuple (item k = node output k).
TUPLE_EXPORTS = ("split", "batch_norm")


def export_node(op_name: str, attrs: dict, args: list, types: list, emit: Emit):
    """The Relax expression computing a graph node from its argument expressions."""
    try:
        exporter = EXPORTERS[op_name]
    except KeyError:
        raise Unsupported(f"graph op '{op_name}' has no Relax form") from None
    return exporter(attrs, args, types, emit)


def constant_expr(attrs: dict):
    """A graph `constant` node (identity kernel, ones, ...) as a Relax constant."""
    return relax.const(constant_value(attrs["kind"], tuple(attrs["shape"]), attrs["dtype"]), attrs["dtype"])
