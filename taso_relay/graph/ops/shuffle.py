"""ShuffleNet's channel shuffle, NCHW canonical, NHWC by transposition.

Exports spell it reshape (N, g, C/g, H, W), transpose (0, 2, 1, 3, 4), reshape (N, C, H, W), a 5-D
detour the layout rules cannot carry a transpose through (the verifier has no theory of reshape).
As one operator whose NHWC form is the NCHW one between transposes, `l-channel_shuffle` carries it;
graph/channel_shuffle.py finds the spelling. Its reference is that very spelling.
"""
from __future__ import annotations

import numpy as np

from ..types import TensorType
from .linear import DATA_TO_NCHW
from .registry import REQUIRED, OpDef, Pattern, fail, register


def _infer(types, attrs):
    (x,) = types
    g = attrs["groups"]
    if x.rank != 4 or attrs["layout"] not in DATA_TO_NCHW:
        raise fail("channel_shuffle", "expects a 4-D NCHW or NHWC tensor", types)
    c = x.shape[DATA_TO_NCHW[attrs["layout"]][1]]
    if g < 1 or c % g:
        raise fail("channel_shuffle", f"{c} channels do not split into {g} groups", types)
    return [TensorType(x.shape, x.dtype)]


NCHW_PERM = (0, 2, 1, 3, 4)  # (N, g, C/g, H, W) -> (N, C/g, g, H, W)


def spelling(shape, groups: int, layout: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The 5-D shape and the transpose the shuffle is, in `layout`, for an input of `shape`."""
    if layout == "NCHW":
        n, c, h, w = shape
        return (n, groups, c // groups, h, w), NCHW_PERM
    n, h, w, c = shape
    return (n, h, w, groups, c // groups), (0, 1, 2, 4, 3)


def _eval(xs, attrs):
    x = xs[0]
    split, perm = spelling(x.shape, attrs["groups"], attrs["layout"])
    return [np.ascontiguousarray(x.reshape(split).transpose(perm).reshape(x.shape))]


register(OpDef("channel_shuffle", 1, {"groups": REQUIRED, "layout": "NCHW"}, _infer, _eval,
               lambda xs, attrs, p: _eval(xs, attrs), Pattern.INJECTIVE))
