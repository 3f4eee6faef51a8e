"""ONNX models imported by TVM go Relax -> Graph -> Relax and keep both their meaning and their form."""
from __future__ import annotations

import numpy as np
import pytest
import tvm
from bridge_onnx_models import MODELS, import_onnx

from taso_relay.bridge import function_from_graph, graph_from_function, module_from_graph, roundtrip
from taso_relay.bridge.execute import random_inputs
from taso_relay.graph import Graph

EXPECTED_OPS = {
    "resnet_block": {"conv2d": 2, "batch_norm": 2, "relu": 2, "add": 1},
    "inception_block": {"conv2d": 6, "concat": 1, "max_pool2d": 1},
    "transformer_layer": {"matmul": 8, "softmax": 1, "layer_norm": 2, "erf": 1, "transpose": 5},
    "with_unmodelled_ops": {"conv2d": 1, "split": 1, "matmul": 1, "opaque": 2},
    "hard_activations": {"conv2d": 2, "clip": 2, "mul": 4, "div": 1, "sub": 1, "leaky_relu": 1},
    "upsampling": {"conv2d": 4, "resize2d": 4, "concat": 1, "add": 2},
    "branches_summed": {"conv2d": 4, "batch_norm": 2, "relu": 2},
    "reparam_blocks": {"conv2d": 7, "batch_norm": 7, "relu": 2, "add": 9},
    "group_norm_block": {"conv2d": 2, "variance": 1, "mean": 1, "avg_pool2d": 1},
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    mod = import_onnx(MODELS[request.param]())
    return request.param, mod


def constants_of(func) -> list:
    found = []

    def visit(expr):
        if isinstance(expr, tvm.ir.expr.Constant):
            found.append(expr)
        for field in ("args", "fields"):
            for sub in getattr(expr, field, None) or []:
                visit(sub)

    for block in func.body.blocks:
        for binding in block.bindings:
            visit(binding.value)
    return found


def without_templates(graph: Graph) -> Graph:
    """The same graph, but every modelled call must be rebuilt from graph attributes alone."""
    payloads = {k: v for k, v in graph.payloads.items() if not k.startswith("template:")}
    return Graph(graph.nodes, graph.outputs, graph.values, payloads)


def test_import_models_the_expected_operators(model):
    name, mod = model
    imported = graph_from_function(mod["main"])
    counts = imported.graph.op_counts()
    for op, n in EXPECTED_OPS[name].items():
        assert counts.get(op, 0) == n, (op, counts)
    if name != "with_unmodelled_ops":
        assert "opaque" not in counts


def test_untouched_graph_round_trips_to_a_structurally_equal_function(model):
    _, mod = model
    func = mod["main"]
    again = roundtrip(func)
    assert again is not func
    tvm.ir.assert_structural_equal(again, func)
    # the very same constant objects, not copies
    originals = constants_of(func)
    assert originals and all(any(c.same_as(o) for o in originals) for c in constants_of(again))


def test_weights_keep_values_and_constant_objects(model):
    _, mod = model
    graph = graph_from_function(mod["main"]).graph
    for i in graph.nodes_of("weight"):
        name = graph.nodes[i].attr("name")
        const = graph.payloads[name]
        np.testing.assert_array_equal(graph.values[name], const.value.numpy())


@pytest.mark.parametrize("templates", [True, False], ids=["templates", "graph_attrs_only"])
def test_round_trip_computes_the_same_outputs(model, templates, run_module, rng):
    _, mod = model
    imported = graph_from_function(mod["main"])
    graph = imported.graph if templates else without_templates(imported.graph)
    func = function_from_graph(graph, "main", imported.signature)
    inputs = random_inputs(mod["main"].params, rng)
    want = run_module(mod, inputs)
    got = run_module(tvm.IRModule({"main": func}), inputs)
    assert len(got) == len(want)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_standalone_module_of_the_graph_runs(model, run_module, rng):
    _, mod = model
    graph = graph_from_function(mod["main"]).graph
    standalone = module_from_graph(without_templates(graph))
    assert [p.name for p in standalone["main"].params] == graph.input_names
    inputs = random_inputs(mod["main"].params, rng)
    for w, g in zip(run_module(mod, inputs), run_module(standalone, inputs)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_weights_as_params_for_kernel_measurement(run_module, rng):
    mod = import_onnx(MODELS["resnet_block"]())
    graph = graph_from_function(mod["main"]).graph
    standalone = module_from_graph(graph, weights_as_params=True)
    params = standalone["main"].params
    assert len(params) == 1 + len(graph.nodes_of("weight"))
    inputs = random_inputs(mod["main"].params, rng)
    weights = [graph.values[graph.nodes[i].attr("name")] for i in graph.nodes_of("weight")]
    np.testing.assert_allclose(run_module(standalone, inputs + weights)[0], run_module(mod, inputs)[0],
                               rtol=1e-5, atol=1e-6)


def test_relu6_clip_is_read_as_maximum_and_minimum(run_module, rng):
    """The call_tir functions TVM's importer makes of Clip are topi's maximum and minimum: compared
    structurally, they import as those operators and round-trip to the same numbers."""
    from bridge_onnx_models import relu6_block

    mod = import_onnx(relu6_block())
    imported = graph_from_function(mod["main"], "main", mod)
    counts = imported.graph.op_counts()
    assert counts["maximum"] == 2 and counts["minimum"] == 2 and counts["conv2d"] == 2
    assert all(imported.graph.nodes[i].attr("label") in ("relax.isnan", "relax.where")
               for i in imported.graph.nodes_of("opaque"))  # only the guards on the constant bounds
    assert "maximum" not in graph_from_function(mod["main"]).graph.op_counts()  # without the module: opaque
    x = [rng.uniform(-20, 30, (1, 3, 6, 6)).astype("float32")]  # both bounds reached
    want = run_module(mod, x)[0]
    assert want.min() == 0.0 and want.max() == 6.0
    for graph in (imported.graph, without_templates(imported.graph)):
        func = function_from_graph(graph, "main", imported.signature)
        changed = mod.clone()
        changed["main"] = func
        np.testing.assert_array_equal(run_module(changed, x)[0], want)
    # alone, without the module's PrimFuncs (as the cost models build kernels): R.maximum/R.minimum,
    # not call_tir of functions it does not have
    alone = module_from_graph(imported.graph)
    assert "call_tir" not in alone["main"].script()
    np.testing.assert_array_equal(run_module(alone, x)[0], want)


def test_an_opset_10_clip_is_read_as_maximum_and_minimum_of_a_scalar(run_module, rng):
    """Clip with its bounds as attributes (opsets 6-10: the ONNX model zoo's MobileNets): TVM's importer makes
    call_tir of topi.maximum(x, 0.0) and topi.minimum(x, 6.0); each is read as the graph op with the bound a
    scalar weight (the PrimFunc equal to topi's for that bound), so nothing is left opaque (70 opaque calls in a
    MobileNetV2 exported at opset 9 before), and the function rebuilt computes the same."""
    from bridge_onnx_models import F32, Model

    m = Model(9)
    a = m.op("Clip", [m.conv("x", 3, 4, 3, pads=[1, 1, 1, 1])], min=0.0, max=6.0)
    y = m.op("Clip", [m.op("Mul", [m.conv(a, 4, 4, 1), m.const(4.0, np.float32)])], min=-0.5, max=1.25)
    model = m.build([("x", F32, [1, 3, 6, 6])], [(y, F32, [1, 4, 6, 6])])
    model.opset_import[0].version = 10
    mod = import_onnx(model)
    assert "call_tir" in mod["main"].script()
    imported = graph_from_function(mod["main"], "main", mod)
    counts = imported.graph.op_counts()
    assert counts["maximum"] == 2 and counts["minimum"] == 2 and "opaque" not in counts
    x = [rng.uniform(-20, 30, (1, 3, 6, 6)).astype("float32")]
    want = run_module(mod, x)[0]
    assert want.min() == -0.5 and want.max() == 1.25
    changed = mod.clone()
    changed["main"] = function_from_graph(without_templates(imported.graph), "main", imported.signature)
    np.testing.assert_array_equal(run_module(changed, x)[0], want)


def test_tile_of_a_size_one_axis_is_read_as_broadcast_to(run_module, rng):
    """GQA's repeat_interleave: topi.tile over an axis of size 1 is a broadcast_to (the search sees
    through it); a tile that copies a whole axis stays an opaque call_tir. Both round-trip."""
    from bridge_onnx_models import gqa_tiles

    mod = import_onnx(gqa_tiles())
    imported = graph_from_function(mod["main"], "main", mod)
    graph = imported.graph
    (b,) = graph.nodes_of("broadcast_to")
    assert graph.nodes[b].attr("shape") == (1, 2, 3, 4, 4)
    assert [graph.nodes[i].attr("label") for i in graph.nodes_of("opaque")] == ["relax.call_tir"]
    x = [rng.uniform(-1, 1, (1, 4, 8)).astype("float32")]
    want = run_module(mod, x)
    changed = mod.clone()
    changed["main"] = function_from_graph(graph, "main", imported.signature)
    for w, g in zip(want, run_module(changed, x)):
        np.testing.assert_array_equal(g, w)


def test_onnx_pad_is_read_as_pad_with_its_sides_and_value(run_module, rng):
    """topi's constant pad is read back as the graph's pad (sides and value found by structural
    comparison); a reflect pad is another function, read as mirror_pad with its sides. Both round-trip."""
    from bridge_onnx_models import onnx_pads

    mod = import_onnx(onnx_pads())
    imported = graph_from_function(mod["main"], "main", mod)
    graph = imported.graph
    (p,) = graph.nodes_of("pad")
    assert graph.nodes[p].attr("pad_width") == (0, 0, 0, 1, 1, 2, 0, 3)
    assert graph.nodes[p].attr("value") == 0.5
    (r,) = graph.nodes_of("mirror_pad")
    assert graph.nodes[r].attr("pad_width") == (0, 0, 0, 0, 1, 1, 1, 1) and graph.nodes[r].attr("mode") == "reflect"
    assert not graph.nodes_of("opaque")
    x = [rng.uniform(-1, 1, (1, 2, 5, 6)).astype("float32")]
    want = run_module(mod, x)
    changed = mod.clone()
    changed["main"] = function_from_graph(graph, "main", imported.signature)
    for w, g in zip(want, run_module(changed, x)):
        np.testing.assert_array_equal(g, w)


def test_resizes_import_as_the_graph_operator_and_interpret_as_topi_computes_them(run_module, rng):
    """graph/ops/resize.py's reference, for the modes torch exports, against TVM's own kernels."""
    from bridge_onnx_models import upsampling

    from taso_relay.graph import evaluate

    mod = import_onnx(upsampling())
    graph = graph_from_function(mod["main"]).graph
    modes = sorted((n.attr("method"), n.attr("coordinates"), n.attr("rounding")) for n in graph.nodes
                   if n.op == "resize2d")
    assert modes == [("linear", "align_corners", "round_prefer_floor"),
                     ("linear", "pytorch_half_pixel", "round_prefer_floor"),
                     ("nearest_neighbor", "asymmetric", "floor"), ("nearest_neighbor", "half_pixel", "round_prefer_ceil")]
    inputs = random_inputs(mod["main"].params, rng)
    got = evaluate(graph, {graph.input_names[0]: inputs[0]})[0]
    np.testing.assert_allclose(got, run_module(mod, inputs)[0], rtol=1e-5, atol=1e-6)
