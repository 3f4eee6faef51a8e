"""2-D resize (upsampling in U-Nets, YOLO necks and segmentation heads), NCHW canonical, NHWC by transposition.

A graph operator, not an opaque call, so the layout step can carry a transpose through it
(`l-resize2d`): the search never rewrites it otherwise. Only what TVM's ONNX importer writes
for ONNX Resize without a region of interest: nearest and linear, each coordinate mode but the
region's, computed in float32 as TVM's topi does (`topi.image.resize2d`); the bridge leaves
other resizes opaque.
"""
from __future__ import annotations

import numpy as np

from ..types import TensorType
from .linear import DATA_TO_NCHW, _inverse
from .registry import REQUIRED, OpDef, Pattern, fail, register

METHODS = ("nearest_neighbor", "linear")
COORDINATES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn")
ROUNDINGS = ("", "round", "round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
RESIZE_ATTRS = {"size": REQUIRED, "layout": "NCHW", "method": "linear", "coordinates": "half_pixel",
                "rounding": ""}


def _infer(types, attrs):
    (x,) = types
    if x.rank != 4 or attrs["layout"] not in DATA_TO_NCHW:
        raise fail("resize2d", "expects a 4-D NCHW or NHWC tensor", types)
    if attrs["method"] not in METHODS or attrs["coordinates"] not in COORDINATES \
            or attrs["rounding"] not in ROUNDINGS:
        raise fail("resize2d", f"no reference for {attrs['method']}/{attrs['coordinates']}/{attrs['rounding']}",
                   types)
    size = tuple(attrs["size"])
    if len(size) != 2 or min(size) < 1:
        raise fail("resize2d", f"size {size} is not two positive sizes", types)
    if attrs["coordinates"] == "align_corners" and min(size) == 1:
        raise fail("resize2d", "align_corners onto a size of 1 (TVM divides by zero)", types)
    n, c, _, _ = (x.shape[i] for i in DATA_TO_NCHW[attrs["layout"]])
    nchw = (n, c) + size
    return [TensorType(tuple(nchw[k] for k in _inverse(DATA_TO_NCHW[attrs["layout"]])), x.dtype)]


def _source(out_size: int, in_size: int, mode: str) -> np.ndarray:
    """Where each output index reads the input, as topi computes it (float32)."""
    f32 = np.float32
    x = np.arange(out_size, dtype=f32)
    scale = f32(in_size) / f32(out_size)
    if mode == "half_pixel":
        return (x + f32(0.5)) * scale - f32(0.5)
    if mode == "align_corners":  # (onto a size of 1 refused by _infer: TVM divides by zero)
        return x * (f32(in_size - 1) / f32(out_size - 1))
    if mode == "asymmetric":
        return scale * x
    if mode == "pytorch_half_pixel":
        return (x + f32(0.5)) * scale - f32(0.5) if out_size > 1 else np.zeros_like(x)
    return (x + f32(0.5)) * scale  # tf_half_pixel_for_nn


def nearest_rounding(coordinates: str, rounding: str) -> str:
    """The rounding a nearest resize uses: `rounding`, or topi's default for the coordinate mode where it is ""."""
    return rounding or ("round" if coordinates == "align_corners" else "floor")


def _nearest(src: np.ndarray, rounding: str, mode: str, in_size: int, out_size: int) -> np.ndarray:
    rounding = nearest_rounding(mode, rounding)
    ratio = out_size // in_size
    if mode == "asymmetric" and rounding == "floor" and out_size % in_size == 0 and ratio <= 1e5 / (in_size + 1):
        index = np.arange(out_size) // ratio  # topi divides in integers here
    elif rounding == "round":
        index = np.round(src)  # half to even, as TVM's round compiles (measured: 0.5 -> 0, 1.5 -> 2)
    elif rounding == "round_prefer_floor":
        index = np.ceil(src - np.float32(0.5))
    elif rounding == "round_prefer_ceil":
        index = np.floor(src + np.float32(0.5))
    elif rounding == "floor":
        index = np.floor(src + np.float32(1e-5))
    else:
        index = np.ceil(src - np.float32(1e-5))
    return np.clip(index.astype(np.int64), 0, in_size - 1)


def _eval(xs, attrs):
    """In float32 whatever the input's type, then back to it, as topi reads and computes every pixel."""
    x = np.transpose(xs[0], DATA_TO_NCHW[attrs["layout"]]).astype(np.float32)
    (_, _, h, w), (ho, wo) = x.shape, tuple(attrs["size"])
    mode = attrs["coordinates"]
    sy, sx = _source(ho, h, mode), _source(wo, w, mode)
    if attrs["method"] == "nearest_neighbor":
        rows = _nearest(sy, attrs["rounding"], mode, h, ho)
        out = x[:, :, rows][:, :, :, _nearest(sx, attrs["rounding"], mode, w, wo)]
    else:
        y0, x0 = np.floor(sy), np.floor(sx)
        fy, fx = (sy - y0).astype(np.float32), (sx - x0).astype(np.float32)
        ys = [np.clip(y0.astype(np.int64) + k, 0, h - 1) for k in (0, 1)]
        xs_ = [np.clip(x0.astype(np.int64) + k, 0, w - 1) for k in (0, 1)]
        rows = [x[:, :, yk] for yk in ys]

        def lerp(a, b, t):
            return a * (np.float32(1) - t) + b * t
        top = lerp(rows[0][:, :, :, xs_[0]], rows[0][:, :, :, xs_[1]], fx)
        bottom = lerp(rows[1][:, :, :, xs_[0]], rows[1][:, :, :, xs_[1]], fx)
        out = lerp(top, bottom, fy[:, None])
    out = np.asarray(out, dtype=xs[0].dtype)
    return [np.ascontiguousarray(np.transpose(out, _inverse(DATA_TO_NCHW[attrs["layout"]])))]


register(OpDef("resize2d", 1, RESIZE_ATTRS, _infer, _eval, None, Pattern.INJECTIVE,
               doc="No modular reference: interpolation is not a polynomial the generator could fingerprint."))
