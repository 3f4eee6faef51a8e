"""Hand-written first-phase rules that fold an inference batch norm into the conv before it.

TASO's operator set has no batch norm, so its generator cannot find these. The
fold is written with batch norms over constants (ones and zeros), which
FoldConstant evaluates: the conv's kernels scaled per output channel, and a
per-channel shift. Proved by the axioms norm/bn_affine(_bias) and
norm/conv_scale_weights (norm/conv_transpose_channel_factor for a transposed
conv: ConvTranspose2d + BatchNorm2d of decoders). A constant factor per output channel after a conv
(timm's layer scale, `x * gamma` with gamma (C, 1, 1) or (1, C, 1, 1)) folds
the same way, into the kernels and the bias (axioms norm/conv_channel_factor). A batch norm over the
features of a matmul's output (BatchNorm1d after a Linear; LeViT's, after the rows are flattened) folds
into the weight's columns (axioms norm/bn_affine_last, norm/bn_reshape_rows, linear/matmul_scale_columns); one over
the features a matmul reads (BatchNorm1d before a Linear) into the weight's rows and a shift row
(linear/matmul_affine_rows):

    python -m taso_relay.generator.norm_rules --out rules/handwritten_norm.json
    taso-relay rules verify rules/handwritten_norm.json
"""
from __future__ import annotations

from .handwritten import node as _node, write_main

_CONV = {"strides": "?s", "padding": "?p", "dilation": "?d", "groups": "?g"}
BN = ["gamma", "beta", "mean", "var"]  # a batch norm's parameters, as every rule here names them
_PROOF = "axioms norm/bn_affine or norm/bn_affine_bias, then norm/conv_scale_weights"


def shift_nodes(channels: str) -> list[dict]:
    """Nodes computing `shift`, a batch norm's beta - mean * scale per channel, (1, C, 1, 1) for C =
    `channels`: the batch norm of zeros, weights only (FoldConstant computes it)."""
    return [_node("ones_c", "constant", [], kind="ones", shape=f"=(1, {channels}, 1, 1)"),
            _node("zeros_c", "sub", ["ones_c", "ones_c"]),
            _node("shift", "batch_norm", ["zeros_c"] + BN, axis=1, epsilon="?e")]


_CONV_T = {"strides": "?s", "padding": "?p", "output_padding": "?op", "dilation": "?d", "groups": 1}
# per conv: its attributes, an example's kernel shape and variables, and the axiom that moves the scale into it
_CONVS = {
    "conv2d": (_CONV, [6, 2, 3, 3], {"s": [2, 2], "p": [1, 1, 1, 1], "d": [1, 1], "g": 2}, "conv_scale_weights"),
    "conv2d_transpose": (_CONV_T, [4, 6, 4, 4], {"s": [2, 2], "p": [1, 1, 1, 1], "op": [1, 0], "d": [1, 1]},
                         "conv_transpose_channel_factor"),
    "grouped": ({**_CONV_T, "groups": "?g"}, [4, 3, 4, 4], {"s": [2, 2], "p": [1, 1, 1, 1], "op": [0, 0],
                                                          "d": [1, 1], "g": 2}, "conv_transpose_group_factor"),
}


def _scaled_kernel(conv: str) -> tuple[list[dict], str]:
    """Nodes ending in `w_scaled`, the kernels times gamma / sqrt(var + eps) per output channel (a batch norm of
    ones with zero mean and shift), and the output channels' count. A conv's kernels hold them on axis 0; a
    transposed conv's on axis 1, where a (1, C, 1, 1) scale broadcasts as on its output; a grouped one's C / g per
    group: kernels (C_in / g per group) reshaped to (g, C_in / g, C / g, kh, kw), the scale to (g, 1, C / g, 1, 1)."""
    channels = {"conv2d": "dim(w, 0)", "conv2d_transpose": "dim(w, 1)", "grouped": "dim(w, 1) * ?g"}[conv]
    axis = 0 if conv == "conv2d" else 1
    shape = f"=({channels}, 1, 1, 1)" if axis == 0 else f"=(1, {channels}, 1, 1)"
    nodes = [_node("zero", "sub", ["mean", "mean"]),
             _node("ones_o", "constant", [], kind="ones", shape=shape),
             _node("scale", "batch_norm", ["ones_o", "gamma", "zero", "zero", "var"], axis=axis, epsilon="?e")]
    if conv != "grouped":
        return nodes + [_node("w_scaled", "mul", ["w", "scale"])], channels
    return nodes + [
        _node("scale_g", "reshape", ["scale"], shape="=(?g, 1, dim(w, 1), 1, 1)"),
        _node("w_g", "reshape", ["w"], shape="=(?g, dim(w, 0) // ?g, dim(w, 1), dim(w, 2), dim(w, 3))"),
        _node("w_g_scaled", "mul", ["w_g", "scale_g"]),
        _node("w_scaled", "reshape", ["w_g_scaled"], shape="=(dim(w, 0), dim(w, 1), dim(w, 2), dim(w, 3))"),
    ], channels


def _fold(id_, with_bias: bool, doc: str, conv: str = "conv2d") -> dict:
    """batch_norm(conv(x, w) [+ bias]) => conv(x, w * scale) + shift, scale and shift of the weights only; `conv`
    is conv2d, conv2d_transpose (one group) or grouped (conv2d_transpose with groups > 1)."""
    attrs, kernel, example_vars, axiom = _CONVS[conv]
    op = "conv2d" if conv == "conv2d" else "conv2d_transpose"
    source = [_node("c", op, ["x", "w"], **attrs)]
    if with_bias:
        source.append(_node("a", "add", ["c", "bias"]))
    source.append(_node("bn", "batch_norm", [source[-1]["id"]] + BN, axis=1, epsilon="?e"))
    target, channels = _scaled_kernel(conv)
    target.append(_node("conv", op, ["x", "w_scaled"], **attrs))
    if with_bias:  # the bias goes through the batch norm
        target.append(_node("shift", "batch_norm", ["bias"] + BN, axis=1, epsilon="?e"))
    else:
        target += shift_nodes(channels)
    target.append(_node("out", "add", ["conv", "shift"]))
    inputs = [("x", "any"), ("w", "weight")] + [(n, "weight") for n in BN] + ([("bias", "weight")] * with_bias)
    shapes = {"x": [1, 4, 5, 5] if conv == "grouped" else [1, 4, 8, 8], "w": kernel, **{n: [6] for n in BN}}
    if with_bias:
        shapes["bias"] = [1, 6, 1, 1]
    return {"id": id_, "inputs": [{"name": n, "kind": k} for n, k in inputs], "source": source, "target": target,
            "outputs": [["bn", "out"]],
            "constraints": ["?g > 1"] * (conv == "grouped") + [f"shape(bias) == (1, {channels}, 1, 1)"] * with_bias,
            "example": {"inputs": shapes, "vars": {**example_vars, "e": 1e-05}},
            "provenance": {"generator": "handwritten", "family": "norm", "proof": _PROOF.replace(
                "conv_scale_weights", axiom), "doc": doc, "phase": "first"}}


_FACTORS = {4: "(1, dim(w, 0), 1, 1)", 3: "(dim(w, 0), 1, 1)"}  # a factor per output channel, by its rank
_OUT_IN_SWAPPED = [1, 0, 2, 3]  # a kernel's out-channels and in-channels swapped


def _factor(id_, rank: int, with_bias: bool) -> dict:
    """(conv(x, w) [+ bias]) * f => conv(x, w scaled by f per out-channel) [+ bias * f], for a weight f with one
    value per output channel: timm's layer scale, (1, C, 1, 1) or (C, 1, 1). The kernel is scaled with its
    out-channels moved to axis 1, where f's channels broadcast as on the conv's output (axioms
    norm/conv_channel_factor3 and 4)."""
    source = [_node("c", "conv2d", ["x", "w"], **_CONV)]
    if with_bias:
        source.append(_node("a", "add", ["c", "bias"]))
    source.append(_node("m", "mul", [source[-1]["id"], "f"]))
    target = [_node("w_t", "transpose", ["w"], perm=_OUT_IN_SWAPPED), _node("w_tf", "mul", ["w_t", "f"]),
              _node("w_f", "transpose", ["w_tf"], perm=_OUT_IN_SWAPPED), _node("conv", "conv2d", ["x", "w_f"], **_CONV)]
    if with_bias:
        target += [_node("bias_f", "mul", ["bias", "f"]), _node("out", "add", ["conv", "bias_f"])]
    inputs = [("x", "any"), ("w", "weight"), ("f", "weight")] + [("bias", "weight")] * with_bias
    shapes = {"x": [1, 4, 8, 8], "w": [6, 2, 3, 3], "f": [1, 6, 1, 1][4 - rank:]}
    if with_bias:
        shapes["bias"] = [1, 6, 1, 1]
    return {"id": id_, "inputs": [{"name": n, "kind": k} for n, k in inputs], "source": source, "target": target,
            "outputs": [["m", "out" if with_bias else "conv"]],
            "constraints": [f"shape(f) == {_FACTORS[rank]}"]
                           + ["shape(bias) == (1, dim(w, 0), 1, 1)"] * with_bias,
            "example": {"inputs": shapes, "vars": {"s": [2, 2], "p": [1, 1, 1, 1], "d": [1, 1], "g": 2}},
            "provenance": {"generator": "handwritten", "family": "norm", "proof": "axiom norm/conv_channel_factor",
                           "doc": "A constant factor per output channel after a conv (a layer scale) folds into "
                                  "the conv's kernels" + (" and bias." if with_bias else "."),
                           "phase": "first"}}


def _row_fold_target(prefix: list[dict], with_bias: bool) -> list[dict]:
    """matmul(x, w * scale) + shift (or + bn(bias)), scale and shift (1, C) rows of the weights only."""
    target = prefix + [
        _node("zero", "sub", ["mean", "mean"]),
        _node("ones_r", "constant", [], kind="ones", shape="=(1, dim(w, 1))"),
        _node("scale", "batch_norm", ["ones_r", "gamma", "zero", "zero", "var"], axis=1, epsilon="?e"),
        _node("w_scaled", "mul", ["w", "scale"]),
        _node("mm", "matmul", ["x", "w_scaled"]),
    ]
    if with_bias:  # the bias goes through the batch norm
        target.append(_node("shift", "batch_norm", ["bias"] + BN, axis=0, epsilon="?e"))
    else:
        target += [_node("ones_s", "constant", [], kind="ones", shape="=(1, dim(w, 1))"),
                   _node("zeros_s", "sub", ["ones_s", "ones_s"]),
                   _node("shift", "batch_norm", ["zeros_s"] + BN, axis=1, epsilon="?e")]
    return target + [_node("out", "add", ["mm", "shift"])]


def _matmul_fold(id_, rank: int, with_bias: bool, rows: bool = False) -> dict:
    """batch_norm over the last axis of matmul(x, w) [+ bias] => matmul(x, w * scale) + shift: BatchNorm1d
    after a Linear. With `rows`, the batch norm is of the (B, N, C) product flattened to (B * N, C) rows and
    the fold happens before the reshape (LeViT's Linear + BatchNorm1d)."""
    source = [_node("c", "matmul", ["x", "w"])]
    if with_bias:
        source.append(_node("a", "add", ["c", "bias"]))
    if rows:
        source.append(_node("r", "reshape", [source[-1]["id"]], shape="?sh"))
    source.append(_node("bn", "batch_norm", [source[-1]["id"]] + BN, axis=1 if rows else rank - 1, epsilon="?e"))
    target = _row_fold_target([], with_bias)
    if rows:
        target.append(_node("rows", "reshape", ["out"], shape="?sh"))
    inputs = [("x", "any"), ("w", "weight")] + [(n, "weight") for n in BN] + ([("bias", "weight")] * with_bias)
    shapes = {"x": [2, 6, 4][3 - rank:], "w": [4, 5], **{n: [5] for n in BN}}
    if with_bias:
        shapes["bias"] = [5]
    constraints = [f"rank(x) == {rank}", "rank(w) == 2"] + ["shape(bias) == (dim(w, 1),)"] * with_bias
    if rows:
        constraints += ["len(?sh) == 2", "?sh[1] == dim(w, 1)"]
    vars_ = {"e": 1e-05, **({"sh": [12, 5]} if rows else {})}
    proof = ("axioms norm/bn_reshape_rows, " if rows else "axioms ") + \
        f"norm/bn_affine_last{'_bias' * with_bias}{rank}, then linear/matmul_scale_columns{rank}"
    return {"id": id_, "inputs": [{"name": n, "kind": k} for n, k in inputs], "source": source, "target": target,
            "outputs": [["bn", "rows" if rows else "out"]], "constraints": constraints,
            "example": {"inputs": shapes, "vars": vars_},
            "provenance": {"generator": "handwritten", "family": "norm", "proof": proof,
                           "doc": "Inference batch norm over the features of a matmul's output "
                                  + ("(its rows flattened first) " if rows else "")
                                  + "folds into the weight's columns and a shift"
                                  + (" (the bias goes through it)." if with_bias else "."),
                           "phase": "first"}}


def _matmul_pre_fold(id_, rank: int) -> dict:
    """matmul(batch_norm over the last axis of x, w) => matmul(x, w * scale per row) + shift @ w: BatchNorm1d
    before a Linear (LeViT's and RepViT's classifier heads, MLPs on tabular features). The scale, a (1, K) row,
    is transposed to the (K, 1) column that scales the weight's rows; shift @ w is a (1, N) row of weights only."""
    target = [
        _node("zero", "sub", ["mean", "mean"]),
        _node("ones_r", "constant", [], kind="ones", shape="=(1, dim(w, 0))"),
        _node("scale", "batch_norm", ["ones_r", "gamma", "zero", "zero", "var"], axis=1, epsilon="?e"),
        _node("scale_c", "transpose", ["scale"], perm=[1, 0]),
        _node("w_scaled", "mul", ["w", "scale_c"]),
        _node("mm", "matmul", ["x", "w_scaled"]),
        _node("ones_s", "constant", [], kind="ones", shape="=(1, dim(w, 0))"),
        _node("zeros_s", "sub", ["ones_s", "ones_s"]),
        _node("shift", "batch_norm", ["zeros_s"] + BN, axis=1, epsilon="?e"),
        _node("shift_w", "matmul", ["shift", "w"]),
        _node("out", "add", ["mm", "shift_w"]),
    ]
    inputs = [("x", "any"), ("w", "weight")] + [(n, "weight") for n in BN]
    return {"id": id_, "inputs": [{"name": n, "kind": k} for n, k in inputs],
            "source": [_node("bn", "batch_norm", ["x"] + BN, axis=rank - 1, epsilon="?e"),
                       _node("c", "matmul", ["bn", "w"])],
            "target": target, "outputs": [["c", "out"]],
            "constraints": [f"rank(x) == {rank}", "rank(w) == 2"],
            "example": {"inputs": {"x": [2, 6, 4][3 - rank:], "w": [4, 5], **{n: [4] for n in BN}}, "vars": {"e": 1e-05}},
            "provenance": {"generator": "handwritten", "family": "norm",
                           "proof": f"axioms norm/bn_affine_last{rank}, then linear/matmul_affine_rows{rank}",
                           "doc": "Inference batch norm over the features a matmul reads folds into the weight's "
                                  "rows and a shift row times the weight.",
                           "phase": "first"}}


def norm_rules() -> list[dict]:
    return [
        _fold("h-bn-conv", False, "Inference batch norm after a conv folds into the conv's kernels and a "
                                  "per-channel shift."),
        _fold("h-bn-conv-bias", True, "The same with a conv bias (ONNX Conv with B) between: the bias goes "
                                      "through the batch norm."),
        _fold("h-bn-convT", False, "Inference batch norm after a transposed conv (one group) folds into its "
                                   "kernels and a per-channel shift: ConvTranspose2d + BatchNorm2d of decoders.",
              "conv2d_transpose"),
        _fold("h-bn-convT-bias", True, "The same with the transposed conv's bias between: the bias goes through "
                                       "the batch norm.", "conv2d_transpose"),
        _fold("h-bn-convT-grouped", False, "The same for a grouped transposed conv (depthwise too): each group's "
                                           "kernels scaled by its own output channels' scale.", "grouped"),
        _fold("h-bn-convT-grouped-bias", True, "The same for a grouped transposed conv (depthwise too): each "
                                               "group's kernels scaled by its own output channels' scale, the bias "
                                               "through the batch norm.", "grouped"),
        *(_factor(f"h-factor-conv{'-bias' * b}{r}", r, b) for r in (4, 3) for b in (True, False)),
        *(_matmul_fold(f"h-bn-matmul{'-bias' * b}{r}", r, b) for r in (2, 3) for b in (False, True)),
        _matmul_fold("h-bn-rows-matmul", 3, False, rows=True),
        *(_matmul_pre_fold(f"h-bn-before-matmul{r}", r) for r in (2, 3)),
    ]


def main(argv=None) -> int:
    return write_main(argv, __doc__.splitlines()[0], norm_rules, (
        "Rules TASO's generator cannot find (batch norm is outside its operator set; a per-channel factor "
        "after a conv folded into it; "
        "taso_relay/generator/norm_rules.py); proved like the generated ones (taso-relay rules verify)."))


if __name__ == "__main__":
    raise SystemExit(main())
