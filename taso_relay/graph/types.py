"""Tensor types and the errors of the graph form.

Shapes are static tuples of ints: the superoptimizer reasons about concrete
kernels, so a symbolic dimension is the bridge's business (it leaves such
functions alone).
"""
from __future__ import annotations

from dataclasses import dataclass


class GraphError(Exception):
    """Base class for errors raised by the graph form."""


class ShapeError(GraphError):
    """Inconsistent operand shapes; the message names the operator and shapes."""


class NotModelled(GraphError):
    """The operation cannot be evaluated in the requested mode (e.g. opaque)."""


@dataclass(frozen=True, slots=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str = "float32"

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if any(d < 0 for d in self.shape):
            raise ShapeError(f"negative dimension in shape {self.shape}")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __str__(self) -> str:
        return f"{self.dtype}{list(self.shape)}"
