"""subpixel_kernel: a one-group transposed conv is a stride-1 conv with a pixel shuffle after it.

Output row s * q + r of a transposed conv (stride s, padding p before the data, kernel k) reads input rows
q + (r + p - kk) / s through the taps kk = r + p (mod s): per output phase r, a stride-1 conv over the input.
All s * s phases' convs are one conv with s * s times the output channels (their kernels gathered by
subpixel_kernel, graph/ops/subpixel.py, whose window size typing.py's subpixel_size repeats for Z3), whose
channels (C_out, s_h, s_w) a reshape, transpose and reshape interleave into the rows and columns. Every phase
has as many positions, so where the transposed output is not a whole number of strides (k + output_padding -
p_before - p_after not divisible by s: ConvTranspose2d(k=3, s=2, p=1) gives 2 * H - 1 rows) the conv computes
one position more per phase and a slice crops the rows and columns past the output (the same formula holds
there, reading the zero padding). The expressions below are shared by the rules (generator/subpixel_rules.py),
so both say the same.
"""
from __future__ import annotations

from .base import N, axiom

CONV_T = {"strides": "?s", "padding": "?p", "output_padding": "?op", "dilation": (1, 1), "groups": 1}


def _axis(i: int) -> dict:
    """Expressions along spatial axis i (0: rows, 1: columns) of the transposed conv's input x, kernel w."""
    k, s, lo, hi, op = f"dim(w, {2 + i})", f"?s[{i}]", f"?p[{i}]", f"?p[{2 + i}]", f"?op[{i}]"
    whole = f"({k} + {op} - {lo} - {hi})"  # the output's size beyond (input - 1) * stride
    steps = f"(({whole} + {s} - 1) // {s})"  # ... in strides, rounded up
    after = f"({steps} - 1 + ({lo} + {s} - 1) // {s})"
    return {"before": f"({k} - 1 - {lo}) // {s}", "after": after, "remainder": f"{whole} % {s}",
            "positions": f"(dim(x, {2 + i}) + {steps} - 1)", "out": f"(dim(x, {2 + i}) - 1) * {s} + {whole}",
            "guard": [f"{lo} <= {k} - 1", f"{after} >= 0"]}


H, W = _axis(0), _axis(1)
GUARD = H["guard"] + W["guard"]
WHOLE = [f"{H['remainder']} == 0", f"{W['remainder']} == 0"]  # both axes a whole number of strides
CROPPED = [f"{H['remainder']} + {W['remainder']} > 0"]  # not both
KERNEL_ATTRS = {"strides": "?s", "padding": "=(?p[0], ?p[1])"}
CONV_ATTRS = {"strides": (1, 1), "padding": f"=({H['before']}, {W['before']}, {H['after']}, {W['after']})",
              "dilation": (1, 1), "groups": 1}
PHASES = f"=(dim(x, 0), dim(w, 1), ?s[0], ?s[1], {H['positions']}, {W['positions']})"
PHASE_PERM = (0, 1, 4, 2, 5, 3)  # (n, c, sh, sw, qh, qw) -> (n, c, qh, sh, qw, sw)
SHUFFLED = f"=(dim(x, 0), dim(w, 1), {H['positions']} * ?s[0], {W['positions']} * ?s[1])"
CROP = {"axes": (2, 3), "begin": (0, 0), "end": f"=({H['out']}, {W['out']})", "strides": (1, 1)}


def shuffled(kernel: N | None = None) -> N:
    """The sub-pixel conv of x and its pixel shuffle (the phases of a rounded-up output); `kernel` replaces
    subpixel_kernel(w) (a wrong axiom's, in the tests)."""
    conv = N("conv2d", "x", kernel or N("subpixel_kernel", "w", **KERNEL_ATTRS), **CONV_ATTRS)
    return N("reshape", N("transpose", N("reshape", conv, shape=PHASES), perm=PHASE_PERM), shape=SHUFFLED)


_SHAPES = {"x": ("n", "c", "h", "w"), "w": ("c", "o", "kh", "kw")}
_DIMS = {"kh": (4, 2, 3, 4, 1, 5), "kw": (4, 3, 2, 4, 1), "h": (1, 2, 3, 5), "w": (2, 3, 4)}
_DOMAINS = {"s": ((2, 2), (2, 2), (1, 1), (2, 1), (3, 2), (1, 3)),
            "p": ((1, 1, 1, 1), (0, 0, 0, 0), (1, 0, 1, 0), (2, 1, 0, 1), (0, 1, 1, 2), (1, 2, 2, 1)),
            "op": ((0, 0), (0, 0), (1, 0), (1, 1), (0, 1), (2, 1))}

AXIOMS = [
    axiom("conv_transpose_subpixel", "subpixel", N("conv2d_transpose", "x", "w", **CONV_T), shuffled(),
          guard=GUARD + WHOLE, shapes=_SHAPES, dims=_DIMS, domains=_DOMAINS,
          doc="A one-group, undilated transposed conv equals the stride-1 conv with its kernel's taps gathered "
              "per output phase, its s_h * s_w phases per channel interleaved by a pixel shuffle (when its "
              "output is a whole number of strides)."),
    axiom("conv_transpose_subpixel_cropped", "subpixel", N("conv2d_transpose", "x", "w", **CONV_T),
          N("strided_slice", shuffled(), **CROP),
          guard=GUARD + CROPPED, shapes=_SHAPES, dims=_DIMS, domains=_DOMAINS,
          doc="The same where the output is not a whole number of strides: one more position per phase, and "
              "the rows and columns past the output cropped."),
]
