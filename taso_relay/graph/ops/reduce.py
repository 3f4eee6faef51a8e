"""Reductions over explicit axes."""
from __future__ import annotations

import numpy as np

from ..types import TensorType
from . import modular
from .registry import OpDef, Pattern, fail, register


def reduce_infer(op):
    def infer(types, attrs):
        (x,) = types
        axes = attrs["axes"]
        if any(not -x.rank <= a < x.rank for a in axes):
            raise fail(op, f"axes {list(axes)} out of range for rank {x.rank}", types)
        axes = {a % x.rank for a in axes} if axes else set(range(x.rank))
        if attrs["keepdims"]:
            shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        else:
            shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return [TensorType(shape, x.dtype)]
    return infer


def _canon(types, attrs):
    rank = types[0].rank
    attrs["axes"] = tuple(sorted(int(a) % rank for a in attrs["axes"])) or tuple(range(rank))
    return attrs


def _axes(attrs, x):
    return tuple(attrs["axes"]) or tuple(range(x.ndim))


def _mod_sum(xs, attrs, p):
    return [np.sum(xs[0], axis=_axes(attrs, xs[0]), keepdims=attrs["keepdims"]) % p]


def _mod_mean(xs, attrs, p):
    x = xs[0]
    count = int(np.prod([x.shape[a] for a in _axes(attrs, x)]))
    return [_mod_sum(xs, attrs, p)[0] * modular.inverse(count, p) % p]


def _variance(x, axis, keepdims):
    """The mean of squared deviations (TVM's formula). Float16 is summed in float32, as np.mean does: TVM
    sums it in float16, which overflows to inf on a group norm's tens of thousands of values (and past
    65,504 values cannot build), so there the reference is the value TVM should have computed."""
    return np.var(x, axis=axis, keepdims=keepdims, dtype=np.float32 if x.dtype == np.float16 else None)


# variance: a group norm as exported (InstanceNormalization on a reshape; PoolFormer, MobileViT-v2, Wav2Vec2)
REDUCTIONS = {"sum": (np.sum, _mod_sum), "mean": (np.mean, _mod_mean),
              "max": (np.max, None), "min": (np.min, None), "variance": (_variance, None)}

for _name, (_fn, _mod) in REDUCTIONS.items():
    register(OpDef(
        _name, 1, {"axes": (), "keepdims": False}, reduce_infer(_name),
        (lambda fn: lambda xs, a: [np.asarray(fn(xs[0], axis=_axes(a, xs[0]), keepdims=a["keepdims"])).astype(xs[0].dtype)])(_fn),
        _mod, Pattern.REDUCE, canon=_canon, doc="Empty axes means all axes."))
