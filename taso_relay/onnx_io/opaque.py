"""ONNX forms of opaque nodes: Relax calls the graph does not model, each written as the one or few
ONNX operators that compute it, so a model that still has them can be exported optimized.

Each emitter reads the call's attributes and refuses (ExportError) what its ONNX operator cannot
express; `export_module` then checks the whole export against onnxruntime before writing it.
"""
from __future__ import annotations

import numpy as np

from .writer import ExportError, Writer, elem_type


def _call_args(w: Writer, call, xs, skip_shapes: bool = False) -> list[str]:
    """The ONNX names of a call's tensor arguments: its variables are the opaque node's inputs, in
    order (xs); its constants stay in the call, and become initializers here. skip_shapes: leave
    out shape arguments (resize2d's output size, which its emitter reads off the output's type)."""
    from tvm import relax
    from tvm.ir.expr import Constant

    names, given = [], iter(xs)
    for arg in call.args:
        if isinstance(arg, Constant):
            names.append(w.const(arg.value.numpy(), "c"))
        elif isinstance(arg, relax.Var):
            names.append(next(given))
        elif skip_shapes and isinstance(arg, relax.ShapeExpr):
            continue
        else:
            raise ExportError(f"{call.op.name}: an argument of kind {type(arg).__name__} has no ONNX form here")
    return names


def _ints(values) -> list[int]:
    return [int(v) for v in values]


def _require_input_dtype(call, outs, ins) -> None:
    """Calls with an out_dtype attribute: only the input's own dtype has an ONNX form here."""
    if str(outs[0].dtype) != str(ins[0].dtype):
        raise ExportError(f"{call.op.name} into another dtype has no ONNX form here")


def _take(w: Writer, call, xs, ins, outs):
    axis = call.attrs.axis
    if axis is None:  # relax.take without an axis indexes the flattened tensor
        raise ExportError("relax.take without an axis has no ONNX form")
    return [w.one("Gather", _call_args(w, call, xs), axis=int(axis))]


def _cumsum(w: Writer, call, xs, ins, outs):
    a = call.attrs
    if a.axis is None:
        raise ExportError("relax.cumsum over the flattened tensor has no ONNX form here")
    _require_input_dtype(call, outs, ins)
    axis = w.const(np.asarray(int(a.axis), dtype=np.int64), "axis")
    return [w.one("CumSum", [_call_args(w, call, xs)[0], axis], exclusive=int(bool(a.exclusive)))]


def _conv1d(w: Writer, call, xs, ins, outs):
    a = call.attrs
    if (a.data_layout, a.kernel_layout, a.out_layout) != ("NCW", "OIW", "NCW"):
        raise ExportError(f"conv1d in layout {a.data_layout}/{a.kernel_layout} (ONNX Conv is NCW/OIW)")
    _require_input_dtype(call, outs, ins)
    return [w.one("Conv", _call_args(w, call, xs), strides=_ints(a.strides), pads=_ints(a.padding),
                  dilations=_ints(a.dilation), group=int(a.groups))]


def _conv_transpose(layouts: tuple[str, str]):
    """conv2d_transpose (NCHW/IOHW) or conv1d_transpose (NCW/IOW) as ONNX ConvTranspose."""
    def emit(w: Writer, call, xs, ins, outs):
        a = call.attrs
        if (a.data_layout, a.kernel_layout, a.out_layout) != (layouts[0], layouts[1], layouts[0]):
            raise ExportError(f"{call.op.name} in layout {a.data_layout}/{a.kernel_layout} (ONNX ConvTranspose "
                              f"is {'/'.join(layouts)})")
        _require_input_dtype(call, outs, ins)
        # Relax pads (top, left, bottom, right) or (left, right): ONNX's order too (begins, then ends)
        return [w.one("ConvTranspose", _call_args(w, call, xs), strides=_ints(a.strides), pads=_ints(a.padding),
                      output_padding=_ints(a.output_padding), dilations=_ints(a.dilation), group=int(a.groups))]
    return emit


def _prelu(w: Writer, call, xs, ins, outs):
    from ..bridge.ops_table import static_shape

    x, alpha = _call_args(w, call, xs)
    if int(np.prod(static_shape(call.args[1].ty))) == 1:
        return [w.one("PRelu", [x, alpha])]  # one slope for all (nn.PReLU()): it broadcasts as it is
    rank, axis = len(outs[0].shape), int(call.attrs.axis)
    axis = axis + rank if axis < 0 else axis
    # ONNX PRelu broadcasts the slope from the right: the channel count, then ones to the last axis
    channels = outs[0].shape[axis]
    slope = w.one("Reshape", [alpha, w.ints([channels] + [1] * (rank - axis - 1))])
    return [w.one("PRelu", [x, slope])]


def _axes(call, rank: int) -> list[int]:
    axis = call.attrs.axis
    return list(range(rank)) if axis is None else [int(v) % rank for v in axis]


def _rms_norm(w: Writer, call, xs, ins, outs):
    """x / sqrt(mean(x * x over axes) + epsilon) * weight, as topi computes it (ONNX has RMSNormalization
    only from opset 23); the weight, shaped as the normalized axes, is reshaped to broadcast in place."""
    x, weight = _call_args(w, call, xs)
    shape = [int(d) for d in outs[0].shape]
    axes = sorted({int(a) % len(shape) for a in call.attrs.axes})
    dtype = str(outs[0].dtype)
    narrow = dtype in ("float16", "bfloat16")  # topi computes these in float32 (x * x overflows float16)
    if narrow:
        x, weight = (w.one("Cast", [v], to=elem_type("float32")) for v in (x, weight))
    mean = w.one("ReduceMean", [w.one("Mul", [x, x])], axes=axes, keepdims=1)
    eps = w.scalar(float(call.attrs.epsilon), "float32" if narrow else dtype)
    root = w.one("Sqrt", [w.one("Add", [mean, eps])])
    scale = w.one("Reshape", [weight, w.ints([d if k in axes else 1 for k, d in enumerate(shape)])])
    y = w.one("Mul", [w.one("Div", [x, root]), scale])
    return [w.one("Cast", [y], to=elem_type(dtype)) if narrow else y]


def _arg_reduce(onnx_type: str):
    def emit(w: Writer, call, xs, ins, outs):
        if call.attrs.axis is None:
            raise ExportError(f"{call.op.name} over the flattened tensor has no ONNX form here")
        if str(outs[0].dtype) != "int64":
            raise ExportError(f"{call.op.name} into {outs[0].dtype} has no ONNX form here")
        return [w.one(onnx_type, _call_args(w, call, xs), axis=int(call.attrs.axis),
                      keepdims=int(bool(call.attrs.keepdims)))]
    return emit


_RESIZE_MODES = {"nearest_neighbor": "nearest", "linear": "linear", "cubic": "cubic"}
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def resize_attrs(method: str, coordinates: str, rounding: str) -> dict:
    """ONNX Resize's mode, coordinate mode and nearest mode for topi's (rounding "" is topi's default)."""
    from ..graph.ops.resize import nearest_rounding

    if method not in _RESIZE_MODES:
        raise ExportError(f"resize2d with method {method} has no ONNX form here")
    attrs = {"mode": _RESIZE_MODES[method], "coordinate_transformation_mode": coordinates}
    if method == "nearest_neighbor":
        rounding = nearest_rounding(coordinates, rounding)
        if rounding not in _NEAREST_MODES:  # "round" ties to even in TVM: ONNX has no such nearest_mode
            raise ExportError(f"resize2d rounding {rounding!r} has no ONNX nearest_mode")
        attrs["nearest_mode"] = rounding
    return attrs


def _resize2d(w: Writer, call, xs, ins, outs):
    """TVM's importer maps ONNX Resize's attributes one to one; this maps them back. The output
    size is the output's shape, given to ONNX as `sizes`."""
    a = call.attrs
    if a.layout != "NCHW":
        raise ExportError(f"resize2d in layout {a.layout} has no ONNX form here")
    if a.coordinate_transformation_mode == "tf_crop_and_resize":
        raise ExportError("resize2d with a region of interest has no ONNX form here")
    _require_input_dtype(call, outs, ins)
    attrs = {**resize_attrs(str(a.method), str(a.coordinate_transformation_mode), str(a.rounding_method)),
             "cubic_coeff_a": float(a.cubic_alpha), "exclude_outside": int(a.cubic_exclude),
             "extrapolation_value": float(a.extrapolation_value)}
    (x,) = _call_args(w, call, xs, skip_shapes=True)
    return [w.one("Resize", [x, "", "", w.ints(outs[0].shape)], **attrs)]


def _call_tir(w: Writer, call, xs, ins, outs):
    """A call_tir of one of topi's functions that ONNX has (reflect and edge pads, a tile that copies
    whole axes), recognised in the module the graph came from (bridge/call_tir.describe_opaque)."""
    from ..bridge.call_tir import describe_opaque

    found = describe_opaque(call, w.module)
    if found is None:
        name = getattr(call.args[0], "name_hint", "?")
        raise ExportError(f"relax.call_tir of '{name}' has no ONNX form here")
    kind, params = found
    (x,) = xs
    if kind == "tile":
        return [w.one("Tile", [x, w.ints(params["reps"])])]
    mode = {"mirror_pad": "reflect", "replicate_pad": "edge"}[kind]
    return [w.one("Pad", [x, w.ints(list(params["before"]) + list(params["after"]))], mode=mode)]


def _single_op(onnx_type: str):
    return lambda w, call, xs, ins, outs: [w.one(onnx_type, _call_args(w, call, xs))]


# What real exports leave opaque: embedding lookups (take, less, logical_and), RoBERTa's position ids
# (cumsum, gather_elements), audio nets (conv1d where not read as conv2d; log_softmax heads, sin of Snake
# activations, conv1d_transpose of vocoders), decoders and U-Nets (conv2d_transpose, resize2d),
# PReLU, classifier heads (argmax), ReflectionPad2d and
# ReplicationPad2d and whole-axis repeats (call_tir of topi's mirror_pad, replicate_pad, tile).
OPAQUE_EMITTERS = {
    "relax.take": _take,
    "relax.cumsum": _cumsum,
    "relax.gather_elements": lambda w, call, xs, ins, outs: [
        w.one("GatherElements", _call_args(w, call, xs), axis=int(call.attrs.axis))],
    "relax.nn.conv1d": _conv1d,
    "relax.nn.conv2d_transpose": _conv_transpose(("NCHW", "IOHW")),
    "relax.nn.conv1d_transpose": _conv_transpose(("NCW", "IOW")),
    "relax.nn.log_softmax": lambda w, call, xs, ins, outs: [
        w.one("LogSoftmax", _call_args(w, call, xs), axis=int(call.attrs.axis))],
    "relax.nn.prelu": _prelu,
    "relax.nn.rms_norm": _rms_norm,
    "relax.argmax": _arg_reduce("ArgMax"),
    "relax.argmin": _arg_reduce("ArgMin"),
    "relax.image.resize2d": _resize2d,
    "relax.call_tir": _call_tir,
    **{f"relax.{name}": _single_op(onnx_type)
       for name, onnx_type in (("less", "Less"), ("greater", "Greater"), ("equal", "Equal"),
                               ("less_equal", "LessOrEqual"), ("greater_equal", "GreaterOrEqual"),
                               ("logical_and", "And"), ("logical_or", "Or"), ("logical_not", "Not"),
                               ("sin", "Sin"), ("cos", "Cos"), ("floor", "Floor"), ("ceil", "Ceil"),
                               ("sign", "Sign"))},
}
