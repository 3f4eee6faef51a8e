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
strides, dilation and groups free but shared (MobileOne's branches are
depthwise); and, for RepVGG's 3x3 and 1x1 branches, with the smaller kernel
zero-padded to the larger one's size (both "same"). A fused activation is left
out: the sum of two ReLUs is not the ReLU of the sum.

A block's identity branch joins the conv too, as an identity kernel (one 1 at
the centre tap, on the channel each output channel reads; any groups): the
input itself (RepViT's `conv(x) + conv1(x) + x`) or its batch norm (RepVGG's and
MobileOne's), whose scale multiplies the identity kernel and whose shift joins
the bias. Only for "same" convs of stride 1 with as many outputs as inputs:

    x + (conv(x, w) + b)             =>  conv(x, w + I) + b
    bn(x) + (conv(x, w) + b)         =>  conv(x, w + I * scale) + (b + shift)

and a branch subtracted (FastViT's RepMixer, x + layer_scale * (mixer(x) - bn(x)),
whose layer scale then folds into the conv by norm_rules' h-factor rules) likewise:

    (conv(x, w) + b) - bn(x)         =>  conv(x, w - I * scale) + (b - shift)

Three more add constants in turn first, (x + c1) + c2 => x + (c1 + c2), for a
scalar c2 or one shaped as c1: timm's MobileOne starts its sum of branches from
the number 0, which hides the first branch's bias from the rules above; and
where that first branch has no bias, (y + c1) + (z + c2) => y + (z + (c2 + c1))
for a scalar c1.

After these, a block exported in its training-time form computes what its
re-parameterized form computes, with one conv. All are first-phase rules
(search/first.py, applied in sweeps before the search): they only remove work.

    python -m taso_relay.generator.sum_rules --out rules/handwritten_sum.json
    taso-relay rules verify rules/handwritten_sum.json
"""
from __future__ import annotations

from .handwritten import node, write_main
from .merge_rules import HALF, SMALLER_KERNEL_FITS
from .norm_rules import BN, shift_nodes

_SAME = {"padding": "?p", "strides": "?s", "dilation": "?d", "groups": "?g"}
_WEIGHTS_AGREE = ["rank(x) == 4", "rank(w1) == 4", "rank(w2) == 4", "dim(w2, 0) == dim(w1, 0)",
                  "dim(w2, 1) == dim(w1, 1)", "dim(w2, 2) == dim(w1, 2)", "dim(w2, 3) == dim(w1, 3)"]
# a bias per output channel, (1, C, 1, 1), as TVM's importer and the batch-norm fold both make it
_PER_CHANNEL = ["rank({0}) == 4", "dim({0}, 0) == 1", "dim({0}, 1) == dim(w1, 0)", "dim({0}, 2) == 1",
                "dim({0}, 3) == 1"]
_EXAMPLE_VARS = {"p": [1, 0, 1, 2], "s": [1, 2], "d": [1, 1], "g": 2}
_PROVENANCE = {"generator": "handwritten", "family": "sum-conv", "phase": "first"}
_CONSTANTS_PROVENANCE = {"generator": "handwritten", "family": "add-consts", "phase": "first"}


def sum_rules() -> list[dict]:
    summed = [node("w", "add", ["w1", "w2"])]
    example = {"x": [1, 4, 7, 6], "w1": [6, 2, 3, 2], "w2": [6, 2, 3, 2]}
    # RepVGG's 3x3 and 1x1 branches: the smaller kernel zero-padded to the larger one's size
    enlarged = [node("e", "enlarge", ["w2"], kernel="=(dim(w1, 2), dim(w1, 3))"), node("w", "add", ["w1", "e"])]
    fits = ["rank(x) == 4", "rank(w1) == 4", "rank(w2) == 4", "dim(w2, 0) == dim(w1, 0)",
            "dim(w2, 1) == dim(w1, 1)"] + SMALLER_KERNEL_FITS
    return [
        _rule("h-sum-conv-bias", _SAME, _SAME, summed, _WEIGHTS_AGREE, example, _EXAMPLE_VARS),
        # one branch without a bias (a conv whose bias ONNX left out, beside one that has it)
        _rule("h-sum-conv-bias1", _SAME, _SAME, summed, _WEIGHTS_AGREE, example, _EXAMPLE_VARS, biases=("b1",)),
        _rule("h-sum-conv-bias-enlarge", {"padding": HALF.format("w1"), "strides": "?s", "groups": "?g"},
              {"padding": HALF.format("w2"), "strides": "?s", "groups": "?g"}, enlarged, fits,
              {"x": [1, 4, 7, 6], "w1": [6, 2, 3, 5], "w2": [6, 2, 1, 3]}, {"s": [1, 2], "g": 2}),
        _identity_rule("h-sum-conv-identity", batch_norm=False),
        _identity_rule("h-sum-conv-bn-identity", batch_norm=True),
        # FastViT's RepMixer subtracts a batch norm of its input from its mixer's branches: x + s * (mixer(x) - bn(x))
        _identity_rule("h-sub-conv-identity", batch_norm=False, subtract=True),
        _identity_rule("h-sub-conv-bn-identity", batch_norm=True, subtract=True),
        # timm's MobileOne starts its sum of branches from the number 0: (conv(x, w) + b) + 0. Two constants
        # added one after the other are added first (folded), so the sum rules see conv + bias again
        _constants_rule("h-add-consts-scalar", "rank(c2) == 0", {"c1": [1, 4, 1, 1], "c2": []}),
        _constants_rule("h-add-consts-same", "shape(c2) == shape(c1)", {"c1": [1, 4, 1, 1], "c2": [1, 4, 1, 1]}),
        # or from a branch without a bias (FastViT's 1x1 MobileOne blocks: (bn(x) + 0) + (conv(x) + b)): the number
        # joins the other branch's constant
        {"id": "h-add-consts-across",
         "inputs": [{"name": "y", "kind": "any"}, {"name": "z", "kind": "any"}, {"name": "c1", "kind": "weight"},
                    {"name": "c2", "kind": "weight"}],
         "source": [node("a1", "add", ["y", "c1"]), node("a2", "add", ["z", "c2"]), node("s", "add", ["a1", "a2"])],
         "target": [node("c", "add", ["c2", "c1"]), node("a", "add", ["z", "c"]), node("t", "add", ["y", "a"])],
         "outputs": [["s", "t"]], "constraints": ["rank(c1) == 0"],
         "example": {"inputs": {"y": [1, 4, 3, 3], "z": [1, 4, 3, 3], "c1": [], "c2": [1, 4, 1, 1]}},
         "provenance": _CONSTANTS_PROVENANCE},
    ]


def _constants_rule(id_, constraint: str, example: dict) -> dict:
    """(x + c1) + c2 => x + (c1 + c2) for constants c1, c2: a scalar c2 or one shaped as c1, so the folded
    constant is no larger than c1."""
    return {"id": id_, "inputs": [{"name": "x", "kind": "any"}, {"name": "c1", "kind": "weight"},
                                  {"name": "c2", "kind": "weight"}],
            "source": [node("a1", "add", ["x", "c1"]), node("s", "add", ["a1", "c2"])],
            "target": [node("c", "add", ["c1", "c2"]), node("t", "add", ["x", "c"])],
            "outputs": [["s", "t"]], "constraints": [constraint],
            "example": {"inputs": {"x": [1, 4, 3, 3]} | example}, "provenance": _CONSTANTS_PROVENANCE}


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
    bias_shape = [1, example["w1"][0], 1, 1]
    return {"id": id_,
            "inputs": [{"name": "x", "kind": "any"}] + [{"name": n, "kind": "weight"} for n in ("w1", "w2", *biases)],
            "source": source, "target": target, "outputs": [["s", "t"]],
            "constraints": constraints + [c.format(b) for b in biases for c in _PER_CHANNEL],
            "example": {"inputs": example | dict.fromkeys(biases, bias_shape), "vars": example_vars},
            "provenance": _PROVENANCE}


def _identity_rule(id_, batch_norm: bool, subtract: bool = False) -> dict:
    """x + (conv(x, w1) + b1) => conv(x, w1 + I) + b1, or with bn(x) for x: I scaled by the batch norm's
    gamma / sqrt(var + eps) per output channel, its shift beta - mean * scale added to the bias (the batch
    norms of constants that say so are folded when TVM compiles, as in norm_rules). With `subtract`, the
    branch is subtracted from the conv's, (conv(x, w1) + b1) - x, and so are its kernel and shift."""
    join = "sub" if subtract else "add"
    conv = {"padding": HALF.format("w1"), "groups": "?g"}  # strides and dilation 1: the default
    source = [node("c1", "conv2d", ["x", "w1"], **conv), node("a1", "add", ["c1", "b1"])]
    kernel_shape = "=(dim(w1, 0), dim(w1, 1), dim(w1, 2), dim(w1, 3))"
    target = [node("i", "constant", [], kind="identity_conv", shape=kernel_shape)]
    if batch_norm:
        source += [node("bn", "batch_norm", ["x"] + BN, axis=1, epsilon="?e"),
                   node("s", "sub", ["a1", "bn"]) if subtract else node("s", "add", ["bn", "a1"])]
        target += [node("zero", "sub", ["mean", "mean"]),
                   # the scale over the whole kernel (a batch norm over axis 0 of ones of its shape): the product
                   # keeps the kernel's shape, which the proof needs
                   node("ones_w", "constant", [], kind="ones", shape=kernel_shape),
                   node("scale", "batch_norm", ["ones_w", "gamma", "zero", "zero", "var"], axis=0, epsilon="?e"),
                   node("si", "mul", ["i", "scale"]), node("w", join, ["w1", "si"]),
                   *shift_nodes("dim(w1, 0)"), node("b", join, ["b1", "shift"])]
    else:
        source += [node("s", "sub", ["a1", "x"]) if subtract else node("s", "add", ["x", "a1"])]
        target += [node("w", join, ["w1", "i"])]
    target += [node("c", "conv2d", ["x", "w"], **conv), node("t", "add", ["c", "b" if batch_norm else "b1"])]
    weights = ["w1", "b1"] + (BN if batch_norm else [])
    shapes = {"x": [1, 4, 5, 6], "w1": [4, 2, 3, 1], "b1": [1, 4, 1, 1]} | dict.fromkeys(BN * batch_norm, [4])
    return {"id": id_,
            "inputs": [{"name": "x", "kind": "any"}] + [{"name": n, "kind": "weight"} for n in weights],
            "source": source, "target": target, "outputs": [["s", "t"]],
            # an odd kernel, also written as 2 * (k // 2) + 1: Z3's arithmetic then sees that its "same"
            # padding k // 2 is (k - 1) / 2 (from "k % 2 == 1" alone it did not, and the proof timed out)
            "constraints": ["rank(x) == 4", "rank(w1) == 4", "dim(w1, 0) == dim(x, 1)"]
                           + [f"dim(w1, {a}) {c}" for a in (2, 3)
                              for c in ("% 2 == 1", f"== 2 * (dim(w1, {a}) // 2) + 1")]
                           + [c.format("b1") for c in _PER_CHANNEL],
            "example": {"inputs": shapes, "vars": {"g": 2} | ({"e": 1e-05} if batch_norm else {})},
            "provenance": _PROVENANCE}


def main(argv=None) -> int:
    return write_main(argv, __doc__.splitlines()[0], sum_rules, (
        "Two convs of one input, each with its bias added, summed: one conv on the summed weights, the biases summed "
        "(conv is linear in its weights; padding, strides, dilation and groups free but shared); a block's identity "
        "branch (the input, or its batch norm) joined as an identity kernel, or subtracted from it (FastViT's "
        "RepMixer); constants added one after the other "
        "added first. Together they turn RepVGG's, MobileOne's and RepViT's training-time blocks into their one-conv "
        "form; first-phase rules: they only remove work (taso_relay/generator/sum_rules.py). Proved like the "
        "generated ones (taso-relay rules verify)."))


if __name__ == "__main__":
    raise SystemExit(main())
