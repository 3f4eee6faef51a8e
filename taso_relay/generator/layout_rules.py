"""Hand-written rules that move convolutions to NHWC and carry the transposes away.

TASO's generator never changes a layout, and TVM's MetaSchedule tunes NHWC convs
better on x86 (a 3x3 conv measured 1.07x faster, issue #6). One conv alone to
NHWC costs two transposes; the gain comes when every conv is converted and the
transposes between them cancel. These rules are the steps of that: a conv
becomes the NHWC conv between transposes, the NHWC-to-NCHW transpose moves down
through element-wise operators, batch norms, group norms (Relax's, and PyTorch's
exported spelling), concats, channel splits and shuffles, pools, resizes, pads
(reflect and edge too), slices, softmaxes and reductions over any of C, H and
W (a head's mean, an instance norm's variance, a layer norm over channels
written out), and meets the next conv's NCHW-to-NHWC transpose, where the
pair cancels.

A transpose that other operators still read stays for them: every rule that
consumes one also maps it (a second output), so a match is never refused
because a transpose has other users. The rules are proved like the generated
ones (`taso-relay rules verify rules/layout/nhwc.json`); they live outside the
search's rule set (search/layout.py applies them as one step a judge prices),
since a layout-blind cost model sees only the transposes.

    python -m taso_relay.generator.layout_rules --out rules/layout/nhwc.json
"""
from __future__ import annotations

from ..graph.ops.registry import get_op
from .handwritten import node as _node, write_main

TO_NCHW = (0, 3, 1, 2)  # an NHWC tensor read as NCHW
TO_NHWC = (0, 2, 3, 1)
OIHW_TO_HWIO = (2, 3, 1, 0)
CHW_TO_HWC = (1, 2, 0)  # a rank-3 per-channel weight, (C, 1, 1) => (1, 1, C)
# instance norms (ONNX InstanceNormalization: mean, variance, sqrt, div) and others' element-wise ops too
UNARY = ("relu", "sigmoid", "tanh", "silu", "gelu", "gelu_tanh", "sqrt", "rsqrt", "exp", "log", "abs", "neg", "erf")
BINARY = ("add", "mul", "sub", "div", "maximum", "minimum", "pow")  # pow: a layer norm written out squares (x - mean)
# casts of mixed precision (a float16 model's norms and softmaxes computed in float32 between casts); the dtype is a
# literal to the verifier
CASTS = ("float16", "float32")
# clip's bounds are literals to the verifier: MobileNets' relu6 and hardsigmoid's clip only
CLIPS = {"relu6": {"min": 0.0, "max": 6.0}, "clip01": {"min": 0.0, "max": 1.0}}
# reductions over any of an NCHW tensor's C, H and W: a head's spatial mean, an instance norm's variance (CycleGAN's),
# a channels-first layer norm written out (ConvNeXt's and EdgeNeXt's own code: mean over C), CBAM's channel mean and
# max, a global response norm's sum over H and W, a global max pool as ReduceMax
REDUCTIONS = ("mean", "variance", "sum", "max", "min")
REDUCE_AXES = ((1,), (2,), (3,), (1, 2), (1, 3), (2, 3), (1, 2, 3))  # as graphs store them: sorted, >= 0
SOFTMAX_AXES = (1, 2, 3)  # over channels, or a spatial softmax (keypoint heads, MobileViT-v2's over its patches)
MAX_CONCAT = 13  # concats the transpose moves through in one rule; Z3 proves the 13-input rule in 0.5-6 s, the 16-input
# one in 2.5-11 s and the 20-input one in 90 s (E-matching meets every bracketing of the concat on the way)
WIDE_CONCAT = 64  # DenseNet concatenates every earlier layer of a block (25 inputs in DenseNet-121, 49 in -201):
# wider concats than MAX_CONCAT are taken apart (_nest) and put back together in NHWC (_flatten)
MAX_SPLIT = 8  # parts of a channel split (ShuffleNet's halves; the search's merged relus, split back)
# strided slices over NCHW axes (unit strides): a channel range, H, W, or both (NASNet's shifted path)
SLICE_AXES = ((1,), (2,), (3,), (2, 3))

CONV_ATTRS = {"strides": "?s", "padding": "?p", "dilation": "?d", "groups": "?g", "activation": "?act"}
POOL_ATTRS = {"kernel": "?k", "strides": "?s", "padding": "?p", "dilation": "?d", "ceil_mode": "?c"}


def _t(id_, x, perm=TO_NCHW):
    return _node(id_, "transpose", [x], perm=list(perm))


def _rule(id_, family, inputs, source, target, outputs, example, constraints=()):
    return {"id": id_, "inputs": [{"name": n, "kind": k} for n, k in inputs], "source": source,
            "target": target, "outputs": [list(o) for o in outputs], "constraints": list(constraints),
            "example": example, "provenance": {"generator": "handwritten", "family": family}}


def _pushed(id_, family, op, attrs, operands, example, extra_inputs=(), weight_perm=None, out_attrs=None):
    """op over transposed operands (and weights) => the transpose of op over the untransposed ones.

    operands: names of the inputs that arrive through a transpose; extra_inputs: weights that do not
    (of weight_perm's rank and transposed by it in the target when it is given, else taken as they are)."""
    source = [_t(f"t{k}", x) for k, x in enumerate(operands)]
    args = [f"t{k}" for k in range(len(operands))] + list(extra_inputs)
    source.append(_node("o", op, args, **attrs))
    target = [_t(f"w{k}", w, weight_perm) for k, w in enumerate(extra_inputs)] if weight_perm else []
    new_args = list(operands) + ([f"w{k}" for k in range(len(extra_inputs))] if weight_perm else list(extra_inputs))
    target.append(_node("n", op, new_args, **(out_attrs or attrs)))
    target.append(_t("r", "n"))
    target += [_t(f"u{k}", x) for k, x in enumerate(operands)]
    outputs = [("o", "r")] + [(f"t{k}", f"u{k}") for k in range(len(operands))]
    inputs = [(x, "any") for x in operands] + [(w, "weight") for w in extra_inputs]
    constraints = [f"rank({w}) == {len(weight_perm)}" for w in extra_inputs] if weight_perm else []
    return _rule(id_, family, inputs, source, target, outputs, example, constraints)


def _nest(k: int) -> dict:
    """A concat of k > MAX_CONCAT transposed inputs => the concat of (the concat of its first MAX_CONCAT) and the rest.

    l-concat13 takes the inner one; the outer one nests again while it is still too wide. The verifier
    encodes an n-ary concat as the left fold of binary ones, which both sides are, so the proof is
    immediate at any k (where a 20-input l-concat takes 90 s)."""
    names = [f"x{i}" for i in range(k)]
    source = [_t(f"t{i}", x) for i, x in enumerate(names)]
    source.append(_node("o", "concat", [f"t{i}" for i in range(k)], axis=1))
    target = [_t(f"u{i}", x) for i, x in enumerate(names)]
    target += [_node("a", "concat", [f"u{i}" for i in range(MAX_CONCAT)], axis=1),
               _node("n", "concat", ["a"] + [f"u{i}" for i in range(MAX_CONCAT, k)], axis=1)]
    outputs = [("o", "n")] + [(f"t{i}", f"u{i}") for i in range(k)]
    return _rule(f"l-concat-nest{k}", "layout-regroup", [(x, "any") for x in names], source, target, outputs,
                 {"inputs": {x: [1, 5, 6, 1 + i % 3] for i, x in enumerate(names)}, "vars": {}})


def _flatten(inner: int, more: int) -> dict:
    """concat(concat(`inner` inputs), `more` inputs) on NHWC's channel axis => one concat of all: _nest's
    pieces back together once their transposes have moved below them (one copy of each input, not two).
    The inner concats _nest leaves are MAX_CONCAT wide, then 12 wider for each time it nested again."""
    names = [f"x{i}" for i in range(inner + more)]
    source = [_node("a", "concat", names[:inner], axis=3), _node("o", "concat", ["a"] + names[inner:], axis=3)]
    target = [_node("n", "concat", names, axis=3)]
    return _rule(f"l-concat-flatten{inner}-{more}", "layout-regroup", [(x, "any") for x in names], source, target,
                 [("o", "n")], {"inputs": {x: [1, 5, 6, 1 + i % 3] for i, x in enumerate(names)}, "vars": {}})


def nhwc_rules() -> list[dict]:
    nhwc = {"inputs": {"y": [1, 5, 6, 3]}, "vars": {}}
    rules = [
        _rule("l-conv-nhwc", "layout-conv", [("x", "any"), ("w", "weight")],
              [_node("c", "conv2d", ["x", "w"], **CONV_ATTRS)],
              [_t("xi", "x", TO_NHWC), _t("wi", "w", OIHW_TO_HWIO),
               _node("n", "conv2d", ["xi", "wi"], **CONV_ATTRS, data_layout="NHWC", kernel_layout="HWIO"),
               _t("r", "n")],
              [("c", "r")],
              {"inputs": {"x": [1, 3, 7, 6], "w": [4, 3, 3, 3]},
               "vars": {"s": [1, 1], "p": [1, 1, 1, 1], "d": [1, 1], "g": 1, "act": "relu"}}),
        _rule("l-cancel", "layout-cancel", [("y", "any")],
              [_t("a", "y"), _t("b", "a", TO_NHWC)], [_t("u", "y")], [("b", "y"), ("a", "u")], nhwc),
        _rule("l-cancel-back", "layout-cancel", [("y", "any")],
              [_t("a", "y", TO_NHWC), _t("b", "a")], [_t("u", "y", TO_NHWC)], [("b", "y"), ("a", "u")],
              {"inputs": {"y": [1, 3, 5, 6]}, "vars": {}}),
    ]
    for op in UNARY:
        rules.append(_pushed(f"l-{op}", "layout-push", op, {}, ["y"], nhwc))
    rules.append(_pushed("l-leaky_relu", "layout-push", "leaky_relu", {"alpha": "?a"}, ["y"],  # pix2pix's, YOLO's
                         {"inputs": {"y": [1, 5, 6, 3]}, "vars": {"a": 0.2}}))
    for name, bounds in CLIPS.items():
        rules.append(_pushed(f"l-{name}", "layout-push", "clip", bounds, ["y"], nhwc))
    for dtype in CASTS:
        rules.append(_pushed(f"l-cast-{dtype}", "layout-push", "cast", {"dtype": dtype}, ["y"], nhwc))
    for op in BINARY:
        rules.append(_pushed(f"l-{op}", "layout-push", op, {}, ["x", "y"],
                             {"inputs": {"x": [1, 5, 6, 3], "y": [1, 5, 6, 3]}, "vars": {}}))
        rules.append(_pushed(f"l-{op}-weight", "layout-push", op, {}, ["y"],
                             {"inputs": {"y": [1, 5, 6, 3], "w": [1, 3, 1, 1]}, "vars": {}},
                             extra_inputs=["w"], weight_perm=TO_NHWC))
        rules.append(_pushed(f"l-{op}-weight3", "layout-push", op, {}, ["y"],
                             {"inputs": {"y": [1, 5, 6, 3], "w": [3, 1, 1]}, "vars": {}},
                             extra_inputs=["w"], weight_perm=CHW_TO_HWC))
    for k in range(1, MAX_CONCAT + 1):  # torchvision's DenseNet concats one input for a block's first layer
        names = [f"x{i}" for i in range(k)]
        rules.append(_pushed(f"l-concat{k}", "layout-push", "concat", {"axis": 1}, names,
                             {"inputs": {x: [1, 5, 6, 2 + i] for i, x in enumerate(names)}, "vars": {}},
                             out_attrs={"axis": 3}))
    rules += [_nest(k) for k in range(MAX_CONCAT + 1, WIDE_CONCAT + 1)]
    rules += [_flatten(inner, more) for inner in range(MAX_CONCAT, WIDE_CONCAT, MAX_CONCAT - 1)
              for more in range(1, min(MAX_CONCAT, WIDE_CONCAT - inner + 1))]
    for k in range(2, MAX_SPLIT + 1):
        rules.append(_split(k))
    rules.append(_pushed("l-batch_norm", "layout-push", "batch_norm", {"axis": 1, "epsilon": "?e"}, ["y"],
                         {"inputs": {"y": [1, 5, 6, 3], **{p: [3] for p in ("g", "b", "m", "v")}},
                          "vars": {"e": 1e-5}},
                         extra_inputs=["g", "b", "m", "v"], out_attrs={"axis": 3, "epsilon": "?e"}))
    pool_vars = {"k": [3, 3], "s": [2, 2], "p": [1, 1, 1, 1], "d": [1, 1], "c": False}
    rules.append(_pushed("l-max_pool2d", "layout-push", "max_pool2d", POOL_ATTRS, ["y"],
                         {"inputs": {"y": [1, 7, 6, 3]}, "vars": pool_vars},
                         out_attrs={**POOL_ATTRS, "layout": "NHWC"}))
    avg = {**POOL_ATTRS, "count_include_pad": "?i"}
    rules.append(_pushed("l-avg_pool2d", "layout-push", "avg_pool2d", avg, ["y"],
                         {"inputs": {"y": [1, 7, 6, 3]}, "vars": {**pool_vars, "i": False}},
                         out_attrs={**avg, "layout": "NHWC"}))
    rules.append(_pushed("l-channel_shuffle", "layout-push", "channel_shuffle", {"groups": "?g"}, ["y"],
                         {"inputs": {"y": [1, 5, 6, 4]}, "vars": {"g": 2}},
                         out_attrs={"groups": "?g", "layout": "NHWC"}))  # ShuffleNet's
    rules.append(_pushed("l-depth_to_space", "layout-push", "depth_to_space", {"block": "?b", "mode": "?m"}, ["y"],
                         {"inputs": {"y": [1, 5, 6, 12]}, "vars": {"b": [2, 3], "m": "CRD"}},
                         out_attrs={"block": "?b", "mode": "?m", "layout": "NHWC"}))  # pixel shuffles, sub-pixel convs'
    rules.append(_pushed("l-space_to_depth", "layout-push", "space_to_depth", {"block": "?b", "mode": "?m"}, ["y"],
                         {"inputs": {"y": [1, 4, 6, 3]}, "vars": {"b": [2, 3], "m": "DCR"}},
                         out_attrs={"block": "?b", "mode": "?m", "layout": "NHWC"}))  # pixel unshuffles (Restormer's)
    resize = {"size": "?sz", "method": "?m", "coordinates": "?c", "rounding": "?r"}
    rules.append(_pushed("l-resize2d", "layout-push", "resize2d", resize, ["y"],  # U-Nets', YOLO necks' upsampling
                         {"inputs": {"y": [1, 5, 6, 3]},
                          "vars": {"sz": [10, 12], "m": "linear", "c": "half_pixel", "r": "round_prefer_floor"}},
                         out_attrs={**resize, "layout": "NHWC"}))
    rules.append(_pushed("l-pad", "layout-push", "pad", {"pad_width": "?pw", "value": "?v"}, ["y"],
                         {"inputs": {"y": [1, 5, 6, 3]}, "vars": {"pw": [0, 0, 0, 0, 0, 1, 0, 1], "v": 0.0}},
                         out_attrs={"pad_width": f"=({_nhwc_pairs('?pw')})", "value": "?v"}))
    rules.append(_pushed("l-mirror_pad", "layout-push", "mirror_pad", {"pad_width": "?pw", "mode": "?m"}, ["y"],
                         {"inputs": {"y": [1, 5, 6, 3]}, "vars": {"pw": [0, 0, 0, 0, 1, 2, 3, 1], "m": "reflect"}},
                         out_attrs={"pad_width": f"=({_nhwc_pairs('?pw')})", "mode": "?m"}))  # ReflectionPad2d
    for axes in SLICE_AXES:
        n = len(axes)
        rules.append(_pushed(f"l-slice{''.join(map(str, axes))}", "layout-push", "strided_slice",
                             {"axes": list(axes), "begin": "?b", "end": "?e", "strides": [1] * n}, ["y"],
                             {"inputs": {"y": [1, 5, 6, 3]}, "vars": {"b": [1] * n, "e": [4] * n}},
                             out_attrs={"axes": [TO_NCHW[a] for a in axes], "begin": "?b", "end": "?e",
                                        "strides": [1] * n}))
    rules.append(_pushed("l-group_norm", "layout-push", "group_norm", {"groups": "?g", "epsilon": "?e", "axis": 1},
                         ["y"], {"inputs": {"y": [1, 5, 6, 4], "ga": [4], "be": [4]}, "vars": {"g": 2, "e": 1e-5}},
                         extra_inputs=["ga", "be"], out_attrs={"groups": "?g", "epsilon": "?e", "axis": 3}))  # Relax's
    rules.append(_pushed("l-exported_group_norm", "layout-push", "exported_group_norm", {"axis": 1}, ["y"],
                         {"inputs": {"y": [1, 5, 6, 4], "e": [], "s": [2, 1], "b": [2, 1]}, "vars": {}},
                         extra_inputs=["e", "s", "b"], out_attrs={"axis": 3}))  # PyTorch's ONNX GroupNorm, spelled
    for op in BINARY:
        for left in (False,) if get_op(op).commutative else (False, True):  # the matcher commutes operands
            rules.append(_scalar(op, left))
            rules.append(_gate(op, left))
    for axis in SOFTMAX_AXES:
        rules.append(_pushed(f"l-softmax{axis}", "layout-push", "softmax", {"axis": axis}, ["y"], nhwc,
                             out_attrs={"axis": TO_NCHW[axis]}))
    rules += [_reduction(op, axes, keep) for op in REDUCTIONS for axes in REDUCE_AXES for keep in (False, True)
              if keep or dropped_in_order(axes)]
    return rules


def nhwc_axes(nchw_axes) -> list[int]:
    """The axes of an NHWC tensor that its NCHW reading's `nchw_axes` are, sorted."""
    return sorted(TO_NCHW[a] for a in nchw_axes)


def dropped_in_order(nchw_axes) -> bool:
    """Whether reducing `nchw_axes` away leaves the same axes in the same order in either layout (C reduced,
    or only N and C left), so that no transpose is needed after the reduction."""
    left = [TO_NCHW[a] for a in range(4) if a not in nchw_axes]
    return left == sorted(left)


def _nhwc_pairs(widths: str) -> str:
    """An NCHW pad_width's (before, after) pairs in NHWC order, as an expression over the variable."""
    return ", ".join(f"{widths}[{2 * a}], {widths}[{2 * a + 1}]" for a in TO_NHWC)


def _split(k):
    """split(T y) into k channel ranges => the transposes of y split into k ranges along its last axis
    (a split's parts are several outputs, so _pushed's one-output form does not serve)."""
    sizes = [f"?s{i}" for i in range(k)]
    target = [_node("n", "split", ["y"], axis=3, sizes=sizes)]
    target += [_t(f"r{i}", f"n:{i}") for i in range(k)] + [_t("u", "y")]
    return _rule(f"l-split{k}", "layout-push", [("y", "any")],
                 [_t("t", "y"), _node("o", "split", ["t"], axis=1, sizes=sizes)], target,
                 [(f"o:{i}", f"r{i}") for i in range(k)] + [("t", "u")],
                 {"inputs": {"y": [1, 5, 6, k * (k + 1) // 2]}, "vars": {f"s{i}": i + 1 for i in range(k)}})


def _scalar(op, left):
    """op(T y, s) => T(op(y, s)) for a rank-0 s (hardswish's x + 3, a scale), or op(s, T y)."""
    args = ["s", "t"] if left else ["t", "s"]
    return _rule(f"l-{op}-scalar{'-left' if left else ''}", "layout-push", [("y", "any"), ("s", "any")],
                 [_t("t", "y"), _node("o", op, args)],
                 [_node("n", op, [a if a == "s" else "y" for a in args]), _t("r", "n"), _t("u", "y")],
                 [("o", "r"), ("t", "u")], {"inputs": {"y": [1, 5, 6, 3], "s": []}, "vars": {}},
                 ["rank(s) == 0"])


def _gate(op, left):
    """op(T y, g) => T(op(y, g transposed to NHWC)) for a per-channel (N, C, 1, 1) operand computed in NCHW: a
    squeeze-and-excitation gate made by linear layers, ECA's, a diffusion U-Net's timestep embedding added (or
    op(g, T y)). Any rank-4 g would do; the sizes keep the transpose it takes to a copy of N * C values."""
    args = ["g", "t"] if left else ["t", "g"]
    return _rule(f"l-{op}-gate{'-left' if left else ''}", "layout-push", [("y", "any"), ("g", "any")],
                 [_t("t", "y"), _node("o", op, args)],
                 [_t("h", "g", TO_NHWC), _node("n", op, ["h" if a == "g" else "y" for a in args]), _t("r", "n"),
                  _t("u", "y")],
                 [("o", "r"), ("t", "u")], {"inputs": {"y": [1, 5, 6, 3], "g": [1, 3, 1, 1]}, "vars": {}},
                 ["rank(g) == 4", "dim(g, 2) == 1", "dim(g, 3) == 1"])


def _reduction(op, nchw, keep):
    """op(T y) over NCHW axes => op(y) over the same axes of the NHWC tensor, transposed back only if the axes
    are kept (dropped where the axes left are in the same order either way: a head's (N, C) needs no transpose)."""
    name = f"l-{op}{''.join(map(str, nchw))}-{'keep' if keep else 'drop'}"
    target = [_node("n", op, ["y"], axes=nhwc_axes(nchw), keepdims=keep)]
    out = "n"
    if keep:
        target.append(_t("r", "n"))
        out = "r"
    target.append(_t("u", "y"))
    return _rule(name, "layout-push", [("y", "any")],
                 [_t("t", "y"), _node("o", op, ["t"], axes=list(nchw), keepdims=keep)],
                 target, [("o", out), ("t", "u")], {"inputs": {"y": [1, 5, 6, 3]}, "vars": {}})


def main(argv=None) -> int:
    return write_main(argv, __doc__.splitlines()[0], nhwc_rules, (
        "Convs to NHWC and the transposes carried through element-wise ops, batch norms, concats and pools "
        "until they cancel (taso_relay/generator/layout_rules.py). Used by the layout step, not the search."))


if __name__ == "__main__":
    raise SystemExit(main())
