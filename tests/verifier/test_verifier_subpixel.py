"""The sub-pixel identity (axiom subpixel/conv_transpose_subpixel, rule h-convT-subpixel) on every small transposed
conv, not only the axiom check's sampled instances: each one the guard admits computes the same both ways, and
the guard admits exactly those whose output is a whole number of strides."""
from __future__ import annotations

import itertools

import numpy as np

from taso_relay.verifier.axioms import BY_NAME
from taso_relay.verifier.concrete import compare_instance


def test_every_small_transposed_conv_equals_its_subpixel_form():
    rule = BY_NAME["conv_transpose_subpixel"].rule
    rng = np.random.default_rng(0)
    seen = {"ok": 0, "skip": 0}
    for k, s, p_lo, p_hi, op in itertools.product((1, 2, 3, 4, 5), (1, 2, 3), range(4), range(4), range(3)):
        if op >= s or p_lo > k - 1:  # output padding below the stride; the padding before within the kernel
            continue
        variables = {"s": (s, 2), "p": (p_lo, 1, p_hi, 1), "op": (op, 1)}  # columns: k3 s2 p1 op1
        out = compare_instance(rule, {"x": (1, 2, 4, 3), "w": (2, 3, k, 3)}, variables, rng)
        assert out.status != "fail", (k, s, p_lo, p_hi, op, out.detail)
        whole = (k + op - p_lo - p_hi) % s == 0 and (k + op - p_lo - p_hi) // s >= 1 - (p_lo + s - 1) // s
        assert (out.status == "ok") == whole, (k, s, p_lo, p_hi, op, out.detail)
        seen[out.status] += 1
    assert seen["ok"] >= 100 and seen["skip"] >= 50, seen
