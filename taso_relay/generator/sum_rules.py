"""Hand-written rules that sum two convolutions of one input into one, biases and all.

A conv is linear in its weights: conv(x, w1) + conv(x, w2) = conv(x, w1 + w2),
which halves the work. TASO's generator finds that rule (rules/taso_k3.json),
but in an exported model each conv has its bias added (ONNX Conv's bias, or a
batch norm folded in), and the sum is (conv1 + b1) + (conv2 + b2): reaching the
generated rule takes regrouping the four terms first, steps the search does not
take, as none of them is cheaper by itself. Multi-branch blocks summed at the end
(RepVGG's and ACNet's training-time forms, exported unmerged) have this shape.
Here the biases come along in one step:

    (conv(x, w1) + b1) + (conv(x, w2) + b2)  =>  conv(x, w1 + w2) + (b1 + b2)

with the weights and biases constants (folded when TVM compiles), the padding,
strides and dilation free but shared; and, for RepVGG's 3x3 and 1x1 branches,
with the smaller kernel zero-padded to the larger one's size (both "same"). A
fused activation is left out: the sum of two ReLUs is not the ReLU of the sum.

    python -m taso_relay.generator.sum_rules --out rules/handwritten_sum.json
    taso-relay rules verify rules/handwritten_sum.json
"""
from __future__ import annotations

from .handwritten import node, write_main
from .merge_rules import HALF, SMALLER_KERNEL_FITS

_SAME = {"padding": "?p", "strides": "?s", "dilation": "?d"}
_WEIGHTS_AGREE = ["rank(x) == 4", "rank(w1) == 4", "rank(w2) == 4", "dim(w2, 0) == dim(w1, 0)",
                  "dim(w2, 1) == dim(w1, 1)", "dim(w2, 2) == dim(w1, 2)", "dim(w2, 3) == dim(w1, 3)"]
# a bias per output channel, (1, C, 1, 1), as TVM's importer and the batch-norm fold both make it
_PER_CHANNEL = ["rank({0}) == 4", "dim({0}, 0) == 1", "dim({0}, 1) == dim(w1, 0)", "dim({0}, 2) == 1",
                "dim({0}, 3) == 1"]
_EXAMPLE_VARS = {"p": [1, 0, 1, 2], "s": [1, 2], "d": [1, 1]}
_PROVENANCE = {"generator": "handwritten", "family": "sum-conv"}


def sum_rules() -> list[dict]:
    same_size = _WEIGHTS_AGREE
    summed = [node("w", "add", ["w1", "w2"])]
    example = {"x": [1, 3, 7, 6], "w1": [4, 3, 3, 2], "w2": [4, 3, 3, 2]}
    # RepVGG's 3x3 and 1x1 branches: the smaller kernel zero-padded to the larger one's size
    enlarged = [node("e", "enlarge", ["w2"], kernel="=(dim(w1, 2), dim(w1, 3))"), node("w", "add", ["w1", "e"])]
    fits = ["rank(x) == 4", "rank(w1) == 4", "rank(w2) == 4", "dim(w2, 0) == dim(w1, 0)",
            "dim(w2, 1) == dim(w1, 1)"] + SMALLER_KERNEL_FITS
    return [
        _rule("h-sum-conv-bias", _SAME, _SAME, summed, same_size, example, _EXAMPLE_VARS),
        # one branch without a bias (a conv whose bias ONNX left out, beside one that has it)
        _rule("h-sum-conv-bias1", _SAME, _SAME, summed, same_size, example, _EXAMPLE_VARS, biases=("b1",)),
        _rule("h-sum-conv-bias-enlarge", {"padding": HALF.format("w1"), "strides": "?s"},
              {"padding": HALF.format("w2"), "strides": "?s"}, enlarged, fits,
              {"x": [1, 3, 7, 6], "w1": [4, 3, 3, 5], "w2": [4, 3, 1, 3]}, {"s": [1, 2]}),
    ]


def _rule(id_, attrs1, attrs2, summed_weights, constraints, example, example_vars, biases=("b1", "b2")) -> dict:
    """(conv[attrs1](x, w1) + b1) + (conv[attrs2](x, w2) [+ b2]) => conv[attrs1](x, w) + (b1 [+ b2]), where
    `summed_weights` computes w."""
    source = [node("c1", "conv2d", ["x", "w1"], **attrs1), node("a1", "add", ["c1", "b1"]),
              node("c2", "conv2d", ["x", "w2"], **attrs2)]
    target = summed_weights + [node("c", "conv2d", ["x", "w"], **attrs1)]
    if len(biases) == 2:
        source += [node("a2", "add", ["c2", "b2"]), node("s", "add", ["a1", "a2"])]
        target += [node("b", "add", ["b1", "b2"]), node("t", "add", ["c", "b"])]
    else:
        source += [node("s", "add", ["a1", "c2"])]
        target += [node("t", "add", ["c", "b1"])]
    return {"id": id_,
            "inputs": [{"name": "x", "kind": "any"}] + [{"name": n, "kind": "weight"} for n in ("w1", "w2", *biases)],
            "source": source, "target": target, "outputs": [["s", "t"]],
            "constraints": constraints + [c.format(b) for b in biases for c in _PER_CHANNEL],
            "example": {"inputs": example | dict.fromkeys(biases, [1, 4, 1, 1]), "vars": example_vars},
            "provenance": _PROVENANCE}


def main(argv=None) -> int:
    return write_main(argv, __doc__.splitlines()[0], sum_rules, (
        "Two convs of one input, each with its bias added, summed: one conv on the summed weights, the biases summed "
        "(conv is linear in its weights; padding, strides and dilation free but shared). The generated rule "
        "conv(x, w1) + conv(x, w2) => conv(x, w1 + w2) is out of the search's reach once biases sit between "
        "(taso_relay/generator/sum_rules.py). Proved like the generated ones (taso-relay rules verify)."))


if __name__ == "__main__":
    raise SystemExit(main())
