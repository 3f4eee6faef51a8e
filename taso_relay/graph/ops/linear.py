"""conv2d and matmul: the operators that carry the FLOPs (and fuse epilogues)."""
from __future__ import annotations

import numpy as np

from ..types import TensorType
from . import activation as act
from . import modular
from .registry import OpDef, Pattern, fail, register

# Layout permutations into the canonical NCHW data / OIHW kernel.
DATA_TO_NCHW = {"NCHW": (0, 1, 2, 3), "NHWC": (0, 3, 1, 2)}
KERNEL_TO_OIHW = {"OIHW": (0, 1, 2, 3), "HWIO": (3, 2, 0, 1), "OHWI": (0, 3, 1, 2)}


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def conv_out_size(size, kernel, stride, pad_lo, pad_hi, dilation):
    span = dilation * (kernel - 1) + 1
    return (size + pad_lo + pad_hi - span) // stride + 1


def conv2d_infer(types, attrs):
    x, w = types
    if x.rank != 4 or w.rank != 4:
        raise fail("conv2d", "data and weight must be 4-D", types)
    dl, kl = attrs["data_layout"], attrs["kernel_layout"]
    if dl not in DATA_TO_NCHW or kl not in KERNEL_TO_OIHW:
        raise fail("conv2d", f"unsupported layouts {dl}/{kl}", types)
    n, c, h, wd = (x.shape[i] for i in DATA_TO_NCHW[dl])
    o, i, kh, kw = (w.shape[j] for j in KERNEL_TO_OIHW[kl])
    g = attrs["groups"]
    act.check("conv2d", attrs["activation"])
    if g < 1 or c % g or o % g:
        raise fail("conv2d", f"groups={g} must divide in-channels {c} and out-channels {o}", types)
    if i * g != c:
        raise fail("conv2d", f"weight in-channels {i} x groups {g} != data channels {c}", types)
    if x.dtype != w.dtype:
        raise fail("conv2d", f"dtype mismatch {x.dtype} vs {w.dtype}", types)
    (sh, sw), (dh, dw) = attrs["strides"], attrs["dilation"]
    top, left, bottom, right = attrs["padding"]
    ho = conv_out_size(h, kh, sh, top, bottom, dh)
    wo = conv_out_size(wd, kw, sw, left, right, dw)
    if ho <= 0 or wo <= 0:
        raise fail("conv2d", f"kernel {kh}x{kw} larger than padded input", types)
    out_nchw = (n, o, ho, wo)
    shape = tuple(out_nchw[k] for k in _inverse(DATA_TO_NCHW[dl]))
    return [TensorType(shape, x.dtype)]


def _conv_nchw(x, w, attrs, p=None):
    """Grouped, strided, dilated conv: float as im2col + one matmul (BLAS), modular and
    depthwise as a sum over kernel taps (einsum per tap)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    g = attrs["groups"]
    (sh, sw), (dh, dw) = attrs["strides"], attrs["dilation"]
    top, left, bottom, right = attrs["padding"]
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    ho = conv_out_size(h, kh, sh, top, bottom, dh)
    wo = conv_out_size(wd, kw, sw, left, right, dw)
    xg = xp.reshape(n, g, cg, xp.shape[2], xp.shape[3])
    wg = w.reshape(g, o // g, cg, kh, kw)
    acc_dtype = np.int64 if p is not None else (np.float64 if x.dtype == np.float64 else np.float32)
    if p is None and o // g > 1:  # float: one BLAS matmul over the gathered taps (im2col)
        cols = np.empty((n, g, cg, kh, kw, ho, wo), dtype=acc_dtype)
        for i in range(kh):
            for j in range(kw):
                cols[:, :, :, i, j] = xg[:, :, :, i * dh: i * dh + sh * (ho - 1) + 1: sh,
                                         j * dw: j * dw + sw * (wo - 1) + 1: sw]
        cols = cols.reshape(n, g, cg * kh * kw, ho * wo)
        out = np.matmul(wg.reshape(1, g, o // g, cg * kh * kw).astype(acc_dtype, copy=False), cols)
        return out.reshape(n, o, ho, wo)
    out = np.zeros((n, g, o // g, ho, wo), dtype=acc_dtype)
    for i in range(kh):
        for j in range(kw):
            patch = xg[:, :, :, i * dh: i * dh + sh * (ho - 1) + 1: sh, j * dw: j * dw + sw * (wo - 1) + 1: sw]
            term = np.einsum("gok,ngkhw->ngohw", wg[:, :, :, i, j], patch)
            out = out + term if p is None else (out + term % p) % p
    return out.reshape(n, o, ho, wo)


def _conv_eval(xs, attrs, p=None):
    x, w = xs
    dperm, kperm = DATA_TO_NCHW[attrs["data_layout"]], KERNEL_TO_OIHW[attrs["kernel_layout"]]
    out = _conv_nchw(np.transpose(x, dperm), np.transpose(w, kperm), attrs, p)
    out = np.transpose(out, _inverse(dperm))
    if p is None:
        return [act.apply_float(out.astype(x.dtype), attrs["activation"])]
    return [act.apply_modular(out, attrs["activation"], p)]


register(OpDef(
    name="conv2d", arity=2,
    attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1,
           "activation": "none", "data_layout": "NCHW", "kernel_layout": "OIHW"},
    infer=conv2d_infer,
    ref=lambda xs, attrs: _conv_eval(xs, attrs),
    modular=lambda xs, attrs, p: _conv_eval(xs, attrs, p),
    pattern=Pattern.OUT_EWISE_FUSABLE, tags=frozenset({"linear"}),
    doc="2-D convolution; padding is (top, left, bottom, right); activation is fused.",
))


def matmul_infer(types, attrs):
    a, b = types
    if a.rank == 0 or b.rank == 0:
        raise fail("matmul", "operands must have rank >= 1", types)
    act.check("matmul", attrs["activation"])
    if a.dtype != b.dtype:
        raise fail("matmul", f"dtype mismatch {a.dtype} vs {b.dtype}", types)
    ashape = (1,) + a.shape if a.rank == 1 else a.shape
    bshape = b.shape + (1,) if b.rank == 1 else b.shape
    if ashape[-1] != bshape[-2]:
        raise fail("matmul", f"inner dimensions {ashape[-1]} and {bshape[-2]} differ", types)
    try:
        batch = np.broadcast_shapes(ashape[:-2], bshape[:-2])
    except ValueError:
        raise fail("matmul", "batch dimensions do not broadcast", types) from None
    shape = tuple(batch) + (ashape[-2], bshape[-1])
    if a.rank == 1:
        shape = shape[:-2] + shape[-1:]
    if b.rank == 1:
        shape = shape[:-1]
    return [TensorType(shape, a.dtype)]


def _matmul_modular(xs, attrs, p):
    a, b = xs
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    out = modular.matmul(a2, b2, p)
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return [act.apply_modular(out, attrs["activation"], p)]


register(OpDef(
    name="matmul", arity=2, attrs={"activation": "none"},
    infer=matmul_infer,
    ref=lambda xs, attrs: [act.apply_float(np.matmul(xs[0], xs[1]).astype(xs[0].dtype), attrs["activation"])],
    modular=_matmul_modular,
    pattern=Pattern.OUT_EWISE_FUSABLE, tags=frozenset({"linear"}),
    doc="Batched matmul with numpy broadcasting semantics; activation is fused.",
))
