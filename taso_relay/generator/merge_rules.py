"""Hand-written rules that merge two convolutions of one input whatever their padding, and matmuls into slices.

The generated merge rules come from graphs whose convs pad to keep the size
(padding = kernel // 2), the only padding TASO's generator enumerates; parallel
'VALID' convs, or convs with any other shared padding, stride or dilation, were
never merged. Here the padding, strides, dilation and fused activation are free
variables shared by both convs, and the prover checks the rule for all of them.

Two or three matmuls of one input (Q/K/V projections, a gated MLP's gate and
up) merge into one whose parts are read by slices, not a split: TVM runs a
split with parts going different ways as a copy kernel of its own, while a
slice fuses into its reader, so the merge pays in one step instead of needing a
dearer intermediate graph the search may never expand.


    python -m taso_relay.generator.merge_rules --out rules/handwritten_merge.json
    taso-relay rules verify rules/handwritten_merge.json
"""
from __future__ import annotations

from .handwritten import node, write_main

_SAME = {"padding": "?p", "strides": "?s", "dilation": "?d", "activation": "?a"}
_INPUTS = [{"name": "x", "kind": "any"}, {"name": "w1", "kind": "weight"}, {"name": "w2", "kind": "weight"}]
_KERNELS_AGREE = ["rank(x) == 4", "rank(w1) == 4", "rank(w2) == 4", "dim(w2, 1) == dim(w1, 1)",
                  "dim(w2, 2) == dim(w1, 2)", "dim(w2, 3) == dim(w1, 3)"]
_EXAMPLE = {"inputs": {"x": [1, 3, 7, 6], "w1": [4, 3, 3, 2], "w2": [2, 3, 3, 2]},
            "vars": {"p": [0, 1, 0, 0], "s": [2, 1], "d": [1, 1], "a": "relu"}}
HALF = "=(dim({0}, 2) // 2, dim({0}, 3) // 2, dim({0}, 2) // 2, dim({0}, 3) // 2)"  # "same" padding of kernel {0}
# w2's odd kernel, zero-padded around its centre, fits inside w1's (and is smaller): both "same", so no output moves
SMALLER_KERNEL_FITS = ["dim(w1, 2) % 2 == 1", "dim(w1, 3) % 2 == 1", "dim(w2, 2) % 2 == 1", "dim(w2, 3) % 2 == 1",
                       "dim(w2, 2) <= dim(w1, 2)", "dim(w2, 3) <= dim(w1, 3)",
                       "dim(w2, 2) * dim(w2, 3) < dim(w1, 2) * dim(w1, 3)"]
_PROVENANCE = {"generator": "handwritten", "family": "merge-conv"}


def merge_rules() -> list[dict]:
    return conv_rules() + matmul_rules()


def conv_rules() -> list[dict]:
    merged = [node("cw", "concat", ["w1", "w2"], axis=0), node("c", "conv2d", ["x", "cw"], **_SAME)]
    sizes = "=(dim(w1, 0), dim(w2, 0))"
    return [
        {"id": "h-merge-conv", "inputs": _INPUTS,
         "source": [node("c1", "conv2d", ["x", "w1"], **_SAME), node("c2", "conv2d", ["x", "w2"], **_SAME)],
         "target": merged + [node("s", "split", ["c"], axis=1, sizes=sizes)],
         "outputs": [["c1", "s:0"], ["c2", "s:1"]], "constraints": _KERNELS_AGREE, "example": _EXAMPLE,
         "provenance": _PROVENANCE},
        # an Inception-style concat of the two: the merged conv is the concat, and no split is left to undo
        {"id": "h-merge-conv-concat", "inputs": _INPUTS,
         "source": [node("c1", "conv2d", ["x", "w1"], **_SAME), node("c2", "conv2d", ["x", "w2"], **_SAME),
                    node("k", "concat", ["c1", "c2"], axis=1)],
         "target": merged, "outputs": [["k", "c"]], "constraints": _KERNELS_AGREE, "example": _EXAMPLE,
         "provenance": _PROVENANCE},
        # TASO's Inception rewrite without a concat after: the smaller kernel is zero-padded to the larger one's
        # size; both convs keep their size ("same" padding), so centring the smaller kernel changes nothing
        {"id": "h-merge-conv-enlarge", "inputs": _INPUTS,
         "source": [node("c1", "conv2d", ["x", "w1"], padding=HALF.format("w1"), strides="?s", activation="?a"),
                    node("c2", "conv2d", ["x", "w2"], padding=HALF.format("w2"), strides="?s", activation="?a")],
         "target": [node("e", "enlarge", ["w2"], kernel="=(dim(w1, 2), dim(w1, 3))"),
                    node("cw", "concat", ["w1", "e"], axis=0),
                    node("c", "conv2d", ["x", "cw"], padding=HALF.format("w1"), strides="?s", activation="?a"),
                    node("s", "split", ["c"], axis=1, sizes=sizes)],
         "outputs": [["c1", "s:0"], ["c2", "s:1"]],
         "constraints": ["rank(x) == 4", "rank(w1) == 4", "rank(w2) == 4", "dim(w2, 1) == dim(w1, 1)"]
         + SMALLER_KERNEL_FITS,
         "example": {"inputs": {"x": [1, 3, 7, 6], "w1": [4, 3, 3, 5], "w2": [2, 3, 1, 3]},
                     "vars": {"s": [1, 2], "a": "none"}},
         "provenance": _PROVENANCE},
    ]


def matmul_rules() -> list[dict]:
    return [_matmuls_sliced(parts, rank) for parts in (2, 3) for rank in MATMUL_RANKS]


MATMUL_RANKS = (2, 3, 4)  # one rule per rank of the input: the prover fixes ranks (as the generated rules do)


def _matmuls_sliced(parts: int, rank: int) -> dict:
    """`parts` matmuls of one input of `rank` by 2-D weights, the same fused activation: one matmul on the
    weights concatenated, each result a slice of its last axis."""
    ws = [f"w{i + 1}" for i in range(parts)]
    ends = [" + ".join(f"dim({w}, 1)" for w in ws[:i + 1]) for i in range(parts)]
    begins = ["0"] + ends[:-1]
    return {
        "id": f"h-merge-matmul{parts}-sliced-r{rank}",
        "inputs": [{"name": "x", "kind": "any"}] + [{"name": w, "kind": "weight"} for w in ws],
        "source": [node(f"n{i}", "matmul", ["x", w], activation="?a") for i, w in enumerate(ws)],
        "target": [node("cw", "concat", ws, axis=1), node("m", "matmul", ["x", "cw"], activation="?a")]
        + [node(f"p{i}", "strided_slice", ["m"], axes=[rank - 1], begin=[0 if b == "0" else "=" + b], end=["=" + e],
                strides=[1]) for i, (b, e) in enumerate(zip(begins, ends))],
        "outputs": [[f"n{i}", f"p{i}"] for i in range(parts)],
        "constraints": [f"rank(x) == {rank}"] + [f"rank({w}) == 2" for w in ws],
        "example": {"inputs": {"x": [1, 2, 3, 4][-rank:]} | {w: [4, 2 + i] for i, w in enumerate(ws)},
                    "vars": {"a": "none"}},
        "provenance": {"generator": "handwritten", "family": "merge-matmul"},
    }


def main(argv=None) -> int:
    return write_main(argv, __doc__.splitlines()[0], merge_rules, (
        "Two convs of one input with the same kernel size, padding, strides, dilation and activation (all free) "
        "become one conv on the concatenated weights, split (or concatenated) after: the generated merge rules "
        "only cover padding = kernel // 2 (taso_relay/generator/merge_rules.py). Two or three matmuls of one input "
        "become one, each result read by a slice (which TVM fuses into its reader; a split is a copy kernel). "
        "Proved like the generated ones (taso-relay rules verify)."))


if __name__ == "__main__":
    raise SystemExit(main())
