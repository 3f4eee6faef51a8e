"""Shuffles: ShuffleNet's channel shuffle, the pixel shuffle (depth_to_space) and its inverse (space_to_depth),
NCHW canonical, NHWC by transposition.

Exports spell a channel shuffle reshape (N, g, C/g, H, W), transpose (0, 2, 1, 3, 4), reshape (N, C, H, W),
and a pixel shuffle (PyTorch's PixelShuffle, ONNX's DepthToSpace, the sub-pixel conv's interleave of
rules/handwritten_subpixel.json) reshape to rank 6, transpose, reshape: detours the layout rules cannot carry
a transpose through (the verifier has no theory of reshape). As one operator whose NHWC form is the NCHW one
between transposes, `l-channel_shuffle`, `l-depth_to_space` and `l-space_to_depth` (the pixel unshuffle, its
inverse) carry them; graph/spell_shuffles.py finds the spellings. Each one's reference is that very spelling
(`shuffle_spelling`, which the Relax and ONNX forms write too).
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


# depth_to_space: output channel c, row h * bh + i, column w * bw + j reads input channel
# (c, i, j) in CRD order (PyTorch's pixel shuffle) or (i, j, c) in DCR order (ONNX's default);
# space_to_depth is its inverse (PyTorch's pixel unshuffle: CRD; ONNX's SpaceToDepth: DCR)
DEPTH = {("NCHW", "CRD"): "n c bh bw h w", ("NCHW", "DCR"): "n bh bw c h w",
         ("NHWC", "CRD"): "n h w c bh bw", ("NHWC", "DCR"): "n h w bh bw c"}  # channels split
SPACE = {"NCHW": "n c h bh w bw", "NHWC": "n h bh w bw c"}  # rows and columns split
SHUFFLES = ("depth_to_space", "space_to_depth")


def pixel_spelling(op: str, shape, block, mode: str, layout: str) -> tuple[tuple[int, ...], ...]:
    """The rank-6 shape, the transpose and the output shape `op` of an input of `shape` is."""
    (bh, bw), axes = block, DATA_TO_NCHW[layout]
    n, c, h, w = (shape[i] for i in axes)
    if op == "depth_to_space":
        sizes = {"n": n, "c": c // (bh * bw), "h": h, "w": w}
        split, order, nchw = DEPTH[layout, mode].split(), SPACE[layout].split(), (n, c // (bh * bw), h * bh, w * bw)
    else:
        sizes = {"n": n, "c": c, "h": h // bh, "w": w // bw}
        split, order, nchw = SPACE[layout].split(), DEPTH[layout, mode].split(), (n, c * bh * bw, h // bh, w // bw)
    sizes.update(bh=bh, bw=bw)
    perm = tuple(split.index(name) for name in order)
    return tuple(sizes[name] for name in split), perm, tuple(nchw[axes.index(i)] for i in range(4))


def _pixel_infer(op: str):
    def infer(types, attrs):
        (x,) = types
        block, mode, layout = tuple(attrs["block"]), attrs["mode"], attrs["layout"]
        if x.rank != 4 or layout not in DATA_TO_NCHW or (layout, mode) not in DEPTH:
            raise fail(op, "expects a 4-D NCHW or NHWC tensor, mode CRD or DCR", types)
        n, c, h, w = (x.shape[i] for i in DATA_TO_NCHW[layout])
        if len(block) != 2 or min(block) < 1:
            raise fail(op, f"block {block} is not two positive sizes", types)
        if op == "depth_to_space" and c % (block[0] * block[1]):
            raise fail(op, f"{c} channels do not split into blocks of {block}", types)
        if op == "space_to_depth" and (h % block[0] or w % block[1]):
            raise fail(op, f"{h} x {w} does not split into blocks of {block}", types)
        return [TensorType(pixel_spelling(op, x.shape, block, mode, layout)[2], x.dtype)]
    return infer


def _pixel_eval(op: str):
    def run(xs, attrs):
        x = xs[0]
        split, perm, out = pixel_spelling(op, x.shape, tuple(attrs["block"]), attrs["mode"], attrs["layout"])
        return [np.ascontiguousarray(x.reshape(split).transpose(perm).reshape(out))]
    return run


def shuffle_spelling(op: str, shape, attrs) -> tuple[tuple[int, ...], ...]:
    """The rank-5 or -6 shape, the transpose and the output shape that shuffle `op` with `attrs` of an input of
    `shape` is: what its reference computes and its Relax and ONNX forms write."""
    if op == "channel_shuffle":
        return (*spelling(shape, attrs["groups"], attrs["layout"]), tuple(shape))
    return pixel_spelling(op, shape, tuple(attrs["block"]), attrs["mode"], attrs["layout"])


for _op in SHUFFLES:
    _run = _pixel_eval(_op)
    register(OpDef(_op, 1, {"block": REQUIRED, "mode": REQUIRED, "layout": "NCHW"}, _pixel_infer(_op), _run,
                   lambda xs, attrs, p, run=_run: run(xs, attrs), Pattern.INJECTIVE))
