"""Exact arithmetic modulo a prime, for fingerprints free of rounding noise.

Values are int64 arrays in [0, p). With p < 2**24 a product fits in 48 bits,
so sums of up to 2**14 products are reduced in chunks and never overflow.
Non-polynomial operators get fixed nonlinear polynomial surrogates: a
surrogate can only hide identities, never invent one, and the generator
re-checks every candidate in floating point with the real operator.
"""
from __future__ import annotations

import numpy as np

DEFAULT_PRIME = 16_777_213  # largest prime below 2**24
_CHUNK = 1 << 14


def mod(x, p: int):
    return np.mod(np.asarray(x, dtype=np.int64), p)


def inverse(value: int, p: int) -> int:
    return pow(int(value) % p, p - 2, p)


def matmul(a, b, p: int):
    """Batched matmul mod p with chunked reduction over the inner axis."""
    k = a.shape[-1]
    out = None
    for start in range(0, k, _CHUNK):
        part = np.matmul(a[..., start:start + _CHUNK], b[..., start:start + _CHUNK, :]) % p
        out = part if out is None else (out + part) % p
    if out is None:  # k == 0
        out = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), np.int64)
    return out


def relu(x, p: int):
    """Surrogate for relu: x*(x+1)*(x+2)/... kept odd-free but zero at zero."""
    return (x * ((x * x) % p + 3)) % p  # x^3 + 3x


def sigmoid(x, p: int):
    return ((x * x) % p * 5 + 7 * x + 11) % p


def tanh(x, p: int):
    return ((x * x) % p * x % p * 2 + 13 * x) % p


def max_reduce(windows, p: int, axis):
    """Surrogate for max over a window: sum of cubes (nonlinear, not additive)."""
    cubes = (windows * ((windows * windows) % p)) % p
    return np.sum(cubes, axis=axis) % p
