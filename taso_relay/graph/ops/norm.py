"""Normalisations and softmax: reductions with a per-element epilogue."""
from __future__ import annotations

import math

import numpy as np

from ..types import TensorType
from .registry import REQUIRED, OpDef, Pattern, fail, register


def _axis(op, axis, types):
    rank = types[0].rank
    if not -rank <= axis < rank:
        raise fail(op, f"axis {axis} out of range for rank {rank}", types)
    return axis % rank


def batch_norm_infer(types, attrs):
    x = types[0]
    axis = _axis("batch_norm", attrs["axis"], types)
    for t in types[1:]:
        if t.shape != (x.shape[axis],):
            raise fail("batch_norm", f"parameters must have shape ({x.shape[axis]},)", types)
    return [x]


def _batch_norm_ref(xs, attrs):
    x, gamma, beta, mean, var = xs
    shape = [1] * x.ndim
    shape[attrs["axis"]] = -1
    r = lambda v: np.reshape(v, shape)  # noqa: E731
    out = (x - r(mean)) / np.sqrt(r(var) + attrs["epsilon"]) * r(gamma) + r(beta)
    return [out.astype(x.dtype)]


def _canon_axis(types, attrs):
    attrs["axis"] = int(attrs["axis"]) % types[0].rank
    return attrs


register(OpDef("batch_norm", 5, {"axis": 1, "epsilon": 1e-5}, batch_norm_infer, _batch_norm_ref,
               None, Pattern.BROADCAST, canon=_canon_axis,
               doc="Inference batch norm: inputs x, gamma, beta, moving mean, moving var."))


def layer_norm_infer(types, attrs):
    x, gamma, beta = types
    axes = sorted(_axis("layer_norm", a, types) for a in attrs["axes"])
    norm_shape = tuple(x.shape[a] for a in axes)
    if gamma.shape != norm_shape or beta.shape != norm_shape:
        raise fail("layer_norm", f"gamma and beta must have shape {list(norm_shape)}", types)
    return [x]


def _layer_norm_ref(xs, attrs):
    x, gamma, beta = xs
    axes = tuple(attrs["axes"])
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = x64.var(axis=axes, keepdims=True)
    out = (x64 - mean) / np.sqrt(var + attrs["epsilon"])
    if attrs["scale"]:
        out = out * gamma
    if attrs["center"]:
        out = out + beta
    return [out.astype(x.dtype)]


def _canon_axes(types, attrs):
    attrs["axes"] = tuple(sorted(int(a) % types[0].rank for a in attrs["axes"]))
    return attrs


register(OpDef("layer_norm", 3, {"axes": (-1,), "epsilon": 1e-5, "center": True, "scale": True},
               layer_norm_infer, _layer_norm_ref, None, Pattern.REDUCE, canon=_canon_axes))


def group_norm_grouping(shape, groups: int, axis: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shape a group norm's spelling reshapes x to, and the axes it reduces: (N, G, -1) over 2 with
    channels on axis 1; with channels last, (N, positions, G, C / G) over 1 and 3 (the same channels and
    positions per group). The references and the writers (Relax, ONNX) spell it so."""
    if axis == 1:
        return (shape[0], groups, math.prod(shape[1:]) // groups), (2,)
    return (shape[0], math.prod(shape[1:-1]), groups, shape[-1] // groups), (1, 3)


def group_norm_axes(rank: int, axis: int) -> list[int]:
    """The axes Relax's group_norm normalises over with channels on `axis`: every one but the batch's and theirs."""
    return [i for i in range(1, rank) if i != axis]


def _channels_of(op, types, attrs, groups):
    """The channel axis, checked: 1 or last of a rank >= 3 input, its size a multiple of `groups`."""
    x = types[0]
    axis = _axis(op, attrs["axis"], types)
    if x.rank < 3 or axis not in (1, x.rank - 1) or groups < 1 or x.shape[axis] % groups:
        raise fail(op, f"channels on axis 1 or last of a rank >= 3 input, in {groups} groups, expected", types)
    if any(t.dtype != x.dtype for t in types):
        raise fail(op, "one dtype expected", types)
    return axis


def _grouped_normalized(x, groups: int, axis: int, eps):
    """x in its spelling's grouped shape, normalized over each group (float64): both group norms' core."""
    grouped, axes = group_norm_grouping(x.shape, groups, axis)
    split = x.astype(np.float64).reshape(grouped)
    return (split - split.mean(axis=axes, keepdims=True)) / np.sqrt(split.var(axis=axes, keepdims=True) + eps)


# exported_group_norm: a GroupNorm as PyTorch's ONNX exporters write it, reshape (N, G, -1),
# InstanceNormalization, reshape back (TVM imports the middle as mean, variance, sqrt and arithmetic);
# graph/spell_group_norms.py finds that spelling, whose reference this is, so that a layout rule can carry
# a transpose through it. Inputs x, eps (rank 0), the instance norm's per-group scale and shift ((G, 1), as
# TVM reshapes them); the per-channel affine stays after it, as exported.
def exported_group_norm_infer(types, attrs):
    x, eps, scale, bias = types
    groups = scale.shape[0] if scale.rank == 2 else 0
    _channels_of("exported_group_norm", types, attrs, groups)
    if eps.shape != () or scale.shape != (groups, 1) or bias.shape != scale.shape:
        raise fail("exported_group_norm", "eps () and a per-group scale and shift (G, 1) expected", types)
    return [x]


def _exported_group_norm_ref(xs, attrs):
    x, eps, scale, bias = xs
    out = _grouped_normalized(x, scale.shape[0], attrs["axis"], eps) * scale + bias
    return [out.reshape(x.shape).astype(x.dtype)]


register(OpDef("exported_group_norm", 4, {"axis": 1}, exported_group_norm_infer, _exported_group_norm_ref, None,
               Pattern.REDUCE, canon=_canon_axis,
               doc="Group norm as exported (reshape, instance norm, reshape): x, eps, per-group scale, bias."))


# group_norm: Relax's nn.group_norm (TVM's PyTorch frontend, ONNX GroupNormalization), its scale and shift per
# channel; over every axis but the batch's and the channels' (axis 1, or last: NHWC)
def group_norm_infer(types, attrs):
    x, gamma, beta = types
    axis = _channels_of("group_norm", types, attrs, attrs["groups"])
    if gamma.shape != (x.shape[axis],) or beta.shape != gamma.shape:
        raise fail("group_norm", f"gamma and beta of shape ({x.shape[axis]},) expected", types)
    return [x]


def _group_norm_ref(xs, attrs):
    x, gamma, beta = xs
    axis = attrs["axis"]
    per_channel = [-1 if i == axis else 1 for i in range(x.ndim)]
    out = _grouped_normalized(x, attrs["groups"], axis, attrs["epsilon"]).reshape(x.shape)
    return [(out * gamma.reshape(per_channel) + beta.reshape(per_channel)).astype(x.dtype)]


register(OpDef("group_norm", 3, {"groups": REQUIRED, "epsilon": 1e-5, "axis": 1}, group_norm_infer, _group_norm_ref,
               None, Pattern.REDUCE, canon=_canon_axis, doc="Relax's group norm: x, gamma, beta per channel."))


def softmax_infer(types, attrs):
    _axis("softmax", attrs["axis"], types)
    return [types[0]]


def _softmax_ref(xs, attrs):
    x = xs[0]
    e = np.exp(x - x.max(axis=attrs["axis"], keepdims=True))
    return [(e / e.sum(axis=attrs["axis"], keepdims=True)).astype(x.dtype)]


register(OpDef("softmax", 1, {"axis": -1}, softmax_infer, _softmax_ref, None, Pattern.REDUCE,
               canon=_canon_axis))
