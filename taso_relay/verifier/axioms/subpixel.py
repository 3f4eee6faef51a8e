"""subpixel_kernel: a one-group transposed conv is a stride-1 conv with a pixel shuffle after it.

Output row s * q + r of a transposed conv (stride s, padding p before the data, kernel k) reads input rows
q + (r + p - kk) / s through the taps kk = r + p (mod s): per output phase r, a stride-1 conv over the input.
All s * s phases' convs are one conv with s * s times the output channels (their kernels gathered by
subpixel_kernel, graph/ops/subpixel.py), whose channels (C_out, s_h, s_w) a reshape, transpose and reshape
interleave into the rows and columns. Every phase needs as many positions, so the transposed output size
must be a whole number of strides (k + output_padding - p_before - p_after divisible by s).
The expressions below are shared by the rule (generator/subpixel_rules.py), so both say the same.
"""
from __future__ import annotations

from .base import N, axiom

CONV_T = {"strides": "?s", "padding": "?p", "output_padding": "?op", "dilation": (1, 1), "groups": 1}


def _axis(i: int) -> dict:
    """Expressions along spatial axis i (0: rows, 1: columns) of the transposed conv's input x, kernel w."""
    k, s, lo, hi, op = f"dim(w, {2 + i})", f"?s[{i}]", f"?p[{i}]", f"?p[{2 + i}]", f"?op[{i}]"
    before = f"({k} - 1 - {lo}) // {s}"
    size = f"({before} + ({lo} + {s} - 1) // {s} + 1)"
    whole = f"({k} + {op} - {lo} - {hi})"  # the output's size beyond (input - 1) * stride: whole strides
    return {"before": before, "after": f"({whole} // {s} - 2 - {before} + {size})",
            "positions": f"(dim(x, {2 + i}) + {whole} // {s} - 1)",
            "guard": [f"{whole} % {s} == 0", f"{lo} <= {k} - 1", f"{whole} // {s} - 2 - {before} + {size} >= 0"]}


H, W = _axis(0), _axis(1)
GUARD = H["guard"] + W["guard"]
KERNEL_ATTRS = {"strides": "?s", "padding": "=(?p[0], ?p[1])"}
CONV_ATTRS = {"strides": (1, 1), "padding": f"=({H['before']}, {W['before']}, {H['after']}, {W['after']})",
              "dilation": (1, 1), "groups": 1}
PHASES = f"=(dim(x, 0), dim(w, 1), ?s[0], ?s[1], {H['positions']}, {W['positions']})"
PHASE_PERM = (0, 1, 4, 2, 5, 3)  # (n, c, sh, sw, qh, qw) -> (n, c, qh, sh, qw, sw)
OUT = f"=(dim(x, 0), dim(w, 1), {H['positions']} * ?s[0], {W['positions']} * ?s[1])"

AXIOMS = [
    axiom("conv_transpose_subpixel", "subpixel",
          N("conv2d_transpose", "x", "w", **CONV_T),
          N("reshape", N("transpose", N("reshape", N("conv2d", "x", N("subpixel_kernel", "w", **KERNEL_ATTRS),
                                                     **CONV_ATTRS), shape=PHASES), perm=PHASE_PERM), shape=OUT),
          guard=GUARD, shapes={"x": ("n", "c", "h", "w"), "w": ("c", "o", "kh", "kw")},
          dims={"kh": (4, 2, 3, 4, 1, 5), "kw": (4, 3, 2, 4, 1), "h": (1, 2, 3, 5), "w": (2, 3, 4)},
          domains={"s": ((2, 2), (2, 2), (1, 1), (2, 1), (3, 2), (1, 3)),
                   "p": ((1, 1, 1, 1), (0, 0, 0, 0), (1, 0, 1, 0), (2, 1, 0, 1), (0, 1, 1, 2), (1, 2, 2, 1)),
                   "op": ((0, 0), (0, 0), (1, 0), (1, 1), (0, 1), (2, 1))},
          doc="A one-group, undilated transposed conv equals the stride-1 conv with its kernel's taps gathered "
              "per output phase, its s_h * s_w phases per channel interleaved by a pixel shuffle (when its "
              "output is a whole number of strides)."),
]
