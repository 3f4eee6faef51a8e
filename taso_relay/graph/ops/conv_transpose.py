"""conv2d_transpose: the upsampling conv of decoders, GANs and pose heads (ConvTranspose2d).

Its own operator rather than opaque so that a batch norm after it folds into its kernels (a proved rule,
rules/handwritten_norm.json h-bn-convT). NCHW data and IOHW kernels only, TVM's and ONNX's one layout:
kernel (C_in, C_out / groups, kh, kw). The reference is the conv it is the adjoint of: the input spread out
by the stride, padded by dilation * (k - 1) - padding (cropped where negative), and a stride-1 conv with the
kernels flipped and their in- and out-channels swapped per group.
"""
from __future__ import annotations

import numpy as np

from ..types import TensorType
from .linear import _conv_nchw
from .registry import OpDef, Pattern, fail, register


def transposed_out_size(size, kernel, stride, pad_lo, pad_hi, output_padding, dilation):
    return (size - 1) * stride - pad_lo - pad_hi + dilation * (kernel - 1) + output_padding + 1


def conv2d_transpose_infer(types, attrs):
    x, w = types
    if x.rank != 4 or w.rank != 4:
        raise fail("conv2d_transpose", "data and weight must be 4-D", types)
    if (attrs["data_layout"], attrs["kernel_layout"]) != ("NCHW", "IOHW"):
        raise fail("conv2d_transpose", f"unsupported layouts {attrs['data_layout']}/{attrs['kernel_layout']}", types)
    n, c, h, wd = x.shape
    i, og, kh, kw = w.shape
    g = attrs["groups"]
    if g < 1 or c % g:
        raise fail("conv2d_transpose", f"groups={g} must divide in-channels {c}", types)
    if i != c:
        raise fail("conv2d_transpose", f"weight in-channels {i} != data channels {c}", types)
    if x.dtype != w.dtype:
        raise fail("conv2d_transpose", f"dtype mismatch {x.dtype} vs {w.dtype}", types)
    (sh, sw), (dh, dw), (oph, opw) = attrs["strides"], attrs["dilation"], attrs["output_padding"]
    if min(sh, sw, dh, dw) < 1 or not (0 <= oph < max(sh, dh) and 0 <= opw < max(sw, dw)):
        raise fail("conv2d_transpose", "output_padding must be below the stride or the dilation", types)
    top, left, bottom, right = attrs["padding"]
    ho = transposed_out_size(h, kh, sh, top, bottom, oph, dh)
    wo = transposed_out_size(wd, kw, sw, left, right, opw, dw)
    if ho <= 0 or wo <= 0:
        raise fail("conv2d_transpose", "padding larger than the output", types)
    return [TensorType((n, og * g, ho, wo), x.dtype)]


def _as_conv_kernel(w, groups):
    """(C, O/g, kh, kw) transposed-conv kernel -> (O, C/g, kh, kw) conv kernel, flipped in space."""
    c, og, kh, kw = w.shape
    wg = w.reshape(groups, c // groups, og, kh, kw).transpose(0, 2, 1, 3, 4)
    return wg.reshape(groups * og, c // groups, kh, kw)[:, :, ::-1, ::-1]


def _eval(xs, attrs, p=None):
    x, w = xs
    n, c, h, wd = x.shape
    (sh, sw), (dh, dw), (oph, opw) = attrs["strides"], attrs["dilation"], attrs["output_padding"]
    _, _, kh, kw = w.shape
    spread = np.zeros((n, c, (h - 1) * sh + 1, (wd - 1) * sw + 1), dtype=x.dtype)
    spread[:, :, ::sh, ::sw] = x
    top, left, bottom, right = attrs["padding"]
    lo_h, hi_h = dh * (kh - 1) - top, dh * (kh - 1) - bottom + oph
    lo_w, hi_w = dw * (kw - 1) - left, dw * (kw - 1) - right + opw
    padded = np.pad(spread, ((0, 0), (0, 0), (max(lo_h, 0), max(hi_h, 0)), (max(lo_w, 0), max(hi_w, 0))))
    padded = padded[:, :, max(-lo_h, 0): padded.shape[2] - max(-hi_h, 0),
                    max(-lo_w, 0): padded.shape[3] - max(-hi_w, 0)]
    conv = {"groups": attrs["groups"], "strides": (1, 1), "dilation": (dh, dw), "padding": (0, 0, 0, 0)}
    out = _conv_nchw(padded, np.ascontiguousarray(_as_conv_kernel(w, attrs["groups"])), conv, p)
    return [out.astype(x.dtype) if p is None else out]


register(OpDef(
    name="conv2d_transpose", arity=2,
    attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "output_padding": (0, 0), "dilation": (1, 1), "groups": 1,
           "data_layout": "NCHW", "kernel_layout": "IOHW"},
    infer=conv2d_transpose_infer,
    ref=lambda xs, attrs: _eval(xs, attrs),
    modular=lambda xs, attrs, p: _eval(xs, attrs, p),
    pattern=Pattern.OUT_EWISE_FUSABLE, tags=frozenset({"linear"}),
    doc="2-D transposed convolution (NCHW, IOHW kernel); padding is (top, left, bottom, right) of the output.",
))
