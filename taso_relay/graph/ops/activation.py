"""Fused activations carried as an attribute of conv2d and matmul (TASO's style)."""
from __future__ import annotations

import numpy as np

from . import modular
from .elementwise import UNARY

ACTIVATIONS = ("none", "relu", "sigmoid", "tanh")


def apply_float(x, activation: str):
    if activation == "none":
        return x
    return np.asarray(UNARY[activation][0](x)).astype(x.dtype)


def apply_modular(x, activation: str, p: int):
    if activation == "none":
        return x
    return getattr(modular, activation)(x, p)


def check(op: str, activation: str):
    from .registry import ShapeError
    if activation not in ACTIVATIONS:
        raise ShapeError(f"{op}: unknown activation '{activation}' (expected one of {ACTIVATIONS})")
