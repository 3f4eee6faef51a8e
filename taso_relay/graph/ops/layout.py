"""Data-movement operators: no arithmetic, so the float and modular references coincide."""
from __future__ import annotations

import numpy as np

from ..types import TensorType
from .registry import REQUIRED, OpDef, Pattern, fail, register


def _same(ref):
    """Layout ops compute the same thing on integers mod p as on floats."""
    return lambda xs, attrs, p: ref(xs, attrs)


def _axis(op, axis, rank, types):
    if not -rank <= axis < rank:
        raise fail(op, f"axis {axis} out of range for rank {rank}", types)
    return axis % rank


def _canon_axis(types, attrs):
    attrs["axis"] = int(attrs["axis"]) % max(types[0].rank, 1)
    return attrs


def _canon_axes(types, attrs, rank=None):
    rank = types[0].rank if rank is None else rank
    attrs["axes"] = tuple(sorted(int(a) % rank for a in attrs["axes"]))
    return attrs


# concat -------------------------------------------------------------------
def concat_infer(types, attrs):
    if not types:
        raise fail("concat", "needs at least one input", types)
    rank = types[0].rank
    axis = _axis("concat", attrs["axis"], rank, types)
    for t in types:
        if t.rank != rank or t.dtype != types[0].dtype:
            raise fail("concat", "inputs differ in rank or dtype", types)
        if any(t.shape[d] != types[0].shape[d] for d in range(rank) if d != axis):
            raise fail("concat", f"inputs differ outside axis {axis}", types)
    shape = list(types[0].shape)
    shape[axis] = sum(t.shape[axis] for t in types)
    return [TensorType(tuple(shape), types[0].dtype)]


def _concat_ref(xs, attrs):
    return [np.concatenate(xs, axis=attrs["axis"])]


register(OpDef("concat", None, {"axis": 0}, concat_infer, _concat_ref, _same(_concat_ref),
               Pattern.INJECTIVE, canon=_canon_axis))


# split --------------------------------------------------------------------
def split_infer(types, attrs):
    (x,) = types
    axis = _axis("split", attrs["axis"], x.rank, types)
    sizes = attrs["sizes"]
    if not sizes or any(s <= 0 for s in sizes) or sum(sizes) != x.shape[axis]:
        raise fail("split", f"sizes {list(sizes)} do not partition axis {axis} of size {x.shape[axis]}", types)
    outs = []
    for s in sizes:
        shape = list(x.shape)
        shape[axis] = s
        outs.append(TensorType(tuple(shape), x.dtype))
    return outs


def _split_ref(xs, attrs):
    bounds = np.cumsum(attrs["sizes"])[:-1]
    return [np.asarray(p, order="C") for p in np.split(xs[0], bounds, axis=attrs["axis"])]


register(OpDef("split", 1, {"axis": 0, "sizes": ()}, split_infer, _split_ref, _same(_split_ref),
               Pattern.INJECTIVE, canon=_canon_axis, doc="Explicit sizes; one output per size."))


# transpose ----------------------------------------------------------------
def transpose_infer(types, attrs):
    (x,) = types
    perm = attrs["perm"]
    if sorted(perm) != list(range(x.rank)):
        raise fail("transpose", f"perm {list(perm)} is not a permutation of rank {x.rank}", types)
    return [TensorType(tuple(x.shape[p] for p in perm), x.dtype)]


def _transpose_ref(xs, attrs):
    return [np.asarray(np.transpose(xs[0], attrs["perm"]), order="C")]


register(OpDef("transpose", 1, {"perm": ()}, transpose_infer, _transpose_ref, _same(_transpose_ref),
               Pattern.INJECTIVE, tags=frozenset({"layout"})))


# reshape ------------------------------------------------------------------
def reshape_infer(types, attrs):
    (x,) = types
    shape = tuple(attrs["shape"])
    n = 1
    for d in shape:
        n *= d
    if any(d < 0 for d in shape) or n != x.size:
        raise fail("reshape", f"cannot reshape {x.size} elements into {list(shape)}", types)
    return [TensorType(shape, x.dtype)]


def _reshape_ref(xs, attrs):
    return [np.reshape(xs[0], attrs["shape"])]


register(OpDef("reshape", 1, {"shape": ()}, reshape_infer, _reshape_ref, _same(_reshape_ref),
               Pattern.INJECTIVE, tags=frozenset({"layout"})))


# enlarge ------------------------------------------------------------------
def enlarge_infer(types, attrs):
    (w,) = types
    kh, kw = attrs["kernel"]
    if w.rank != 4 or w.shape[2] > kh or w.shape[3] > kw or (kh - w.shape[2]) % 2 or (kw - w.shape[3]) % 2:
        raise fail("enlarge", f"cannot centre kernel into {kh}x{kw}", types)
    return [TensorType(w.shape[:2] + (kh, kw), w.dtype)]


def _enlarge_ref(xs, attrs):
    w = xs[0]
    kh, kw = attrs["kernel"]
    ph, pw = (kh - w.shape[2]) // 2, (kw - w.shape[3]) // 2
    return [np.pad(w, ((0, 0), (0, 0), (ph, ph), (pw, pw)))]


register(OpDef("enlarge", 1, {"kernel": (3, 3)}, enlarge_infer, _enlarge_ref, _same(_enlarge_ref),
               Pattern.INJECTIVE, doc="Zero-pad an OIHW kernel to a larger odd size, centred."))


# strided slice ------------------------------------------------------------
def _slice_bounds(dim, begin, end, stride):
    return range(dim)[slice(begin, end, stride)]


def strided_slice_infer(types, attrs):
    (x,) = types
    axes, begin, end, strides = attrs["axes"], attrs["begin"], attrs["end"], attrs["strides"]
    if not (len(axes) == len(begin) == len(end)) or (strides and len(strides) != len(axes)):
        raise fail("strided_slice", "axes, begin, end and strides differ in length", types)
    shape = list(x.shape)
    for k, axis in enumerate(axes):
        axis = _axis("strided_slice", axis, x.rank, types)
        stride = strides[k] if strides else 1
        if stride == 0:
            raise fail("strided_slice", "stride 0", types)
        shape[axis] = len(_slice_bounds(x.shape[axis], begin[k], end[k], stride))
    return [TensorType(tuple(shape), x.dtype)]


def _strided_slice_ref(xs, attrs):
    index = [slice(None)] * xs[0].ndim
    for k, axis in enumerate(attrs["axes"]):
        stride = attrs["strides"][k] if attrs["strides"] else 1
        index[axis] = slice(attrs["begin"][k], attrs["end"][k], stride)
    return [np.asarray(xs[0][tuple(index)], order="C")]


def _canon_slice(types, attrs):
    """Clamp forward slices into [0, dim]; reverse slices keep their spelling."""
    x = types[0]
    axes = [int(a) % x.rank for a in attrs["axes"]]
    strides = list(attrs["strides"]) or [1] * len(axes)
    begin, end = list(attrs["begin"]), list(attrs["end"])
    for k, axis in enumerate(axes):
        if strides[k] > 0:
            r = _slice_bounds(x.shape[axis], begin[k], end[k], strides[k])
            begin[k], end[k] = r.start, max(r.stop, r.start)
    attrs.update(axes=tuple(axes), begin=tuple(begin), end=tuple(end), strides=tuple(strides))
    return attrs


register(OpDef("strided_slice", 1, {"axes": (), "begin": (), "end": (), "strides": ()},
               strided_slice_infer, _strided_slice_ref, _same(_strided_slice_ref), Pattern.INJECTIVE,
               canon=_canon_slice))


# squeeze / expand_dims ----------------------------------------------------
def squeeze_infer(types, attrs):
    (x,) = types
    axes = {_axis("squeeze", a, x.rank, types) for a in attrs["axes"]}
    if any(x.shape[a] != 1 for a in axes):
        raise fail("squeeze", f"axes {sorted(axes)} are not all of size 1", types)
    return [TensorType(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)]


def _squeeze_ref(xs, attrs):
    return [np.squeeze(xs[0], axis=tuple(attrs["axes"]))]


register(OpDef("squeeze", 1, {"axes": ()}, squeeze_infer, _squeeze_ref, _same(_squeeze_ref),
               Pattern.INJECTIVE, canon=_canon_axes, tags=frozenset({"layout"})))


def expand_dims_infer(types, attrs):
    (x,) = types
    rank = x.rank + len(attrs["axes"])
    axes = sorted(_axis("expand_dims", a, rank, types) for a in attrs["axes"])
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return [TensorType(tuple(shape), x.dtype)]


def _expand_dims_ref(xs, attrs):
    return [np.expand_dims(xs[0], axis=tuple(attrs["axes"]))]


register(OpDef("expand_dims", 1, {"axes": ()}, expand_dims_infer, _expand_dims_ref, _same(_expand_dims_ref),
               Pattern.INJECTIVE, tags=frozenset({"layout"}),
               canon=lambda types, attrs: _canon_axes(types, attrs, types[0].rank + len(attrs["axes"]))))


# broadcast_to -------------------------------------------------------------
def broadcast_to_infer(types, attrs):
    (x,) = types
    try:
        shape = np.broadcast_shapes(x.shape, tuple(attrs["shape"]))
    except ValueError:
        raise fail("broadcast_to", f"cannot broadcast to {list(attrs['shape'])}", types) from None
    if tuple(shape) != tuple(attrs["shape"]):
        raise fail("broadcast_to", f"cannot broadcast to {list(attrs['shape'])}", types)
    return [TensorType(tuple(shape), x.dtype)]


def _broadcast_to_ref(xs, attrs):
    return [np.asarray(np.broadcast_to(xs[0], attrs["shape"]), order="C")]


register(OpDef("broadcast_to", 1, {"shape": ()}, broadcast_to_infer, _broadcast_to_ref,
               _same(_broadcast_to_ref), Pattern.BROADCAST))


# pad (constant) ------------------------------------------------------------
def _padded(op, x, widths, types):
    """x's type grown by pad_width's (before, after) per axis."""
    if len(widths) != 2 * x.rank or any(w < 0 for w in widths):
        raise fail(op, f"pad_width needs 2 x rank = {2 * x.rank} non-negative entries", types)
    return TensorType(tuple(d + widths[2 * i] + widths[2 * i + 1] for i, d in enumerate(x.shape)), x.dtype)


def _pairs(widths, ndim):
    return [(widths[2 * i], widths[2 * i + 1]) for i in range(ndim)]


def pad_infer(types, attrs):
    return [_padded("pad", types[0], attrs["pad_width"], types)]


def _pad_ref(xs, attrs):
    pairs = _pairs(attrs["pad_width"], xs[0].ndim)
    return [np.pad(xs[0], pairs, constant_values=attrs["value"]).astype(xs[0].dtype)]


register(OpDef("pad", 1, {"pad_width": (), "value": 0.0}, pad_infer, _pad_ref, None, Pattern.INJECTIVE,
               doc="Constant pad; pad_width is (before, after) per axis, flattened."))


# mirror_pad: ONNX Pad's reflect and edge modes (PyTorch's ReflectionPad2d, ReplicationPad2d: CycleGAN's and
# style-transfer nets' convs read through them), which TVM's importer writes as call_tirs of topi's
# mirror_pad and replicate_pad; an operator of its own so that no constant-pad rule can ever match it
MIRROR_MODES = ("reflect", "edge")


def mirror_pad_infer(types, attrs):
    (x,) = types
    widths, mode = attrs["pad_width"], attrs["mode"]
    out = _padded("mirror_pad", x, widths, types)
    if mode not in MIRROR_MODES:
        raise fail("mirror_pad", f"mode {mode!r} is none of {MIRROR_MODES}", types)
    # reflect mirrors about the edge element: it reaches at most d - 1 elements in (ONNX's and PyTorch's bound)
    if any(d < 1 or (mode == "reflect" and max(pair) > d - 1) for pair, d in zip(_pairs(widths, x.rank), x.shape)):
        raise fail("mirror_pad", f"{mode} widths {tuple(widths)} reach past the input", types)
    return [out]


def _mirror_pad_ref(xs, attrs):
    return [np.pad(xs[0], _pairs(attrs["pad_width"], xs[0].ndim), mode=attrs["mode"])]


register(OpDef("mirror_pad", 1, {"pad_width": REQUIRED, "mode": REQUIRED}, mirror_pad_infer, _mirror_pad_ref,
               _same(_mirror_pad_ref), Pattern.INJECTIVE,
               doc="Reflect (about the edge element) or edge pad; pad_width is (before, after) per axis."))
