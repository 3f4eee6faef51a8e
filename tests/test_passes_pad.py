"""TASOPass folds a TF export's explicit zero pads into the convs and pools after them."""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from taso_relay.bridge.from_relax import graph_from_function
from taso_relay.passes import TASOPass

sys.path.insert(0, str(Path(__file__).parent / "bridge"))
from bridge_onnx_models import F32, Model, import_onnx  # noqa: E402
from test_passes_norm import computes_the_same  # noqa: E402


def tf_style():
    """'SAME' padding spelled as TF exporters do: Pad (ONNX order: every axis' begin, then every end),
    then 'VALID' convs, one strided; a pad before an average pool that counts it; a reflect pad that stays."""
    m = Model(5)
    y = m.op("Pad", ["x", m.const([0, 0, 1, 0, 0, 0, 2, 1])], mode="constant")
    y = m.op("Relu", [m.op("Conv", [y, m.weight((6, 3, 3, 3)), m.weight((6,))], strides=[2, 2])])
    y = m.op("Pad", [y, m.const([0, 0, 1, 1, 0, 0, 1, 1])], mode="constant")
    y = m.op("AveragePool", [y], kernel_shape=[3, 3], strides=[1, 1])  # ONNX counts no padding: the pad is data
    y = m.op("Pad", [y, m.const([0, 0, 1, 1, 0, 0, 1, 1])], mode="reflect")
    y = m.op("Conv", [y, m.weight((4, 6, 3, 3))])
    return import_onnx(m.build([("x", F32, [1, 3, 11, 10])], [(y, F32, [1, 4, 6, 5])]))


def test_zero_pads_fold_and_the_numbers_stay(run_module, rng):
    before = tf_style()
    taso = TASOPass(verify_speed=False)
    after = taso(before)
    report = taso.report["main"]
    assert Counter(a.rule_id for a in report.search.applied) == {"h-pad-conv": 1, "h-pad-avg_pool2d-uncounted": 1}
    ops = [Counter(n.op for n in graph_from_function(m["main"], "main", m).graph.nodes) for m in (before, after)]
    assert ops[0]["pad"] == 2 and ops[1]["pad"] == 0  # the reflect pad is a mirror_pad either way
    computes_the_same(before, after, run_module, rng)
