"""The checks a rewritten function passes before TASOPass keeps it: same results, and (optionally) faster.

numeric: the rewritten region against the original, in numpy (no tvm).
close: when two results are the same (rounding in their float type, or the narrow one a graph computes in).
speed: both modules compiled with the cost model's lowering and timed on the target (tvm).
"""
from .numeric import RegionCheck, check_region

__all__ = ["RegionCheck", "check_region"]
