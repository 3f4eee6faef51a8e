"""Exact fingerprints: tensors as integers modulo a prime, identified by a 64-bit digest.

Every graph is evaluated on one fixed random integer assignment of the pool
(the same for all graphs), so equal output digests mean equal polynomials
with overwhelming probability and no rounding noise. relu and max are
replaced by the graph form's fixed nonlinear polynomials (graph/ops/modular.py).

Two assignments are used: *distinct* (every pool tensor random) and
*collapsed* (all copies of a role share one value). Collapsed fingerprints
are invariant under renaming inputs of a role, so graphs enumerated in
canonical input order still meet their renamed partners in one bucket; the
distinct values then decide which renaming (if any) makes them equal.
"""
from __future__ import annotations

import hashlib
import struct

import numpy as np

from ..graph.ops import modular as gm
from .config import Settings

MASK64 = (1 << 64) - 1


def digest(arr: np.ndarray) -> int:
    """64-bit content id of an integer tensor (shape and values)."""
    h = hashlib.blake2b(digest_size=8)
    h.update(struct.pack(f"<{len(arr.shape) + 1}q", len(arr.shape), *arr.shape))
    h.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
    return int.from_bytes(h.digest(), "little")


def combine(ids) -> int:
    """Order-independent 64-bit fingerprint of a multiset of output ids."""
    h = hashlib.blake2b(digest_size=8)
    for v in sorted(ids):
        h.update(v.to_bytes(8, "little"))
    return int.from_bytes(h.digest(), "little") & 0x7FFF_FFFF_FFFF_FFFF  # fits int64


def pool_values(settings: Settings) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(distinct, collapsed) integer values of every pool tensor, in pool order."""
    rng = np.random.default_rng(settings.seed)
    distinct, collapsed = [], []
    for role in settings.roles:
        first = None
        for _ in range(role.copies):
            v = rng.integers(0, settings.prime, size=role.shape, dtype=np.int64)
            first = v if first is None else first
            distinct.append(v)
            collapsed.append(first)
    return distinct, collapsed


# ---- fast modular kernels for the hot operators ---------------------------------------

_GATHER: dict = {}


def _taps(h, w, kh, kw, top, left):
    """Index arrays that gather every (kh, kw) window of a padded (h, w) plane."""
    key = (h, w, kh, kw, top, left)
    hit = _GATHER.get(key)
    if hit is None:
        rows = np.arange(h)[:, None, None, None] + np.arange(kh)[None, None, :, None]
        cols = np.arange(w)[None, :, None, None] + np.arange(kw)[None, None, None, :]
        hit = _GATHER[key] = (np.broadcast_to(rows, (h, w, kh, kw)), np.broadcast_to(cols, (h, w, kh, kw)))
    return hit


def _pad(x, top, left, bottom, right):
    n, c, h, w = x.shape
    if not (top or left or bottom or right):
        return x
    out = np.zeros((n, c, h + top + bottom, w + left + right), dtype=x.dtype)
    out[:, :, top:top + h, left:left + w] = x
    return out


def _windows(x, kh, kw, padding):
    """(n, c, ho, wo, kh*kw) windows of a stride-1 sliding window over the padded input."""
    top, left, bottom, right = padding
    xp = _pad(x, top, left, bottom, right)
    ho, wo = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    rows, cols = _taps(ho, wo, kh, kw, top, left)
    win = xp[:, :, rows, cols]  # n c ho wo kh kw
    return win.reshape(x.shape[0], x.shape[1], ho, wo, kh * kw)


def conv2d(x, w, groups: int, padding, p: int):
    """Stride-1 grouped conv mod p (NCHW / OIHW), padding (top, left, bottom, right)."""
    n, c = x.shape[:2]
    o, i, kh, kw = w.shape
    win = _windows(x, kh, kw, padding)
    ho, wo = win.shape[2], win.shape[3]
    g = groups
    cols = win.reshape(n, g, i, ho * wo, kh * kw).transpose(0, 1, 3, 2, 4).reshape(n, g, ho * wo, i * kh * kw)
    wg = w.reshape(g, o // g, i * kh * kw)
    out = np.matmul(cols, wg.transpose(0, 2, 1)[None])  # n g (ho wo) og
    return (out % p).transpose(0, 1, 3, 2).reshape(n, o, ho, wo)


def pool2d(kind: str, x, kernel, padding, p: int):
    """Stride-1 pooling mod p: avg counts padding (count_include_pad); max is a sum of cubes."""
    kh, kw = kernel
    win = _windows(x, kh, kw, padding)
    if kind == "max_pool2d":
        cubes = (win * ((win * win) % p)) % p
        return cubes.sum(axis=-1) % p
    return (win.sum(axis=-1) % p) * gm.inverse(kh * kw, p) % p


def relu(x, p: int):
    return gm.relu(x, p)
