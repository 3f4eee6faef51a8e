"""Inference batch norm: a per-channel affine map, and how its scale moves into a conv's weights.

The scale and shift of ``batch_norm(y, g, b, m, v)`` are written with batch
norm itself, on constants, so that no square root or epsilon constant is
needed: with ``z = m - m`` (zero) the scale ``g / sqrt(v + eps)`` is
``batch_norm(ones, g, z, z, v)`` and the shift ``b - m * scale`` is
``batch_norm(ones - ones, g, b, m, v)``. Both are weight-only where the
parameters are weights, so FoldConstant computes them; the fold rules in
rules/handwritten_norm.json use exactly these forms.
"""
from __future__ import annotations

from .base import N, axiom
from .common import CONV, CONV_DOMAINS, CONV_T1, CONV_T1_DOMAINS, W4, X4
from .constants import IDENTITY_CONV_ATTRS, IDENTITY_CONV_DOMAINS, IDENTITY_CONV_GUARD, identity_kernel

EPS = {"e": (1e-5, 1e-3, 0.5)}
BN_PARAMS = ("gamma", "beta", "mean", "var")


def bn(x, gamma="gamma", beta="beta", mean="mean", var="var", axis=1):
    return N("batch_norm", x, gamma, beta, mean, var, axis=axis, epsilon="?e")


def _ones(shape: str | tuple):
    return N("constant", kind="ones", shape=shape)


def scale(channels: str, axis=1, beta=None, mean=None):
    """Batch norm of ones: ``gamma / sqrt(var + eps)`` per channel when beta and mean are
    left zero; shaped (1, C, 1, 1) for axis 1, (C, 1, 1, 1) for axis 0 (`channels` is C)."""
    shape = f"=(1, {channels}, 1, 1)" if axis == 1 else f"=({channels}, 1, 1, 1)"
    if beta is None:
        beta = mean = N("sub", "mean", "mean")
    return bn(_ones(shape), "gamma", beta, mean, "var", axis=axis)


def shift(channels: str):
    """``beta - mean * gamma / sqrt(var + eps)`` per channel, shaped (1, C, 1, 1)."""
    ones = _ones(f"=(1, {channels}, 1, 1)")
    return bn(N("sub", ones, ones))


def row_scale(channels: str, beta=None, mean=None):
    """``gamma / sqrt(var + eps)`` per channel as a row, (1, C): what scales a matmul's weight columns."""
    if beta is None:
        beta = mean = N("sub", "mean", "mean")
    return bn(_ones(f"=(1, {channels})"), "gamma", beta, mean, "var")


def row_shift(channels: str):
    """``beta - mean * gamma / sqrt(var + eps)`` per channel as a row, (1, C)."""
    ones = _ones(f"=(1, {channels})")
    return bn(N("sub", ones, ones))


CONV_T = {**CONV_T1, "groups": "?g"}
# a (C_in, C_out / groups, kh, kw) transposed-conv kernel split by group, and a (1, C_out, 1, 1) factor so split
GROUPED_KERNEL = "=(?g, dim(w, 0) // ?g, dim(w, 1), dim(w, 2), dim(w, 3))"
GROUPED_FACTOR = "=(?g, 1, dim(w, 1), 1, 1)"
KERNEL_SHAPE = "=(dim(w, 0), dim(w, 1), dim(w, 2), dim(w, 3))"
_ROWS = {2: ("n", "c"), 3: ("b", "n", "c")}  # a matmul's output, its channels (features) last

AXIOMS = [
    # batch norm over the last axis of a matmul's output (BatchNorm1d after a Linear, LeViT's "LinearNorm")
    *(axiom(f"bn_affine_last{_r}", "norm",
            bn("y", axis=_r - 1),
            N("add", N("mul", "y", row_scale(f"dim(y, {_r - 1})")), row_shift(f"dim(y, {_r - 1})")),
            guard=[f"rank(y) == {_r}"], shapes={"y": _s, **{p: ("c",) for p in BN_PARAMS}}, domains=EPS,
            doc="Batch norm over the last axis is y * scale + shift, each a (1, C) row.")
      for _r, _s in _ROWS.items()),
    *(axiom(f"bn_affine_last_bias{_r}", "norm",
            bn(N("add", "y", "c0"), axis=_r - 1),
            N("add", N("mul", "y", row_scale(f"dim(y, {_r - 1})")), bn("c0", axis=0)),
            guard=[f"rank(y) == {_r}", f"shape(c0) == (dim(y, {_r - 1}),)"],
            shapes={"y": _s, "c0": ("c",), **{p: ("c",) for p in BN_PARAMS}}, domains=EPS,
            doc="A bias (C,) before a batch norm over the last axis goes through it: bn(y + c) = y * scale + bn(c).")
      for _r, _s in _ROWS.items()),
    axiom("bn_reshape_rows", "norm",
          bn(N("reshape", "y", shape=("?m", "?k")), axis=1),
          N("reshape", bn("y", axis=2), shape=("?m", "?k")),
          guard=["rank(y) == 3", "?k == dim(y, 2)"],
          shapes={"y": ("b", "n", "c"), **{p: ("c",) for p in BN_PARAMS}},
          domains={**EPS, "m": ("=?b * ?n",), "k": ("=?c",)},
          doc="Rows of a (B, N, C) tensor flattened to (B * N, C) keep their channels last: a batch norm over them "
              "is the batch norm over the last axis before the reshape (timm's and transformers' LeViT)."),
    axiom("bn_affine", "norm",
          bn("y"),
          N("add", N("mul", "y", scale("dim(y, 1)")), shift("dim(y, 1)")),
          guard=["rank(y) == 4"], shapes={"y": ("n", "c", "h", "w"), **{p: ("c",) for p in BN_PARAMS}},
          domains=EPS, doc="Batch norm over the channels of an NCHW tensor is y * scale + shift."),
    axiom("bn_affine_bias", "norm",
          bn(N("add", "y", "c0")),
          N("add", N("mul", "y", scale("dim(c0, 1)")), bn("c0")),
          guard=["rank(y) == 4", "shape(c0) == (1, dim(y, 1), 1, 1)"],
          shapes={"y": ("n", "c", "h", "w"), "c0": (1, "c", 1, 1), **{p: ("c",) for p in BN_PARAMS}},
          domains=EPS, doc="A per-channel bias before batch norm goes through it: bn(y + c) = y * scale + bn(c)."),
    axiom("conv_scale_weights", "norm",
          N("mul", N("conv2d", "x", "w", **CONV), scale("dim(w, 0)", beta="beta", mean="mean")),
          N("conv2d", "x", N("mul", "w", scale("dim(w, 0)", axis=0, beta="beta", mean="mean")), **CONV),
          shapes={"x": X4, "w": W4, **{p: ("o",) for p in BN_PARAMS}},
          domains={**CONV_DOMAINS, **EPS},
          doc="A per-output-channel factor (here a batch norm of ones) after a conv scales its "
              "kernels instead: output channel o reads kernel o only, for any groups."),
    # a per-channel factor given as a tensor (timm's layer scale: (1, C, 1, 1) or (C, 1, 1)); the kernel is
    # scaled with its out-channels moved to axis 1, where the factor's channels broadcast as they do on the output
    *(axiom(f"conv_channel_factor{len(_f)}", "norm",
            N("mul", N("conv2d", "x", "w", **CONV), "f"),
            N("conv2d", "x", N("transpose", N("mul", N("transpose", "w", perm=(1, 0, 2, 3)), "f"),
                               perm=(1, 0, 2, 3)), **CONV),
            guard=[f"shape(f) == {_g}"], shapes={"x": X4, "w": W4, "f": _f}, domains=CONV_DOMAINS,
            doc="A per-output-channel factor after a conv scales its kernels instead (any groups: output "
                "channel o reads kernel o only).")
      for _f, _g in (((1, "o", 1, 1), "(1, dim(w, 0), 1, 1)"), (("o", 1, 1), "(dim(w, 0), 1, 1)"))),
    axiom("conv_transpose_channel_factor", "norm",
          N("mul", N("conv2d_transpose", "x", "w", **CONV_T1), "f"),
          N("conv2d_transpose", "x", N("mul", "w", "f"), **CONV_T1),
          guard=["shape(f) == (1, dim(w, 1), 1, 1)"], shapes={"x": X4, "w": ("c", "o", "kh", "kw"), "f": (1, "o", 1, 1)},
          domains=CONV_T1_DOMAINS,
          doc="A per-output-channel factor after a one-group transposed conv scales its kernels instead: output "
              "channel o reads channel o of every (C_in, C_out, kh, kw) kernel only, the axis the factor's "
              "channels broadcast on."),
    axiom("conv_transpose_group_factor", "norm",
          N("mul", N("conv2d_transpose", "x", "w", **CONV_T), "f"),
          N("conv2d_transpose", "x", N("reshape", N("mul", N("reshape", "w", shape=GROUPED_KERNEL),
                                                      N("reshape", "f", shape=GROUPED_FACTOR)),
                                       shape=KERNEL_SHAPE), **CONV_T),
          guard=["shape(f) == (1, dim(w, 1) * ?g, 1, 1)"],
          shapes={"x": X4, "w": ("c", "o", "kh", "kw"), "f": (1, "=?o * ?g", 1, 1)},
          domains={**CONV_T1_DOMAINS, "g": (2, 1)},
          doc="The same with groups: kernel i (C_in / groups of them per group) serves output channels "
              "(i // (C_in / groups)) * (C_out / groups) + j, so the factor, reshaped to (groups, 1, C_out / "
              "groups, 1, 1), scales the kernels reshaped to (groups, C_in / groups, C_out / groups, kh, kw)."),
    axiom("conv_scaled_identity_kernel", "norm",
          N("conv2d", "x", N("mul", identity_kernel(), bn(_ones(("?o", "?i", "?kh", "?kw")), axis=0)),
            **IDENTITY_CONV_ATTRS),
          N("mul", "x", scale("dim(x, 1)", beta="beta", mean="mean")),
          guard=IDENTITY_CONV_GUARD, shapes={"x": ("n", "c", "h", "w"), **{p: ("c",) for p in BN_PARAMS}},
          dims={"c": (1, 2, 4)}, domains={**IDENTITY_CONV_DOMAINS, **EPS},
          doc="An identity kernel scaled per output channel (by a batch norm of ones of its shape over axis 0) "
              "scales the input's channels: how a batch norm of a block's input joins the conv beside it."),
    axiom("bn_nhwc", "norm",
          bn(N("transpose", "y", perm=(0, 3, 1, 2))),
          N("transpose", bn("y", axis=3), perm=(0, 3, 1, 2)),
          shapes={"y": ("n", "h", "w", "c"), **{p: ("c",) for p in BN_PARAMS}}, domains=EPS,
          doc="Batch norm over the channels of an NHWC tensor read as NCHW is the NHWC tensor's "
              "batch norm over its last axis, read as NCHW (the layout rules carry a transpose through)."),
]
