"""matmul with a batched activation (rank 3 or 4) against a 2-D weight.

A transformer's linear layer multiplies (batch, sequence, features) by a 2-D
weight; numpy's matmul treats the leading dimensions as a batch. The rank-2
axioms in linear.py and transpose.py do not cover that, so the batch-lifted
rules (generator/lift.py) need these. Each is written per rank with literal
axes, so the concrete check runs exactly the form the prover uses.
"""
from __future__ import annotations

from .base import N, axiom
from .common import ACTS

AXIOMS = []


def _swap_last(r: int) -> tuple:
    return tuple(range(r - 2)) + (r - 1, r - 2)


for _r in (3, 4):
    B = ("b0", "b1")[: _r - 2]
    X = B + ("m", "k")       # batched activation, left operand
    XR = B + ("k", "p")      # batched activation, right operand
    W = ("k", "p")           # 2-D weight, right operand
    WL = ("m", "k")          # 2-D weight, left operand
    last, rows = _r - 1, _r - 2
    P = _swap_last(_r)
    x_r = [f"rank(x1) == {_r}"]
    AXIOMS += [
        axiom(f"matmul{_r}_linear_left", "batched",
              N("matmul", N("add", "x1", "x2"), "w"), N("add", N("matmul", "x1", "w"), N("matmul", "x2", "w")),
              guard=x_r + [f"rank(x2) == {_r}", "rank(w) == 2", f"dim(x1, {last}) == dim(w, 0)",
                           f"dim(x2, {last}) == dim(w, 0)"],
              shapes={"x1": X, "x2": X, "w": W}, both_ways=True),
        axiom(f"matmul{_r}_linear_right", "batched",
              N("matmul", "x1", N("add", "w1", "w2")), N("add", N("matmul", "x1", "w1"), N("matmul", "x1", "w2")),
              guard=x_r + ["rank(w1) == 2", "rank(w2) == 2", f"dim(x1, {last}) == dim(w1, 0)",
                           f"dim(x1, {last}) == dim(w2, 0)"],
              shapes={"x1": X, "w1": W, "w2": W}, both_ways=True),
        axiom(f"matmul{_r}_linear_right_batched", "batched",
              N("matmul", "w", N("add", "x1", "x2")), N("add", N("matmul", "w", "x1"), N("matmul", "w", "x2")),
              guard=x_r + [f"rank(x2) == {_r}", "rank(w) == 2", f"dim(w, 1) == dim(x1, {rows})",
                           f"dim(w, 1) == dim(x2, {rows})"],
              shapes={"w": WL, "x1": XR, "x2": XR}, both_ways=True),
        axiom(f"matmul{_r}_linear_left_weight", "batched",
              N("matmul", N("add", "w1", "w2"), "x1"), N("add", N("matmul", "w1", "x1"), N("matmul", "w2", "x1")),
              guard=x_r + ["rank(w1) == 2", "rank(w2) == 2", f"dim(w1, 1) == dim(x1, {rows})",
                           f"dim(w2, 1) == dim(x1, {rows})"],
              shapes={"w1": WL, "w2": WL, "x1": XR}, both_ways=True),
        axiom(f"matmul{_r}_concat_weight_columns", "batched",
              N("matmul", "x1", N("concat", "w1", "w2", axis=1), activation="?act"),
              N("concat", N("matmul", "x1", "w1", activation="?act"), N("matmul", "x1", "w2", activation="?act"),
                axis=last),
              guard=x_r + ["rank(w1) == 2", "rank(w2) == 2"],
              shapes={"x1": X, "w1": W, "w2": ("k", "p2")}, domains={"act": ACTS}, both_ways=True,
              doc="The merged Q/K/V projection: one matmul against the weights side by side."),
        axiom(f"matmul{_r}_concat_columns", "batched",
              N("matmul", "w", N("concat", "x1", "x2", axis=last), activation="?act"),
              N("concat", N("matmul", "w", "x1", activation="?act"), N("matmul", "w", "x2", activation="?act"),
                axis=last),
              guard=x_r + [f"rank(x2) == {_r}", "rank(w) == 2"],
              shapes={"w": WL, "x1": XR, "x2": B + ("k", "p2")}, domains={"act": ACTS}, both_ways=True),
        axiom(f"matmul{_r}_concat_weight_rows", "batched",
              N("matmul", N("concat", "w1", "w2", axis=0), "x1", activation="?act"),
              N("concat", N("matmul", "w1", "x1", activation="?act"), N("matmul", "w2", "x1", activation="?act"),
                axis=rows),
              guard=x_r + ["rank(w1) == 2", "rank(w2) == 2"],
              shapes={"w1": WL, "w2": ("m2", "k"), "x1": XR}, domains={"act": ACTS}, both_ways=True),
    ] + [
        axiom(f"matmul{_r}_concat_rows{_ax}", "batched",
              N("matmul", N("concat", "x1", "x2", axis=_ax), "w", activation="?act"),
              N("concat", N("matmul", "x1", "w", activation="?act"), N("matmul", "x2", "w", activation="?act"),
                axis=_ax),
              guard=x_r + [f"rank(x2) == {_r}", "rank(w) == 2"],
              shapes={"x1": X, "x2": X[:_ax] + ("e",) + X[_ax + 1:], "w": W}, domains={"act": ACTS},
              both_ways=True)
        for _ax in range(_r - 1)
    ] + [
        axiom(f"matmul{_r}_concat_inner", "batched",
              N("matmul", N("concat", "x1", "x2", axis=last), N("concat", "w1", "w2", axis=0)),
              N("add", N("matmul", "x1", "w1"), N("matmul", "x2", "w2")),
              guard=x_r + [f"rank(x2) == {_r}", "rank(w1) == 2", f"dim(x1, {last}) == dim(w1, 0)"],
              shapes={"x1": X, "x2": B + ("m", "k2"), "w1": W, "w2": ("k2", "p")}),
        axiom(f"matmul{_r}_concat_inner_weight_left", "batched",
              N("matmul", N("concat", "w1", "w2", axis=1), N("concat", "x1", "x2", axis=rows)),
              N("add", N("matmul", "w1", "x1"), N("matmul", "w2", "x2")),
              guard=x_r + [f"rank(x2) == {_r}", "rank(w1) == 2", f"dim(w1, 1) == dim(x1, {rows})"],
              shapes={"w1": WL, "w2": ("m", "k2"), "x1": XR, "x2": B + ("k2", "p")}),
        axiom(f"transpose{_r}_matmul_weight_right", "batched",
              N("transpose", N("matmul", "x1", "w", activation="?act"), perm=P),
              N("matmul", N("transpose", "w", perm=(1, 0)), N("transpose", "x1", perm=P), activation="?act"),
              guard=x_r + ["rank(w) == 2"], shapes={"x1": X, "w": W}, domains={"act": ACTS}, both_ways=True),
        axiom(f"transpose{_r}_matmul_weight_left", "batched",
              N("transpose", N("matmul", "w", "x1", activation="?act"), perm=P),
              N("matmul", N("transpose", "x1", perm=P), N("transpose", "w", perm=(1, 0)), activation="?act"),
              guard=x_r + ["rank(w) == 2"], shapes={"w": WL, "x1": XR}, domains={"act": ACTS}, both_ways=True),
        axiom(f"transpose{_r}_matmul_both", "batched",
              N("transpose", N("matmul", "x1", "x2", activation="?act"), perm=P),
              N("matmul", N("transpose", "x2", perm=P), N("transpose", "x1", perm=P), activation="?act"),
              guard=x_r + [f"rank(x2) == {_r}"], shapes={"x1": X, "x2": XR}, domains={"act": ACTS},
              both_ways=True),
    ]
    for _b in ("add", "mul"):
        AXIOMS.append(axiom(
            f"transpose{_r}_{_b}_weight", "batched",
            N("transpose", N(_b, "x1", "w"), perm=P),
            N(_b, N("transpose", "x1", perm=P), N("transpose", "w", perm=(1, 0))),
            guard=x_r + ["rank(w) == 2", f"dim(x1, {rows}) == dim(w, 0)", f"dim(x1, {last}) == dim(w, 1)"],
            shapes={"x1": X, "w": ("m", "k")}, both_ways=True,
            doc="A 2-D operand broadcast over the batch is transposed as a matrix."))
