"""The sub-pixel identities (axioms subpixel/conv_transpose_subpixel(_cropped), rules h-convT-subpixel(-crop)) on
every small transposed conv, not only the axiom check's sampled instances: each one a guard admits computes the
same both ways, the whole form takes an output that is a whole number of strides, the cropped form the others."""
from __future__ import annotations

import itertools

import numpy as np

from taso_relay.verifier.axioms import BY_NAME
from taso_relay.verifier.concrete import compare_instance


def test_every_small_transposed_conv_equals_its_subpixel_form():
    whole_form, cropped = (BY_NAME[n].rule for n in ("conv_transpose_subpixel", "conv_transpose_subpixel_cropped"))
    rng = np.random.default_rng(0)
    seen = {"whole": 0, "cropped": 0, "neither": 0}
    for k, s, p_lo, p_hi, op, kw in itertools.product((1, 2, 3, 4, 5), (1, 2, 3), range(4), range(4), range(3),
                                                      (3, 2)):
        if op >= s or p_lo > k - 1:  # output padding below the stride; the padding before within the kernel
            continue
        variables = {"s": (s, 2), "p": (p_lo, 1, p_hi, 1), "op": (op, 1)}  # columns: k3 s2 p1 op1, or k2 (cropped)
        shapes = {"x": (1, 2, 4, 3), "w": (2, 3, k, kw)}
        outs = [compare_instance(rule, shapes, variables, rng) for rule in (whole_form, cropped)]
        assert all(out.status != "fail" for out in outs), (k, s, p_lo, p_hi, op, kw, [o.detail for o in outs])
        extra = k + op - p_lo - p_hi
        admitted = -(-extra // s) - 1 + (p_lo + s - 1) // s >= 0  # the conv's padding after is not negative
        is_whole = extra % s == 0 and kw == 3
        assert [o.status == "ok" for o in outs] == [admitted and is_whole, admitted and not is_whole], \
            (k, s, p_lo, p_hi, op, kw, [o.detail for o in outs])
        seen["neither" if not admitted else "whole" if is_whole else "cropped"] += 1
    assert min(seen.values()) >= 5 and seen["whole"] >= 100 and seen["cropped"] >= 100, seen
