"""conv2d in another layout is the NCHW conv between transposes: the verifier proves a layout change
and refuses one whose permutations do not undo each other."""
from __future__ import annotations

import numpy as np
import pytest

from taso_relay.graph import GraphBuilder, evaluate
from taso_relay.verifier.prover import DEFAULT_TIMEOUT, PROVED, prove_rule
from sample_rules import CONV, CONV_VARS, n, rule

EXAMPLE = {"inputs": {"x": [1, 4, 5, 5], "w": [3, 4, 3, 3]}, "vars": {**CONV_VARS, "a": "relu"}}


def to_nhwc(name, data_perm=(0, 2, 3, 1), kernel_layout="HWIO", kernel_perm=(2, 3, 1, 0), back=(0, 3, 1, 2)):
    """conv2d(x, w) NCHW/OIHW => transpose(conv2d NHWC(transpose(x), transpose(w))) back to NCHW."""
    return rule(name, ["x", "w"],
                [n("c", "conv2d", "x", "w", activation="?a", **CONV)],
                [n("xt", "transpose", "x", perm=list(data_perm)), n("wt", "transpose", "w", perm=list(kernel_perm)),
                 n("c", "conv2d", "xt", "wt", activation="?a", data_layout="NHWC", kernel_layout=kernel_layout, **CONV),
                 n("y", "transpose", "c", perm=list(back))],
                [["c", "y"]], EXAMPLE, kinds={"w": "weight"})


@pytest.mark.parametrize("kernel_layout, kernel_perm", [("HWIO", (2, 3, 1, 0)), ("OHWI", (0, 2, 3, 1))])
def test_a_conv_moved_to_nhwc_between_transposes_is_proved(kernel_layout, kernel_perm):
    verdict = prove_rule(to_nhwc(f"nhwc-{kernel_layout}", kernel_layout=kernel_layout, kernel_perm=kernel_perm),
                         timeout=20)
    assert verdict.status == PROVED, verdict.reason


@pytest.mark.parametrize("wrong", [
    {"back": (0, 2, 3, 1)},  # the output's transpose repeats the input's instead of undoing it
    {"kernel_perm": (3, 2, 0, 1)},  # the kernel permuted the wrong way round for HWIO
    {"kernel_layout": "OHWI"},  # HWIO's permutation with the kernel read as OHWI
])
def test_a_layout_change_whose_permutations_do_not_undo_each_other_is_not_proved(wrong):
    """Neither by the concrete search (which refutes them) nor by Z3 alone: an encoding that dropped
    the layouts would prove them."""
    assert prove_rule(to_nhwc("wrong-nhwc", **wrong), timeout=20).status != PROVED
    assert prove_rule(to_nhwc("wrong-nhwc", **wrong), timeout=3, concrete=False).status != PROVED


def test_the_nhwc_reference_is_the_nchw_conv_between_transposes():
    """The encoding's premise, on numbers: graph/ops/linear.py computes NHWC/HWIO convs so."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 4, 7, 7)).astype("float32"), rng.standard_normal((6, 4, 3, 3)).astype("float32")
    outs = []
    for layout in ("NCHW", "NHWC"):
        b = GraphBuilder()
        if layout == "NCHW":
            y = b.op("conv2d", b.input("x", x.shape), b.weight("w", w.shape, value=w), padding=(1, 1, 1, 1))
            outs.append(evaluate(b.build([y]), {"x": x})[0])
        else:
            y = b.op("conv2d", b.input("x", (1, 7, 7, 4)), b.weight("w", (3, 3, 4, 6), value=w.transpose(2, 3, 1, 0)),
                     padding=(1, 1, 1, 1), data_layout="NHWC", kernel_layout="HWIO")
            outs.append(evaluate(b.build([y]), {"x": x.transpose(0, 2, 3, 1)})[0].transpose(0, 3, 1, 2))
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-5)


# ---- the shipped layout rules (rules/layout/nhwc.json, generator/layout_rules.py) -----------------
def _layout_rule(rule_id, mutate=None):
    import copy

    from taso_relay.generator.layout_rules import nhwc_rules
    from taso_relay.subst.rule_io import rule_from_dict

    data = copy.deepcopy(next(r for r in nhwc_rules() if r["id"] == rule_id))
    if mutate:
        mutate(data)
    return rule_from_dict(data)


@pytest.mark.parametrize("rule_id", ["l-max_pool2d", "l-avg_pool2d", "l-concat3", "l-add-weight", "l-cancel",
                                     "l-batch_norm", "l-relu6", "l-div-weight", "l-mean23-drop", "l-mean23-keep",
                                     "l-clip01", "l-div-scalar-left", "l-pad", "l-slice23", "l-slice1",
                                     "l-split2", "l-split5", "l-mul-weight3", "l-sub-weight3",
                                     "l-concat-nest14", "l-concat-nest64", "l-concat-flatten61-3", "l-concat1",
                                     "l-resize2d", "l-channel_shuffle", "l-depth_to_space",
                                     "l-space_to_depth", "l-mirror_pad", "l-variance23-keep", "l-sqrt",
                                     "l-leaky_relu", "l-exported_group_norm", "l-group_norm", "l-log",
                                     "l-softmax3", "l-softmax1", "l-max1-keep", "l-mean1-drop", "l-sum123-keep",
                                     "l-min13-drop", "l-pow", "l-pow-scalar", "l-pow-scalar-left", "l-mul-gate",
                                     "l-sub-gate-left", "l-add-gate", "l-cast-float16"])
def test_layout_rules_are_proved(rule_id):
    assert prove_rule(_layout_rule(rule_id), timeout=20).status == PROVED


def _target(data, node_id):
    return next(n for n in data["target"] if n["id"] == node_id)


@pytest.mark.parametrize("rule_id, mutate", [
    ("l-max_pool2d", lambda d: _target(d, "n")["attrs"].update(layout="NCHW")),  # pooled over the wrong axes
    ("l-concat3", lambda d: _target(d, "n")["attrs"].update(axis=2)),  # joined along W instead of C
    ("l-add-weight", lambda d: _target(d, "w0").update(attrs={"perm": [0, 3, 1, 2]})),  # bias turned back
    ("l-cancel", lambda d: d["source"][1].update(attrs={"perm": [0, 3, 1, 2]})),  # the same transpose twice
    ("l-batch_norm", lambda d: _target(d, "n")["attrs"].update(axis=2)),  # normalised over W
    ("l-mean23-drop", lambda d: _target(d, "n")["attrs"].update(axes=[2, 3])),  # averaged over W and C
    ("l-mean23-keep", lambda d: d["target"].pop(1) and d["outputs"][0].__setitem__(1, "n")),  # not turned back
    ("l-relu6", lambda d: _target(d, "n")["attrs"].update(max=3.0)),  # another clip
    ("l-sub", lambda d: _target(d, "n").update(inputs=["y", "x"])),  # operands swapped
    ("l-sub-scalar-left", lambda d: _target(d, "n").update(inputs=["y", "s"])),  # s - y turned into y - s
    ("l-add-scalar", lambda d: d.update(constraints=[])),  # without rank(s) == 0 a vector broadcasts otherwise
    ("l-pad", lambda d: _target(d, "n")["attrs"].update(  # the NHWC widths taken in the inverse order
        pad_width="=(?pw[0], ?pw[1], ?pw[6], ?pw[7], ?pw[2], ?pw[3], ?pw[4], ?pw[5])")),
    ("l-pad", lambda d: _target(d, "n")["attrs"].update(value=0.0)),  # any pad value made zero
    ("l-slice23", lambda d: _target(d, "n")["attrs"].update(axes=[2, 1])),  # H and W swapped
    ("l-slice1", lambda d: _target(d, "n")["attrs"].update(axes=[1])),  # the channel slice left on NCHW's axis
    ("l-split2", lambda d: _target(d, "n")["attrs"].update(axis=1)),  # split along H instead of C
    ("l-split3", lambda d: d["outputs"].__setitem__(0, ["o:0", "r1"])),  # the parts mapped out of order
    ("l-mul-weight3", lambda d: _target(d, "w0").update(attrs={"perm": [2, 0, 1]})),  # (C, 1, 1) to (1, C, 1)
    ("l-sub-weight3", lambda d: _target(d, "n").update(inputs=["w0", "y"])),  # w - y for y - w
    ("l-channel_shuffle", lambda d: _target(d, "n")["attrs"].update(groups=1)),  # not shuffled at all
    ("l-depth_to_space", lambda d: _target(d, "n")["attrs"].update(mode="DCR")),  # the channels read (i, j, c)
    ("l-depth_to_space", lambda d: _target(d, "n")["attrs"].update(block="=(?b[1], ?b[0])")),  # the block turned
    ("l-space_to_depth", lambda d: _target(d, "n")["attrs"].update(mode="CRD")),  # the channels written (c, i, j)
    ("l-mirror_pad", lambda d: _target(d, "n")["attrs"].update(mode="edge")),  # every mode made an edge pad
    ("l-mirror_pad", lambda d: _target(d, "n")["attrs"].update(  # H's widths and W's swapped
        pad_width="=(?pw[0], ?pw[1], ?pw[6], ?pw[7], ?pw[4], ?pw[5], ?pw[2], ?pw[3])")),
    ("l-leaky_relu", lambda d: _target(d, "n")["attrs"].update(alpha=0.1)),  # one slope for every slope
    ("l-log", lambda d: _target(d, "n").update(op="exp")),  # the logarithm carried as an exponential
    ("l-softmax3", lambda d: _target(d, "n")["attrs"].update(axis=3)),  # over C instead of W
    ("l-softmax2", lambda d: _target(d, "n")["attrs"].update(axis=2)),  # over W instead of H
    ("l-max1-keep", lambda d: _target(d, "n")["attrs"].update(axes=[1])),  # the max over H, not C
    ("l-mean12-drop", lambda d: _target(d, "n")["attrs"].update(axes=[2, 3])),  # over W and C, not H and C
    ("l-sum1-keep", lambda d: _target(d, "n").update(op="mean")),  # a sum carried as a mean
    ("l-pow-scalar-left", lambda d: _target(d, "n").update(inputs=["y", "s"])),  # s ** y turned into y ** s
    ("l-mul-gate", lambda d: _target(d, "h")["attrs"].update(perm=[0, 3, 1, 2])),  # the gate turned the other way
    ("l-sub-gate-left", lambda d: _target(d, "n").update(inputs=["y", "h"])),  # g - y turned into y - g
    ("l-add-gate", lambda d: _target(d, "n").update(inputs=["y", "g"])),  # the gate added as it is, in NCHW
    ("l-cast-float16", lambda d: _target(d, "n")["attrs"].update(dtype="float32")),  # cast to another type
    ("l-variance23-keep", lambda d: _target(d, "n")["attrs"].update(axes=[2, 3])),  # over W and C
    ("l-exported_group_norm", lambda d: _target(d, "n")["attrs"].update(axis=1)),  # H's rows grouped, not the channels
    ("l-exported_group_norm", lambda d: _target(d, "n").update(inputs=["y", "e", "b", "s"])),  # scale and shift swapped
    ("l-group_norm", lambda d: _target(d, "n")["attrs"].update(groups=1)),  # normalized over all channels at once
    ("l-group_norm", lambda d: _target(d, "n")["attrs"].update(epsilon=1e-5)),  # every epsilon made 1e-5
    ("l-resize2d", lambda d: _target(d, "n")["attrs"].update(method="nearest_neighbor")),  # another resize
    ("l-concat-nest20", lambda d: _target(d, "n").update(inputs=["u19", "a"])),  # the last input put first
    ("l-concat-flatten13-7",  # the last input put first
     lambda d: _target(d, "n")["inputs"].insert(0, _target(d, "n")["inputs"].pop())),
])
def test_a_wrong_layout_rule_is_not_proved(rule_id, mutate):
    """Neither with the concrete search nor by Z3 alone: the pool's NHWC encoding is not vacuous. (The
    shipped rules were proved with the default timeout, 10 s per query: a wrong one gets as long.)"""
    rule = _layout_rule(rule_id, mutate)
    assert prove_rule(rule, timeout=DEFAULT_TIMEOUT).status != PROVED
    assert prove_rule(rule, timeout=1, concrete=False).status != PROVED  # a vacuous encoding proves at once


def test_the_shipped_layout_file_is_what_the_generator_writes():
    from taso_relay.generator.layout_rules import nhwc_rules
    from taso_relay.subst.rule_io import load_rules, rule_from_dict, shipped_rules_dir

    shipped = load_rules(shipped_rules_dir() / "layout" / "nhwc.json")
    fresh = [rule_from_dict(r) for r in nhwc_rules()]
    strip = lambda r: (r.id, r.text, r.inputs, r.example, r.provenance)  # noqa: E731
    assert [strip(r) for r in shipped] == [strip(r) for r in fresh]
    assert all(r.status == "PROVED" for r in shipped)



def test_rewriting_a_handwritten_file_keeps_the_verdicts_of_the_rules_it_held(tmp_path):
    """Only new or changed rules come out unverified, so `rules verify` proves only those again."""
    import json
    import shutil

    from taso_relay.generator.layout_rules import main
    from taso_relay.subst.rule_io import load_rules, shipped_rules_dir

    out = tmp_path / "nhwc.json"
    shutil.copy(shipped_rules_dir() / "layout" / "nhwc.json", out)
    data = json.loads(out.read_text())
    changed = next(r for r in data["rules"] if r["id"] == "l-relu")
    changed["source"][0]["attrs"]["perm"] = [0, 2, 3, 1]  # as if the generator had been changed since
    out.write_text(json.dumps(data))
    assert main(["--out", str(out)]) == 0
    status = {r.id: r.status for r in load_rules(out, status=None)}
    assert status.pop("l-relu") == "UNVERIFIED"  # its text now differs from the stored one
    assert set(status.values()) == {"PROVED"} and len(status) > 100
