"""subpixel_kernel: a transposed conv's kernel rearranged for the conv that computes it as sub-pixels.

TVM computes conv2d_transpose as a conv over its input spread out by the stride (zeros between the values),
stride^2 times the multiply-adds that count. The same output is a stride-1 conv over the input itself with
stride^2 times the output channels, one per output phase (row % stride, column % stride), whose channels a
pixel shuffle (reshape, transpose, reshape) interleaves. Along one axis, with kernel size k, stride s and the
transposed conv's padding p before the data: output s * q + r reads input q + (r + p - kk) / s through tap kk,
for every kk = r + p (mod s). The conv pads `subpixel_pad_before` before the data, and its window position t
holds tap kk = r + p - s * (t - pad_before) where 0 <= kk < k, zero elsewhere. Weights only (FoldConstant
computes it); the rule using it is rules/handwritten_subpixel.json, its axiom subpixel/conv_transpose_subpixel.
"""
from __future__ import annotations

import numpy as np

from ..types import TensorType
from .registry import REQUIRED, OpDef, Pattern, fail, register


def subpixel_pad_before(k: int, s: int, p: int) -> int:
    """The conv's padding before the data: the furthest tap back, over all phases."""
    return (k - 1 - p) // s


def subpixel_size(k: int, s: int, p: int) -> int:
    """The conv's window: from the furthest tap back to the furthest forward, (p + s - 1) // s. (Written again
    for Z3 in verifier/typing.py and as rule text in verifier/axioms/subpixel.py.)"""
    return subpixel_pad_before(k, s, p) + (p + s - 1) // s + 1


def subpixel_taps(k: int, s: int, p: int) -> np.ndarray:
    """(s, window) tap indices per phase and window position; k (one past the kernel) where none."""
    before, size = subpixel_pad_before(k, s, p), subpixel_size(k, s, p)
    r, t = np.meshgrid(np.arange(s), np.arange(size), indexing="ij")
    kk = r + p - s * (t - before)
    return np.where((kk >= 0) & (kk < k), kk, k)


def subpixel_kernel_infer(types, attrs):
    (w,) = types
    (sh, sw), (ph, pw) = attrs["strides"], attrs["padding"]
    if w.rank != 4:
        raise fail("subpixel_kernel", "the kernel must be 4-D (C_in, C_out, kh, kw)", types)
    c, o, kh, kw = w.shape
    if min(sh, sw) < 1 or not (0 <= ph <= kh - 1 and 0 <= pw <= kw - 1):
        raise fail("subpixel_kernel", f"strides {sh, sw} and padding {ph, pw} do not fit a {kh}x{kw} kernel", types)
    return [TensorType((o * sh * sw, c, subpixel_size(kh, sh, ph), subpixel_size(kw, sw, pw)), w.dtype)]


def _subpixel_kernel_ref(xs, attrs):
    (w,) = xs
    (sh, sw), (ph, pw) = attrs["strides"], attrs["padding"]
    c, o, kh, kw = w.shape
    padded = np.pad(w, ((0, 0), (0, 0), (0, 1), (0, 1)))  # index kh (kw): a zero tap
    th, tw = subpixel_taps(kh, sh, ph), subpixel_taps(kw, sw, pw)
    g = padded[:, :, th.reshape(-1)][:, :, :, tw.reshape(-1)]  # (c, o, sh * Kh, sw * Kw)
    g = g.reshape(c, o, sh, th.shape[1], sw, tw.shape[1]).transpose(1, 2, 4, 0, 3, 5)
    return [np.ascontiguousarray(g.reshape(o * sh * sw, c, th.shape[1], tw.shape[1]))]


register(OpDef("subpixel_kernel", 1, {"strides": REQUIRED, "padding": REQUIRED}, subpixel_kernel_infer,
               _subpixel_kernel_ref, lambda xs, attrs, p: _subpixel_kernel_ref(xs, attrs), Pattern.INJECTIVE,
               doc="An IOHW transposed-conv kernel as the OIHW kernel of its sub-pixel conv; padding is the "
                   "transposed conv's (top, left)."))
