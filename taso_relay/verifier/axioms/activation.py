"""Activations: fused activations of conv2d and matmul, and relu's own identities."""
from __future__ import annotations

from .base import N, axiom
from .common import CONV, CONV_DOMAINS, UNARY_ACTS, W4, X4

AXIOMS = []
for _act in UNARY_ACTS:
    AXIOMS.append(axiom(
        f"conv_fused_{_act}", "activation",
        N("conv2d", "x", "w", activation=_act, **CONV),
        N(_act, N("conv2d", "x", "w", activation="none", **CONV)),
        shapes={"x": X4, "w": W4}, domains=CONV_DOMAINS, both_ways=True,
        doc="A fused activation is the activation applied to the plain convolution."))
    AXIOMS.append(axiom(
        f"matmul_fused_{_act}", "activation",
        N("matmul", "a", "b", activation=_act), N(_act, N("matmul", "a", "b")),
        shapes={"a": ("m", "k"), "b": ("k", "n")}, both_ways=True))

AXIOMS.append(axiom("relu_idempotent", "activation", N("relu", N("relu", "x")), N("relu", "x"),
                    shapes={"x": ("m", "n")}))
