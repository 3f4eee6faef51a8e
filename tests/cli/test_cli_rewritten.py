"""The commands on a model the pass really rewrites (a stand-in search: 1x1 convs enlarged to 3x3)."""
from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from taso_relay.graph import Ref, make_node
from taso_relay.passes import TASOOptimizer


def enlarge_1x1(graph):
    """conv2d(x, w 1x1) -> conv2d(x, enlarge(w, 3x3), padding 1): TASO's classic first step."""
    nodes = list(graph.nodes)
    for i, node in enumerate(graph.nodes):
        w = graph.type_of(node.inputs[1]) if node.op == "conv2d" else None
        attrs = node.attr_dict
        if w is None or w.shape[2:] != (1, 1) or attrs["padding"] != (0, 0, 0, 0) or attrs["strides"] != (1, 1):
            continue
        nodes.append(make_node("enlarge", [node.inputs[1]], [w], {"kernel": (3, 3)}))
        new_w = Ref(len(nodes) - 1, 0)
        nodes[i] = make_node("conv2d", [node.inputs[0], new_w], [graph.type_of(node.inputs[0]), nodes[-1].types[0]],
                             dict(attrs, padding=(1, 1, 1, 1)))
    return graph.rebuilt(nodes, graph.outputs)


@pytest.fixture
def rewriting(monkeypatch):
    monkeypatch.setattr(TASOOptimizer, "optimize_graph", lambda self, graph, report=None: enlarge_1x1(graph))


def test_optimize_reports_exports_and_draws_the_rewrite(rewriting, cli, small, tmp_path):
    out_onnx, dot = tmp_path / "o.onnx", tmp_path / "o.dot"
    status, out, err = cli("optimize", small, "--emit-onnx", out_onnx, "--draw", dot, "--report", tmp_path / "r.json",
                           "--no-verify-speed")  # the stand-in rewrite is no faster: measured, it would be refused
    assert status == 0, err
    assert "main: optimized" in out and "conv2d 2" in out
    assert "enlarge" not in out.split("ops")[-1]  # of a weight alone: emitted as a constant, not an operator
    assert "not measured (--verify-speed times them" in out  # a prediction, and said so
    report = json.loads((tmp_path / "r.json").read_text())
    ops_after = report["functions"]["main"]["ops_after"]
    assert report["changed"] and ops_after["conv2d"] == 2 and "enlarge" not in ops_after
    assert report["onnx"]["exported"]

    model = onnx.load(str(out_onnx))
    conv_pads = [list(a.ints) for n in model.graph.node if n.op_type == "Conv" for a in n.attribute
                 if a.name == "pads"]
    assert conv_pads == [[1, 1, 1, 1], [1, 1, 1, 1]]  # both convs are 3x3 now
    x = np.random.default_rng(5).uniform(-1, 1, (1, 3, 8, 8)).astype("float32")
    run = lambda m: ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]  # noqa
    np.testing.assert_allclose(run(model.SerializeToString()), run(str(small)), rtol=1e-5, atol=1e-6)

    text = dot.read_text()
    assert "cluster_before" in text and "cluster_after" in text
    assert "before (1 nodes changed)" in text  # the 1x1 conv; its neighbours are drawn as context
    assert "after (2 nodes changed)" in text  # enlarge (a pad once through Relax) and the 3x3 conv
    assert 'label="enlarge' in text or 'label="pad' in text


def test_compile_and_run_the_rewritten_model(rewriting, cli, small, tmp_path):
    lib, inputs, outputs = tmp_path / "m.so", tmp_path / "in.npz", tmp_path / "out.npz"
    x = np.random.default_rng(6).uniform(-1, 1, (1, 3, 8, 8)).astype("float32")
    np.savez(inputs, x=x)
    # the stand-in rewrite is no faster: without --no-verify-speed compile's speed check may keep the original
    status, out, err = cli("compile", small, "-o", lib, "--no-verify-speed")
    assert status == 0 and "main: optimized" in out, err
    assert cli("run", lib, "--inputs", inputs, "--outputs", outputs)[0] == 0
    want = ort.InferenceSession(str(small), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(outputs)["probs"], want, rtol=1e-5, atol=1e-6)
