"""ShuffleNet's channel shuffle, NCHW canonical, NHWC by transposition.

Exports spell it reshape (N, g, C/g, H, W), transpose (0, 2, 1, 3, 4), reshape (N, C, H, W), a 5-D
detour the layout rules cannot carry a transpose through (the verifier has no theory of reshape).
As one operator whose NHWC form is the NCHW one between transposes, `l-channel_shuffle` carries it;
graph/channel_shuffle.py finds the spelling. Its reference is that very spelling.
"""
from __future__ import annotations

import numpy as np

from ..types import TensorType
from .linear import DATA_TO_NCHW, _inverse
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


def shuffle_nchw(x: np.ndarray, groups: int) -> np.ndarray:
    n, c, h, w = x.shape
    return x.reshape(n, groups, c // groups, h, w).transpose(0, 2, 1, 3, 4).reshape(n, c, h, w)


def _eval(xs, attrs):
    to_nchw = DATA_TO_NCHW[attrs["layout"]]
    out = shuffle_nchw(np.transpose(xs[0], to_nchw), attrs["groups"])
    return [np.ascontiguousarray(np.transpose(out, _inverse(to_nchw)))]


register(OpDef("channel_shuffle", 1, {"groups": REQUIRED, "layout": "NCHW"}, _infer, _eval,
               lambda xs, attrs, p: _eval(xs, attrs), Pattern.INJECTIVE))
