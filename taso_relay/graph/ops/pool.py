"""2-D max and average pooling (NCHW canonical, NHWC by transposition)."""
from __future__ import annotations

import math

import numpy as np

from ..types import TensorType
from . import modular
from .linear import DATA_TO_NCHW, _inverse
from .registry import OpDef, Pattern, fail, register

POOL_ATTRS = {"kernel": (1, 1), "strides": (1, 1), "padding": (0, 0, 0, 0),
              "dilation": (1, 1), "ceil_mode": False, "layout": "NCHW"}


def _out(size, k, s, lo, hi, d, ceil_mode):
    span = d * (k - 1) + 1
    num = size + lo + hi - span
    n = (math.ceil(num / s) if ceil_mode else num // s) + 1
    if ceil_mode and (n - 1) * s >= size + lo:  # last window must start inside input or left pad
        n -= 1
    return n


def pool_infer(op):
    def infer(types, attrs):
        (x,) = types
        if x.rank != 4 or attrs["layout"] not in DATA_TO_NCHW:
            raise fail(op, "expects a 4-D NCHW or NHWC tensor", types)
        n, c, h, w = (x.shape[i] for i in DATA_TO_NCHW[attrs["layout"]])
        (kh, kw), (sh, sw), (dh, dw) = attrs["kernel"], attrs["strides"], attrs["dilation"]
        top, left, bottom, right = attrs["padding"]
        ho = _out(h, kh, sh, top, bottom, dh, attrs["ceil_mode"])
        wo = _out(w, kw, sw, left, right, dw, attrs["ceil_mode"])
        if ho <= 0 or wo <= 0:
            raise fail(op, f"window {kh}x{kw} larger than padded input", types)
        nchw = (n, c, ho, wo)
        return [TensorType(tuple(nchw[k] for k in _inverse(DATA_TO_NCHW[attrs["layout"]])), x.dtype)]
    return infer


def _windows(x, attrs, ho, wo, fill):
    """All pooling windows as an array (N, C, Ho, Wo, kh*kw), padded with `fill`."""
    (kh, kw), (sh, sw), (dh, dw) = attrs["kernel"], attrs["strides"], attrs["dilation"]
    top, left, bottom, right = attrs["padding"]
    need_h = (ho - 1) * sh + dh * (kh - 1) + 1
    need_w = (wo - 1) * sw + dw * (kw - 1) + 1
    extra_h = max(0, need_h - (x.shape[2] + top + bottom))
    extra_w = max(0, need_w - (x.shape[3] + left + right))
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom + extra_h), (left, right + extra_w)), constant_values=fill)
    taps = []
    for i in range(kh):
        for j in range(kw):
            taps.append(xp[:, :, i * dh: i * dh + sh * (ho - 1) + 1: sh, j * dw: j * dw + sw * (wo - 1) + 1: sw])
    return np.stack(taps, axis=-1), (extra_h, extra_w)


def _pool_eval(kind, xs, attrs, p=None):
    x = np.transpose(xs[0], DATA_TO_NCHW[attrs["layout"]])
    out_t = pool_infer(kind)([TensorType(x.shape, "float32")], {**attrs, "layout": "NCHW"})[0]
    ho, wo = out_t.shape[2], out_t.shape[3]
    if kind == "max_pool2d":
        if p is not None:
            win, _ = _windows(x, attrs, ho, wo, 0)
            out = modular.max_reduce(win, p, axis=-1)
        else:
            fill = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
            win, _ = _windows(x, attrs, ho, wo, fill)
            out = win.max(axis=-1).astype(x.dtype)
    else:
        win, _ = _windows(x, attrs, ho, wo, 0)
        ones, _ = _windows(np.ones_like(x, dtype=np.int64), {**attrs}, ho, wo, 0)
        if attrs["count_include_pad"]:
            # Padding counts, but positions past the padded input (ceil mode) do not.
            padded = np.pad(np.ones(x.shape, np.int64), ((0, 0), (0, 0)) + tuple(
                (attrs["padding"][a], attrs["padding"][a + 2]) for a in (0, 1)), constant_values=1)
            crop = {**attrs, "padding": (0, 0, 0, 0)}
            ones, _ = _windows(padded, crop, ho, wo, 0)
        count = ones.sum(axis=-1)
        if p is not None:
            inv = np.vectorize(lambda c: modular.inverse(c, p), otypes=[np.int64])(count)
            out = (win.sum(axis=-1) % p) * inv % p
        else:
            out = (win.sum(axis=-1) / np.maximum(count, 1)).astype(x.dtype)
    return [np.asarray(np.transpose(out, _inverse(DATA_TO_NCHW[attrs["layout"]])), order="C")]


register(OpDef("max_pool2d", 1, POOL_ATTRS, pool_infer("max_pool2d"),
               lambda xs, a: _pool_eval("max_pool2d", xs, a),
               lambda xs, a, p: _pool_eval("max_pool2d", xs, a, p), Pattern.OUT_EWISE_FUSABLE,
               doc="Modular mode uses a sum-of-cubes surrogate for max."))
register(OpDef("avg_pool2d", 1, {**POOL_ATTRS, "count_include_pad": False}, pool_infer("avg_pool2d"),
               lambda xs, a: _pool_eval("avg_pool2d", xs, a),
               lambda xs, a, p: _pool_eval("avg_pool2d", xs, a, p), Pattern.OUT_EWISE_FUSABLE))
