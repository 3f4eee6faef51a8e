"""transpose: identity, composition, and commuting with the other operators.

Permutations are written per rank (rank 2 to 4) with symbolic entries, so one
axiom covers every permutation of that rank.
"""
from __future__ import annotations

import itertools

from ...generator.layout_rules import BINARY as LAYOUT_RULE_BINARY, CASTS, CLIPS, REDUCE_AXES, REDUCTIONS, \
    SOFTMAX_AXES, TO_NCHW, UNARY as LAYOUT_RULE_UNARY, dropped_in_order, nhwc_axes
from ...graph.ops.registry import get_op
from .base import N, axiom
from .common import ACTS, SYMS, UNARY_ACTS, ident, perms, sl

AXIOMS = []
for _r in (2, 3, 4):
    shape = SYMS[:_r]
    ps = perms(_r)
    ident_perm = tuple(range(_r))
    composed = "=(" + ", ".join(f"?p[?q[{i}]]" for i in range(_r)) + ",)"
    new_axis = "=" + " + ".join(f"(?p[{i}] == ?ax) * {i}" for i in range(_r))
    AXIOMS += [
        axiom(f"transpose{_r}_identity", "transpose", N("transpose", "x", perm=ident_perm), ident("x"),
              shapes={"x": shape}),
        axiom(f"transpose{_r}_compose", "transpose",
              N("transpose", N("transpose", "x", perm="?p"), perm="?q"), N("transpose", "x", perm=composed),
              shapes={"x": shape}, domains={"p": ps, "q": ps[::-1]}),
        axiom(f"transpose{_r}_concat", "transpose",
              N("transpose", N("concat", "a", "b", axis="?ax"), perm="?p"),
              N("concat", N("transpose", "a", perm="?p"), N("transpose", "b", perm="?p"), axis=new_axis),
              shapes={"a": shape, "b": shape[:-1] + ("e",)}, domains={"p": ps, "ax": tuple(range(_r))[::-1]}),
        axiom(f"slice_transpose{_r}", "transpose",
              sl(N("transpose", "x", perm="?p")), N("transpose", sl("x", axis="=?p[?ax]"), perm="?p"),
              shapes={"x": shape}, domains={"p": ps, "ax": tuple(range(_r)), "b": (0, 1), "e": (1, 2, 3)}),
    ]
    for _u in UNARY_ACTS:
        AXIOMS.append(axiom(f"transpose{_r}_{_u}", "transpose", N("transpose", N(_u, "x"), perm="?p"),
                            N(_u, N("transpose", "x", perm="?p")), shapes={"x": shape},
                            domains={"p": ps}, both_ways=True))
    for _b in ("add", "mul"):
        AXIOMS.append(axiom(f"transpose{_r}_{_b}", "transpose", N("transpose", N(_b, "x", "y"), perm="?p"),
                            N(_b, N("transpose", "x", perm="?p"), N("transpose", "y", perm="?p")),
                            guard=["rank(x) == rank(y)"], shapes={"x": shape, "y": shape},
                            domains={"p": ps}, both_ways=True))

AXIOMS.append(axiom(
    "transpose_matmul", "transpose", N("transpose", N("matmul", "a", "b", activation="?act"), perm=(1, 0)),
    N("matmul", N("transpose", "b", perm=(1, 0)), N("transpose", "a", perm=(1, 0)), activation="?act"),
    guard=["rank(a) == 2", "rank(b) == 2"], shapes={"a": ("m", "k"), "b": ("k", "n")},
    domains={"act": ACTS}, both_ways=True))

# What the layout rules (generator/layout_rules.py) carry an NHWC-to-NCHW transpose through beyond
# the activations above: conv nets' other activations and element-wise binaries (rank 4 only, the
# rules' rank), with a scalar too, relu6 and hardsigmoid's clips as literals (MobileNets), and
# reductions and softmaxes over any of C, H and W (their axes literals too).
LAYOUT_UNARY = tuple(u for u in LAYOUT_RULE_UNARY if u not in UNARY_ACTS)
LAYOUT_BINARY = tuple(b for b in LAYOUT_RULE_BINARY if b not in ("add", "mul"))  # those two: every rank, above
_P4 = perms(4)
_X4 = SYMS[:4]
for _u in LAYOUT_UNARY:
    AXIOMS.append(axiom(f"transpose4_{_u}", "transpose", N("transpose", N(_u, "x"), perm="?p"),
                        N(_u, N("transpose", "x", perm="?p")), shapes={"x": _X4}, domains={"p": _P4},
                        both_ways=True))
AXIOMS.append(axiom("transpose4_leaky_relu", "transpose", N("transpose", N("leaky_relu", "x", alpha="?a"), perm="?p"),
                    N("leaky_relu", N("transpose", "x", perm="?p"), alpha="?a"), shapes={"x": _X4},
                    domains={"p": _P4, "a": (0.2, 0.01)}, both_ways=True,
                    doc="An element-wise op with a slope: the slope is opaque to the theory, the same on both sides."))
for _b in LAYOUT_BINARY:
    AXIOMS.append(axiom(f"transpose4_{_b}", "transpose", N("transpose", N(_b, "x", "y"), perm="?p"),
                        N(_b, N("transpose", "x", perm="?p"), N("transpose", "y", perm="?p")),
                        guard=["rank(x) == rank(y)"], shapes={"x": _X4, "y": _X4}, domains={"p": _P4},
                        both_ways=True))
for _name, _bounds in CLIPS.items():
    AXIOMS.append(axiom(f"transpose4_{_name}", "transpose", N("transpose", N("clip", "x", **_bounds), perm="?p"),
                        N("clip", N("transpose", "x", perm="?p"), **_bounds), shapes={"x": _X4},
                        domains={"p": _P4}, both_ways=True,
                        doc=f"clip({_bounds['min']}, {_bounds['max']}) is element-wise: it commutes with any "
                            "transpose."))
for _dtype in CASTS:
    AXIOMS.append(axiom(f"transpose4_cast_{_dtype}", "transpose",
                        N("transpose", N("cast", "x", dtype=_dtype), perm="?p"),
                        N("cast", N("transpose", "x", perm="?p"), dtype=_dtype), shapes={"x": _X4},
                        domains={"p": _P4}, both_ways=True,
                        doc=f"A cast to {_dtype} is element-wise: it commutes with any transpose."))
for _b in LAYOUT_RULE_BINARY:  # a rank-0 operand (hardswish's x + 3): broadcast the same in either layout
    for _side, _args in (("right", ("x", "s")), ("left", ("s", "x"))):
        if (_b, _side) == ("mul", "right") or (_side == "left" and get_op(_b).commutative):
            continue  # scalar.py's transpose4_smul; the matcher tries a commutative op's operands both ways
        _t = [N("transpose", a, perm="?p") if a == "x" else a for a in _args]
        AXIOMS.append(axiom(f"transpose4_{_b}_scalar_{_side}", "transpose",
                            N("transpose", N(_b, *_args), perm="?p"), N(_b, *_t),
                            guard=["rank(s) == 0"], shapes={"x": _X4, "s": ()}, domains={"p": _P4},
                            both_ways=True))
# A per-channel weight of rank 3 ((C, 1, 1): ConvNeXt's layer scale, as PyTorch keeps it) broadcasts
# against the last three axes of an NCHW tensor; against the NHWC tensor, turned to (1, 1, C), the same.
for _b in LAYOUT_RULE_BINARY:
    for _side in ("right", "left"):
        if _side == "left" and get_op(_b).commutative:
            continue  # the matcher tries a commutative op's operands both ways
        _tx, _tv = N("transpose", "x", perm=(0, 3, 1, 2)), N("transpose", "v", perm=(1, 2, 0))
        _lhs = N(_b, _tx, "v") if _side == "right" else N(_b, "v", _tx)
        _rhs = N(_b, "x", _tv) if _side == "right" else N(_b, _tv, "x")
        AXIOMS.append(axiom(f"transpose4_{_b}_rank3_{_side}", "transpose", _lhs,
                            N("transpose", _rhs, perm=(0, 3, 1, 2)), guard=["rank(v) == 3"],
                            shapes={"x": ("n", "h", "w", "c"), "v": ("c", 1, 1)}, both_ways=True,
                            doc="A rank-3 operand broadcasts against the (C, H, W) axes of the NCHW reading; "
                                "transposed to (H, W, C), against the same elements of the NHWC tensor."))
for _op, _nchw, _keep in itertools.product(REDUCTIONS, REDUCE_AXES, (False, True)):
    if not (_keep or dropped_in_order(_nchw)):
        continue
    _reduced = N(_op, "y", axes=tuple(nhwc_axes(_nchw)), keepdims=_keep)
    AXIOMS.append(axiom(
        f"{_op}{''.join(map(str, _nchw))}_{'keep' if _keep else 'drop'}_nhwc", "transpose",
        N(_op, N("transpose", "y", perm=TO_NCHW), axes=_nchw, keepdims=_keep),
        N("transpose", _reduced, perm=TO_NCHW) if _keep else _reduced,
        shapes={"y": ("n", "h", "w", "c")},
        doc="A reduction of an NHWC tensor read as NCHW is the one over the same axes of the NHWC tensor (read as "
            "NCHW again when the dimensions are kept; dropped, the axes left are in the same order)."))
for _axis in SOFTMAX_AXES:
    AXIOMS.append(axiom(
        f"softmax{_axis}_nhwc", "transpose", N("softmax", N("transpose", "y", perm=TO_NCHW), axis=_axis),
        N("transpose", N("softmax", "y", axis=TO_NCHW[_axis]), perm=TO_NCHW), shapes={"y": ("n", "h", "w", "c")},
        doc="A softmax of an NHWC tensor read as NCHW is the one over the same axis of the NHWC tensor, read as NCHW."))
AXIOMS.append(axiom(
    "exported_group_norm_nhwc", "transpose",
    N("exported_group_norm", N("transpose", "y", perm=(0, 3, 1, 2)), "e", "s", "b", axis=1),
    N("transpose", N("exported_group_norm", "y", "e", "s", "b", axis=3), perm=(0, 3, 1, 2)),
    shapes={"y": ("n", "h", "w", "c"), "e": (), "s": ("g", 1), "b": ("g", 1)}, dims={"c": (4, 6), "g": (1, 2)},
    doc="A group norm of an NHWC tensor read as NCHW is the one over its last axis' channel groups (the same "
        "channels, the same positions), read as NCHW."))
AXIOMS.append(axiom(
    "group_norm_nhwc", "transpose",
    N("group_norm", N("transpose", "y", perm=(0, 3, 1, 2)), "ga", "be", groups="?g", epsilon="?e", axis=1),
    N("transpose", N("group_norm", "y", "ga", "be", groups="?g", epsilon="?e", axis=3), perm=(0, 3, 1, 2)),
    shapes={"y": ("n", "h", "w", "c"), "ga": ("c",), "be": ("c",)}, domains={"g": (1, 2), "e": (1e-5, 1e-3, 0.5)},
    dims={"c": (4, 6)},
    doc="Relax's group norm of an NHWC tensor read as NCHW is the one with channels last, read as NCHW."))
