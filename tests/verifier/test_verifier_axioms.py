"""Every axiom holds on concrete tensors, and plausible wrong axioms are caught."""
from __future__ import annotations

import pytest

from taso_relay.verifier import axioms as AX
from taso_relay.verifier.axioms import N, axiom, to_z3
from taso_relay.verifier.axioms import subpixel as SP
from taso_relay.verifier.axioms.common import ACTS, CONV_DOMAINS, sl
from taso_relay.verifier.concrete import check_axiom


@pytest.mark.parametrize("ax", AX.ALL, ids=lambda a: a.name)
def test_axiom_holds_concretely(ax):
    result = check_axiom(ax)
    assert result.passed, str(result)


@pytest.mark.parametrize("ax", AX.ALL, ids=lambda a: a.name)
def test_axiom_has_a_z3_form_with_a_pattern(ax):
    z = to_z3(ax)
    assert len(z.forms) == (2 if ax.both_ways else 1)
    for form in z.forms:
        assert form.num_patterns() == 1


def test_families_and_count():
    assert set(AX.FAMILIES) >= {"elementwise", "linear", "activation", "concat_split", "transpose",
                                "enlarge", "constants", "pool"}
    assert len(AX.ALL) >= 43


X4 = ("n", "c", "h", "w")
WRONG = [
    # merging grouped convolutions without requiring equal channels per group (TASO's first form)
    axiom("wrong_grouped_merge", "linear",
          N("conv2d", N("concat", "x1", "x2", axis=1), N("concat", "w1", "w2", axis=0), groups="?g"),
          N("concat", N("conv2d", "x1", "w1", groups="=dim(x1, 1) // dim(w1, 1)"),
            N("conv2d", "x2", "w2", groups="=dim(x2, 1) // dim(w2, 1)"), axis=1),
          shapes={"x1": ("n", "=?i * ?g1", "h", "w"), "x2": ("n", "=?i * ?g2", "h", "w"),
                  "w1": ("=?j1 * ?g1", "i", "kh", "kw"), "w2": ("=?j2 * ?g2", "i", "kh", "kw")},
          dims={"g1": (1, 2), "g2": (1, 2, 3), "i": (1, 2), "j1": (1, 2, 3, 4), "j2": (1, 2, 3, 4)},
          domains={"g": ("=?g1 + ?g2", 2, 3)}),
    # concat of kernels on axis 0 with groups > 1
    axiom("wrong_conv_concat_weight_grouped", "linear",
          N("conv2d", "x", N("concat", "w1", "w2", axis=0), groups="?g"),
          N("concat", N("conv2d", "x", "w1", groups="?g"), N("conv2d", "x", "w2", groups="?g"), axis=1),
          shapes={"x": X4, "w1": ("o", "=?c // ?g", "k", "k"), "w2": ("o", "=?c // ?g", "k", "k")},
          dims={"o": (2, 4), "c": (2, 4)}, domains={"g": (2,)}),
    # interchanging concats without the size guard
    axiom("wrong_concat_interchange", "concat_split",
          N("concat", N("concat", "a", "b", axis=1), N("concat", "c", "d", axis=1), axis=0),
          N("concat", N("concat", "a", "c", axis=0), N("concat", "b", "d", axis=0), axis=1),
          shapes={"a": ("i", "j"), "b": ("i", "j2"), "c": ("i2", "j"), "d": ("i2", "j2")}),
    axiom("wrong_relu_linear", "activation", N("relu", N("add", "a", "b")),
          N("add", N("relu", "a"), N("relu", "b")), shapes={"a": ("m", "n"), "b": ("m", "n")}),
    # concat distributing over add without equal shapes (broadcasting)
    axiom("wrong_concat_add_broadcast", "concat_split",
          N("concat", N("add", "a", "b"), N("add", "c", "d"), axis=0),
          N("add", N("concat", "a", "c", axis=0), N("concat", "b", "d", axis=0)),
          shapes={"a": ("m", "n"), "b": ("m", "n"), "c": ("m2", "n"), "d": ("m2", "n")}),
    # the enlarge rule without reducing the padding
    axiom("wrong_conv_enlarge_same_padding", "enlarge",
          N("conv2d", "x", N("enlarge", "w", kernel=(3, 3)), padding="?p"),
          N("conv2d", "x", "w", padding="?p"),
          shapes={"x": ("n", "c", "h", "w"), "w": ("o", "c", 1, 1)}, domains={"p": ((1, 1, 1, 1), (0, 0, 0, 0))}),
    # slices commute with a conv's output channels only without groups
    axiom("wrong_slice_conv_grouped", "concat_split",
          sl(N("conv2d", "x", "w", activation="?a", groups=2), axis=1),
          N("conv2d", "x", sl("w", axis=0), activation="?a", groups=2),
          shapes={"x": ("n", 4, "h", "w"), "w": (4, 2, "k", "k")},
          domains={"a": ACTS, "b": (0, 1, 2), "e": (1, 2, 3, 4)}),
    # average pooling with padding that is not counted is not the averaging conv
    axiom("wrong_avg_pool_as_conv", "pool",
          N("avg_pool2d", "x", kernel=(3, 3), padding=(1, 1, 1, 1), count_include_pad=False),
          N("conv2d", "x", N("constant", kind="avg_kernel", shape="=(dim(x, 1), 1, 3, 3)"),
            padding=(1, 1, 1, 1), groups="=dim(x, 1)"),
          shapes={"x": X4}),
    # a factor comes out of a depthwise conv only when the image is 1x1 (one tap per channel)
    axiom("wrong_depthwise_mul_any_image", "linear",
          N("conv2d", N("mul", "x", "y"), "w", groups="?g", padding=(1, 1, 1, 1)),
          N("mul", "y", N("conv2d", "x", "w", groups="?g", padding=(1, 1, 1, 1))),
          guard=["shape(x) == shape(y)", "?g == dim(x, 1)", "dim(w, 0) == dim(x, 1)"],
          shapes={"x": ("n", "c", "h", "w"), "y": ("n", "c", "h", "w"), "w": ("c", 1, 3, 3)},
          dims={"h": (2, 3), "w": (2, 3)}, domains={"g": ("=?c",)}),
    axiom("wrong_transpose_compose", "transpose",
          N("transpose", N("transpose", "x", perm="?p"), perm="?q"),
          N("transpose", "x", perm="=(?q[?p[0]], ?q[?p[1]], ?q[?p[2]])"),
          shapes={"x": ("a", "b", "c")}, dims={"a": (2,), "b": (3,), "c": (4,)},
          domains={"p": ((1, 2, 0), (2, 0, 1)), "q": ((0, 2, 1), (1, 2, 0))}),
    # batch norm through the NHWC-to-NCHW transpose, normalising the NHWC tensor over W instead of C
    axiom("wrong_bn_nhwc_axis", "norm",
          N("batch_norm", N("transpose", "y", perm=(0, 3, 1, 2)), "g", "b", "m", "v", axis=1, epsilon="?e"),
          N("transpose", N("batch_norm", "y", "g", "b", "m", "v", axis=2, epsilon="?e"), perm=(0, 3, 1, 2)),
          shapes={"y": ("n", "h", "c", "c"), **{p: ("c",) for p in "gbmv"}}, dims={"c": (2, 3)},
          domains={"e": (1e-5,)}),
    # an identity kernel scaled by a batch norm of ones read as scaling the input by gamma / sqrt(var + eps):
    # the batch norm's beta and mean are dropped
    axiom("wrong_scaled_identity_kernel_no_shift", "norm",
          N("conv2d", "x", N("mul", N("constant", kind="identity_conv", shape="=(dim(x, 1), dim(x, 1), 3, 3)"),
                              N("batch_norm", N("constant", kind="ones", shape="=(dim(x, 1), dim(x, 1), 3, 3)"),
                                "g", "b", "m", "v", axis=0, epsilon="?e")), padding=(1, 1, 1, 1)),
          N("mul", "x", N("batch_norm", N("constant", kind="ones", shape="=(1, dim(x, 1), 1, 1)"), "g",
                          N("sub", "m", "m"), N("sub", "m", "m"), "v", axis=1, epsilon="?e")),
          shapes={"x": ("n", "c", "h", "w"), **{p: ("c",) for p in "gbmv"}}, dims={"c": (1, 2, 3)},
          domains={"e": (1e-5,)}),
    # a pad folded into a conv's padding with the pad's (before, after) read as the conv's (top, left)
    axiom("wrong_conv_pad_order", "pad",
          N("conv2d", N("pad", "x", pad_width="?pw", value=0.0), "k"),
          N("conv2d", "x", "k", padding="=(?pw[4], ?pw[5], ?pw[6], ?pw[7])"),
          shapes={"x": ("n", "c", "h", "w"), "k": ("o", "c", 3, 3)}, dims={"h": (3, 4), "w": (3, 4)},
          domains={"pw": ((0, 0, 0, 0, 0, 2, 1, 0), (0, 0, 0, 0, 1, 0, 0, 1))}),
    # a pad of another value folded the same way
    axiom("wrong_conv_pad_value", "pad",
          N("conv2d", N("pad", "x", pad_width=(0, 0, 0, 0, 1, 1, 1, 1), value=1.0), "k"),
          N("conv2d", "x", "k", padding=(1, 1, 1, 1)),
          shapes={"x": ("n", "c", "h", "w"), "k": ("o", "c", 3, 3)}),
    # a transpose moving the widths of axis i to axis p[i] (the inverse permutation)
    axiom("wrong_transpose_pad", "pad",
          N("transpose", N("pad", "x", pad_width="?pw", value=0.0), perm="?p"),
          N("pad", N("transpose", "x", perm="?p"), pad_width="=(?pw[2 * ?p[?p[0]]], ?pw[2 * ?p[?p[0]] + 1], "
            "?pw[2 * ?p[?p[1]]], ?pw[2 * ?p[?p[1]] + 1], ?pw[2 * ?p[?p[2]]], ?pw[2 * ?p[?p[2]] + 1])", value=0.0),
          shapes={"x": ("a", "b", "c")}, domains={"p": ((1, 2, 0), (2, 0, 1)), "pw": ((0, 1, 2, 0, 1, 3),)}),
    # a factor per input feature moved into the weight's columns instead of its rows (square w: both type-check)
    axiom("wrong_matmul_affine_columns", "linear",
          N("matmul", N("add", N("mul", "x", "f"), "t"), "w"),
          N("add", N("matmul", "x", N("mul", "w", "f")), N("matmul", "t", "w")),
          shapes={"x": ("m", "k"), "w": ("k", "k"), "f": (1, "k"), "t": (1, "k")}, dims={"k": (2, 3)}),
    # a transposed conv's kernels scaled per output channel along axis 0, as a conv2d's are (their in-channels)
    axiom("wrong_conv_transpose_factor_axis", "norm",
          N("mul", N("conv2d_transpose", "x", "w", strides=(2, 2)), "f"),
          N("conv2d_transpose", "x", N("transpose", N("mul", N("transpose", "w", perm=(1, 0, 2, 3)), "f"),
                                       perm=(1, 0, 2, 3)), strides=(2, 2)),
          shapes={"x": ("n", "c", "h", "w"), "w": ("c", "c", 3, 3), "f": (1, "c", 1, 1)}, dims={"c": (2, 3)}),
    # the same factor on a grouped transposed conv, whose kernels hold C_out / groups channels
    axiom("wrong_conv_transpose_factor_groups", "norm",
          N("mul", N("conv2d_transpose", "x", "w", groups=2), "f"),
          N("conv2d_transpose", "x", N("mul", "w", N("strided_slice", "f", axes=(1,), begin=(0,), end=(2,),
                                                     strides=(1,))), groups=2),
          shapes={"x": ("n", 4, "h", "w"), "w": (4, 2, 3, 3), "f": (1, 4, 1, 1)}),
    # the sub-pixel conv's phases interleaved with the row and column phases swapped
    axiom("wrong_subpixel_phase_order", "subpixel", N("conv2d_transpose", "x", "w", **SP.CONV_T),
          N("reshape", N("transpose", N("reshape", N("conv2d", "x", N("subpixel_kernel", "w", **SP.KERNEL_ATTRS),
                                                     **SP.CONV_ATTRS), shape=SP.PHASES), perm=(0, 1, 4, 3, 5, 2)),
            shape=SP.SHUFFLED),
          guard=SP.GUARD + SP.WHOLE, shapes={"x": X4, "w": ("c", "o", 4, 4)},
          domains={"s": ((2, 2),), "p": ((1, 1, 1, 1),), "op": ((0, 0),)}),
    # its taps gathered for the padding after the data instead of before (asymmetric padding)
    axiom("wrong_subpixel_padding_side", "subpixel", N("conv2d_transpose", "x", "w", **SP.CONV_T),
          SP.shuffled(kernel=N("subpixel_kernel", "w", strides="?s", padding="=(?p[2], ?p[3])")),
          guard=SP.GUARD + SP.WHOLE, shapes={"x": X4, "w": ("c", "o", 4, 4)},
          domains={"s": ((2, 2),), "p": ((1, 1, 2, 2),), "op": ((1, 1),)}),
]


@pytest.mark.parametrize("ax", WRONG, ids=lambda a: a.name)
def test_wrong_axiom_fails_its_concrete_check(ax):
    result = check_axiom(ax, trials=400, min_valid=1)
    assert not result.passed and result.failures, str(result)


def test_conv_domains_cover_strides_groups_and_kernels():
    assert {1, 2} <= {s[0] for s in CONV_DOMAINS["s"]}
    assert set(CONV_DOMAINS["g"]) == {1, 2}
