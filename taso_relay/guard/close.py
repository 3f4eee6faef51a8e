"""When two results are the same: equal up to rounding in their float type, at the scale of the reference.

TASOPass's numeric checks (the region, the whole function, the speed check's compiled outputs), the ONNX
export's check and the corpus harness all judge with these, so one bound holds everywhere.
"""
from __future__ import annotations

import functools

import numpy as np

from ..graph import Graph
from ..graph.folding import weight_only


def close(a: np.ndarray, b: np.ndarray, within=None) -> bool:
    """Equal up to rounding in their float type, scaled by the reference's magnitude (NaN and inf where it
    has them): 1e-4 of it for float32 and wider, ten rounding steps (CLOSE_STEPS) for narrower floats,
    where a merged matmul's reordered sums move float16 results by a few steps; or those of the float type
    `within`, where that is narrower (the function computes in it: see close_for). The magnitude is the
    largest finite element itself: with 1 + it, a random-weight MobileNet's logits (1e-9) agreed with
    anything smaller than 1e-4.

    A float64 difference, with the non-finite elements looked at only when some element fails: on a
    1x256x56x56 float32 pair 1.3 ms, against 9.0 ms for np.allclose on two float64 copies. Taken in
    blocks of CLOSE_BLOCK elements, so a language model's logits need no float64 copy of their own."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not is_float(a.dtype):
        return bool(np.array_equal(a, b))
    if a.size == 0:
        return True
    ratio = tolerance(a.dtype) if within is None else max(tolerance(a.dtype), tolerance(within))
    if not np.issubdtype(a.dtype, np.floating):  # bfloat16: exact in float32
        a, b = a.astype(np.float32), b.astype(np.float32)
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    blocks = range(0, flat_a.size, CLOSE_BLOCK)
    with np.errstate(all="ignore"):
        largest = max(_finite_max(np.abs(flat_a[i:i + CLOSE_BLOCK])) for i in blocks)
        bound = ratio * max(largest, float(np.finfo(a.dtype).tiny))
        for i in blocks:
            x, y = flat_a[i:i + CLOSE_BLOCK], flat_b[i:i + CLOSE_BLOCK]
            ok = np.abs(y.astype(np.float64) - x) <= bound  # exact: float32 - float32 in float64
            if ok.all():
                continue
            bad = ~ok  # the same infinity, or NaN on both sides; else a real difference
            x, y = x[bad], y[bad]
            if not np.all((x == y) | (np.isnan(x) & np.isnan(y))):
                return False
    return True


CLOSE_BLOCK = 1 << 22  # elements close compares at a time (32 MB of float64)
CLOSE_RTOL = 1e-4  # of the reference's magnitude, for float32 and wider
CLOSE_STEPS = 10  # rounding steps allowed for narrower floats (float16: 1e-2 of the magnitude)


def tolerance(dtype) -> float:
    return max(CLOSE_RTOL, CLOSE_STEPS * float(np.finfo(dtype).eps))


# operators that store, move or convert values without arithmetic that rounds in their type
NOT_COMPUTING = frozenset({"input", "weight", "constant", "cast", "transpose", "reshape", "squeeze", "expand_dims",
                            "broadcast_to", "concat", "split", "strided_slice", "take", "pad", "mirror_pad", "enlarge",
                            "subpixel_kernel", "channel_shuffle", "depth_to_space", "space_to_depth",
                            "stack", "opaque"})


def is_float(dtype) -> bool:
    """numpy's floats and ml_dtypes' bfloat16, which numpy does not count as floating (float8 kinds are compared
    exactly: ten of their rounding steps would be the whole magnitude)."""
    return np.issubdtype(dtype, np.floating) or np.dtype(dtype).name == "bfloat16"


def close_for(graph: Graph | None):
    """`close` with the rounding of the narrowest float `graph` computes in (narrow_float): a bfloat16 or
    float16 model whose outputs are cast to float32 rounds inside, and a rewrite there moves those float32
    outputs by as many of its steps (x @ a + x @ b against x @ (a + b) in bfloat16: 0.4% of the output's
    magnitude)."""
    narrow = narrow_float(graph)
    return close if narrow is None else functools.partial(close, within=narrow)


def narrow_float(graph: Graph | None):
    """float16 or bfloat16 (as a numpy dtype) where `graph` computes in it, else None. Only arithmetic on
    values the model runs counts: not values stored, moved or cast in a narrow type (float16 weights, or a
    float16 input transposed and cast to float32), nor what FoldConstant computes from weights; and only
    float16 and bfloat16 (float8's ten steps would be the whole magnitude)."""
    if graph is None:
        return None
    import ml_dtypes

    folded = weight_only(graph)
    dtypes = {t.dtype for i, node in enumerate(graph.nodes) if not folded[i] and node.op not in NOT_COMPUTING
              for t in node.types}
    narrow = [d for d in (ml_dtypes.bfloat16, np.float16) if np.dtype(d).name in dtypes]  # the wider step first
    return np.dtype(narrow[0]) if narrow else None


def _finite_max(magnitude: np.ndarray) -> float:
    """The largest of |values|, leaving out NaN and inf (a reference that has them is scaled by the rest)."""
    largest = float(magnitude.max())
    if not np.isfinite(largest):
        largest = float(magnitude.max(initial=0.0, where=np.isfinite(magnitude)))
    return largest
