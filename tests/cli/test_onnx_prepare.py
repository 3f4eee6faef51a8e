"""Input preparation: shape inference and constant folding let graph-computed shapes import."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import cli_models as models
from taso_relay.bridge.execute import run_module
from taso_relay.onnx_io import InputError, fold_constants, parse_input_shapes, prepare


def test_dynamic_pad_imports_after_preparation(model_dir):
    from tvm.relax.frontend.onnx import from_onnx

    path = model_dir / "dynamic_pad.onnx"
    with pytest.raises(Exception, match="[Dd]ynamic pads"):
        from_onnx(onnx.load(str(path)), keep_params_in_input=False)  # TVM alone cannot
    prepared = prepare(path)
    assert prepared.folded == 6
    assert [n.op_type for n in prepared.model.graph.node] == ["Pad", "Conv", "Sigmoid"]
    assert prepared.outputs[0].shape == (1, 2, 8, 8)
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 7, 8)).astype("float32")
    (got,) = run_module(prepared.mod, [x])
    (want,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_fold_constants_handles_constant_nodes_and_shape_slices():
    nodes = [
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.array([2], np.int64))),
        helper.make_node("Shape", ["x"], ["tail"], start=-2),
        helper.make_node("Mul", ["tail", "k"], ["doubled"]),
        helper.make_node("Concat", ["one", "doubled"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"], allowzero=0),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array([-1], np.int64), "one")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model = onnx.shape_inference.infer_shapes(model)
    folded, count = fold_constants(model)
    assert count == 4
    assert [n.op_type for n in folded.graph.node] == ["Reshape"]
    inits = {t.name: numpy_helper.to_array(t) for t in folded.graph.initializer}
    assert inits["shape"].tolist() == [-1, 6, 8]
    assert "one" not in inits  # initializers nobody uses any more are dropped


def test_a_folded_scalar_keeps_rank_zero(tmp_path):
    """x[0] of a 2-D x through a scalar Constant index: folded to an initializer, the index must stay
    0-d, or the Gather keeps an extra axis (a PyTorch ViT's class token came out [1, 1, 10])."""
    nodes = [helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, np.int64))),
             helper.make_node("Identity", ["zero"], ["i"]),  # folded: a new initializer
             helper.make_node("Gather", ["x", "i"], ["y"], axis=0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    path = models.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "take.onnx")
    prepared = prepare(path)
    assert prepared.folded >= 1
    assert [list(t.dims) for t in prepared.model.graph.initializer] == [[]]
    assert prepared.outputs[0].shape == (3,)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (got,) = run_module(prepared.mod, [x])
    assert got.shape == (3,) and got.tolist() == x[0].tolist()


EXPORTED = Path(__file__).parent / "exported"


def test_a_dynamic_transformers_export_imports_once_its_shapes_are_pinned():
    """A BERT exported by torch.onnx with dynamic batch and sequence (exported/export_bert_tiny.py).
    The first shape inference leaves intermediate shapes unknown, and folding makes them
    computable; kept, those unknown entries blocked the rest of the folding, and TVM's importer
    failed on an Expand whose shape stayed a computation."""
    path = EXPORTED / "bert_tiny_dynamic.onnx"
    prepared = prepare(path, {"input_ids": (1, 8), "attention_mask": (1, 8)})
    assert prepared.outputs[0].shape == (1, 8, 16)
    assert not any(n.op_type in ("Shape", "ConstantOfShape") for n in prepared.model.graph.node)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 40, (1, 8)).astype(np.int64)
    mask = np.array([[1, 1, 1, 1, 1, 1, 0, 0]], np.int64)
    (got,) = run_module(prepared.mod, [ids, mask])
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"input_ids": ids, "attention_mask": mask})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    from taso_relay.passes import TASOPass

    taso = TASOPass(verify_speed=False, time_limit=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # its embedding's shape bindings do not leave it unchanged
        out = taso(prepared.mod)
    assert taso.report["main"].status in ("optimized", "unchanged") and taso.report["main"].search is not None
    (rewritten,) = run_module(out, [ids, mask])
    np.testing.assert_allclose(rewritten, got, rtol=1e-5, atol=1e-6)


def test_unsupported_operator_is_named(tmp_path):
    graph = helper.make_graph([helper.make_node("Det", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    path = models.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "det.onnx")
    with pytest.raises(InputError, match="does not support operator\\(s\\) Det"):
        prepare(path)


@pytest.mark.parametrize("spec, shape", [("x:1,3,224,224", (1, 3, 224, 224)), ("input.1:2x3", (2, 3)),
                                         ("a:b:4", (4,))])
def test_parse_input_shapes(spec, shape):
    ((name, got),) = parse_input_shapes([spec]).items()
    assert got == shape and name == spec.rpartition(":")[0]


@pytest.mark.parametrize("spec", ["x", "x:1,a", "x:0,3", ":1,2"])
def test_parse_input_shapes_rejects(spec):
    with pytest.raises(InputError):
        parse_input_shapes([spec])


def _window_padded_chain(blocks: int, weight_elems: int = 4096):
    """x -> `blocks` x (pad the last axis up to a multiple of 8, computed from the Shape of the block's input;
    then a matmul that adds 3 to its width) -> y. Like Swin's window padding, each block's pad amount is
    known only once the block before it is folded: one folding round per block."""
    nodes, inits, h = [], [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
                           (("eight", 8), ("axis", [2]), ("zeros", [0, 0, 0, 0, 0]))], "x"
    width = 5
    for k in range(blocks):
        padded = -(-width // 8) * 8
        w = np.linspace(-1, 1, padded * (padded + 3), dtype=np.float32).reshape(padded, padded + 3)
        inits.append(numpy_helper.from_array(w, f"w{k}"))
        nodes += [helper.make_node("Shape", [h], [f"s{k}"]),
                  helper.make_node("Gather", [f"s{k}", "axis"], [f"d{k}"], axis=0),
                  helper.make_node("Mod", [f"d{k}", "eight"], [f"m{k}"]),
                  helper.make_node("Sub", ["eight", f"m{k}"], [f"r{k}"]),
                  helper.make_node("Mod", [f"r{k}", "eight"], [f"p{k}"]),
                  helper.make_node("Concat", ["zeros", f"p{k}"], [f"pads{k}"], axis=0),
                  helper.make_node("Pad", [h, f"pads{k}"], [f"h{k}"]),
                  helper.make_node("MatMul", [f"h{k}", f"w{k}"], [f"o{k}"])]
        h, width = f"o{k}", padded + 3
    inits.append(numpy_helper.from_array(np.zeros(weight_elems, np.float32), "unused_big"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5])],
                              [helper.make_tensor_value_info(h, TensorProto.FLOAT, [1, 2, width])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), width


def test_folding_runs_as_many_rounds_as_a_chain_of_computed_pads_needs(tmp_path):
    """12 blocks whose pads each wait on the block before (torchvision's Swin-T has 12; 8 rounds failed
    it): folding continues while a round folds something, and the model imports and computes as
    onnxruntime does."""
    model, width = _window_padded_chain(12)
    path = models.save(model, tmp_path / "chain.onnx")
    prepared = prepare(path)
    assert [n.op_type for n in prepared.model.graph.node] == ["Pad", "MatMul"] * 12
    assert prepared.outputs[0].shape == (1, 2, width)
    x = np.random.default_rng(0).uniform(-1, 1, (1, 2, 5)).astype("float32")
    (got,) = run_module(prepared.mod, [x])
    (want,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_shape_inference_without_the_weights_values_infers_the_same_shapes():
    """Inference runs on a copy whose large initializers have no values (seconds saved on a large
    model); the shapes it gives are those of inference on the whole model, and the model keeps its
    weights."""
    from taso_relay.onnx_io.prepare import LIGHT_BYTES, infer_shapes

    model, _ = _window_padded_chain(3, weight_elems=LIGHT_BYTES)  # 4 KB: stripped for inference
    full = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    light = infer_shapes(onnx.ModelProto.FromString(model.SerializeToString()))
    shapes = {v.name: v.type for v in full.graph.value_info}
    assert len(shapes) > 10 and {v.name: v.type for v in light.graph.value_info} == shapes
    weights = {t.name: numpy_helper.to_array(t) for t in light.graph.initializer}
    assert weights["unused_big"].shape == (LIGHT_BYTES,) and weights["w0"].size == 8 * 11


def test_shape_inference_reaches_inside_if_branches():
    """The shapes inferred inside a subgraph (an If's branches) are kept, as whole-model inference keeps them."""
    from taso_relay.onnx_io.prepare import infer_shapes

    def branch(op):
        nodes = [helper.make_node(op, ["x"], ["t"]), helper.make_node("Relu", ["t"], ["y_" + op])]
        return helper.make_graph(nodes, op, [], [helper.make_tensor_value_info("y_" + op, TensorProto.FLOAT, None)])

    cond = numpy_helper.from_array(np.array(True), "cond")
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=branch("Neg"), else_branch=branch("Abs"))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [cond])
    model = infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    then_branch = next(a.g for a in model.graph.node[0].attribute if a.name == "then_branch")
    inner = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in then_branch.value_info}
    assert inner == {"t": [2, 3]}


def test_folding_keeps_what_if_branches_read_from_outside(tmp_path):
    """An If's branches read a weight of the outer graph and a value folding computes, which no top-level node
    lists: both stay (dropping them broke TVM's import of scripted exports), and the model computes as before."""
    then_nodes = [helper.make_node("Add", ["x", "w_then"], ["t0"]), helper.make_node("Mul", ["t0", "folded"], ["t"])]
    then_g = helper.make_graph(then_nodes, "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 4])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 4])])
    nodes = [helper.make_node("Mul", ["w", "two"], ["folded"]), helper.make_node("Neg", ["zero"], ["negzero"]),
             helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "negzero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
             (("zero", 0.0), ("two", 2.0), ("w", [[1, 2, 3, 4]]), ("w_then", [[0.5, -1, 2, 0]]))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
    path = tmp_path / "if.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    folded, count = fold_constants(onnx.load(path))
    assert count == 2 and [n.op_type for n in folded.graph.node] == ["ReduceSum", "Greater", "If"]
    assert {t.name for t in folded.graph.initializer} == {"w_then", "folded", "negzero"}
    prepared = prepare(path)
    assert prepared.folded == 2
    x = np.array([[1.0, 2.0, -0.5, 3.0]], np.float32)
    want = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
    np.testing.assert_allclose(run_module(prepared.mod, [x])[0], want, rtol=1e-6)
    assert float(np.abs(want).max()) > 0 and not np.allclose(want, -x)  # the then branch ran
    from taso_relay.passes import TASOPass

    with pytest.warns(UserWarning, match=r"unchanged: control flow \(an If"):  # said so, not in Relax's terms
        assert TASOPass(verify_speed=False)(prepared.mod)["main"].same_as(prepared.mod["main"])


def _opset10_upsampling(tmp_path):
    """torch's opset-10 export of a bilinear upsampling: Resize with constant scales, which TVM's importer
    reads only in its opset-11 form."""
    nodes = [helper.make_node("Resize", ["x", "scales"], ["up"], mode="linear"),
             helper.make_node("Relu", ["up"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 10, 8])],
                              [numpy_helper.from_array(np.float32([1, 1, 2, 2]), "scales")])
    path = tmp_path / "up10.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)]), path)
    return path


def test_an_old_opset_tvm_cannot_read_is_converted_and_computes_as_before(tmp_path):
    path = _opset10_upsampling(tmp_path)
    prepared = prepare(path)
    assert prepared.converted.startswith("opset 10 -> 13 by onnx's version converter (TVM's ONNX importer")
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 4)).astype(np.float32)
    want = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
    np.testing.assert_allclose(run_module(prepared.mod, [x])[0], want, rtol=1e-5, atol=1e-6)


def test_a_conversion_that_changes_the_results_is_refused(tmp_path, monkeypatch):
    """onnx's converter leaves Resize's coordinate mode to opset 11's default (half_pixel), which moves every
    value; without the mend the converted model computes otherwise, and the importer's refusal stands."""
    import sys

    monkeypatch.setattr(sys.modules["taso_relay.onnx_io.prepare"], "_resize_as_opset_10", lambda model: None)
    with pytest.raises(InputError, match="TVM's ONNX importer cannot convert Resize node"):
        prepare(_opset10_upsampling(tmp_path))


def test_every_dynamic_input_is_named_at_once():
    from taso_relay.onnx_io.prepare import pin_input_shapes

    def model():
        ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])
        mask = helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "seq"])
        out = helper.make_tensor_value_info("y", TensorProto.INT64, ["batch", "seq"])
        return helper.make_model(helper.make_graph([helper.make_node("Add", ["ids", "mask"], ["y"])], "g",
                                                   [ids, mask], [out]))

    with pytest.raises(InputError) as err:
        pin_input_shapes(model(), {})
    text = str(err.value)
    assert "inputs 'ids' [batch,seq], 'mask' [batch,seq] have dynamic shapes" in text
    assert "--input-shape ids:1,1 --input-shape mask:1,1" in text
    # the example takes the sizes pinned in another input for the dimensions it shares
    with pytest.raises(InputError, match=r"^input 'mask' has a dynamic shape \[batch,seq\]; .* mask:2,4$"):
        pin_input_shapes(model(), {"ids": (2, 4)})
    assert [t.shape for t in pin_input_shapes(model(), {"ids": (1, 4), "mask": (1, 4)})] == [(1, 4), (1, 4)]
    # a shared dimension pinned to two sizes is named before TVM's importer fails on the mismatch
    with pytest.raises(InputError, match=r"pins dimension 'seq' .* to 16 in 'ids' \(axis 1\) and to 8 in 'mask'"):
        pin_input_shapes(model(), {"ids": (1, 16), "mask": (1, 8)})


def test_an_importer_error_names_the_operator_not_its_printed_form():
    from taso_relay.onnx_io.prepare import _readable

    relax_error = ('In ir.Op(span=None, ty=ir.Type(span=None), name="relax.add", description="", arguments=('
                   'ir.ArgumentInfo(name="x1", type_info="Tensor", description="The first input tensor.")), '
                   'attrs_type_key="", num_inputs=2, support_level=10), the first input shape at dim 3 is '
                   'T.int64(16) and the second input shape at dim 3 is T.int64(8), which are not broadcastable.')
    assert _readable(relax_error) == ("In add: the first input shape at dim 3 is 16 and the second input shape at "
                                      "dim 3 is 8, which are not broadcastable.")
    assert _readable("Type NoneType for size is currently unsupported") == \
        "Type NoneType for size is currently unsupported"
    # (a batch norm's per-pixel parameters, opset 7's spatial=0: the printed form first, no comma after it)
    batch_norm_error = ('ir.Op(span=None, ty=ir.Type(span=None), name="relax.nn.batch_norm", arguments=(ir.ArgumentInfo('
                        'name="data", type_info="Tensor", description="Input.")), num_inputs=5, support_level=10) '
                        'requires the input gamma to have as many dimensions as the length of input axes.')
    assert _readable(batch_norm_error) == \
        "In nn.batch_norm: requires the input gamma to have as many dimensions as the length of input axes."


def _position_table_model(path):
    """A position table (5, 4) gathered at range(n) + 0 * ids for ids [n]: what it reads depends on an input,
    so nothing folds it, and n > 5 reads past the table."""
    table = numpy_helper.from_array(np.arange(20, dtype=np.float32).reshape(5, 4), "table")
    consts = [numpy_helper.from_array(np.array(v, dtype=np.int64), k) for k, v in (("zero", 0), ("step", 1))]
    nodes = [helper.make_node("Shape", ["ids"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Range", ["zero", "n", "step"], ["pos"]),
             helper.make_node("Mul", ["ids", "zero"], ["none"]), helper.make_node("Add", ["pos", "none"], ["at"]),
             helper.make_node("Gather", ["table", "at"], ["emb"], axis=0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
                              [helper.make_tensor_value_info("emb", TensorProto.FLOAT, ["n", 4])],
                              [table, *consts])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_pinned_sizes_onnxruntime_cannot_run_are_said_before_tvm_reads_past_a_table(tmp_path, cli):
    path = _position_table_model(tmp_path / "positions.onnx")
    assert prepare(path, {"ids": (5,)}).warnings == []
    (said,) = prepare(path, {"ids": (7,)}).warnings
    assert "pinned sizes (ids:7)" in said and "out of data bounds" in said and "reads out of bounds" in said
    status, out, _ = cli("optimize", path, "--input-shape", "ids:7")
    assert status == 0 and "warning: onnxruntime cannot run the model at the pinned sizes" in out


def _conv_transpose_model(x_shape, **attrs):
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 6, 3, 3)).astype("float32"), "w")
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[3, 3], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", "h", "w"])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("attrs", [
    dict(strides=[2, 2], output_shape=[15, 12]),  # one more than the pads reach: output padding
    dict(strides=[2, 2], output_shape=[12, 8]),  # odd total padding: the larger half at the start
    dict(strides=[2, 2], output_shape=[14, 10], auto_pad="SAME_UPPER"),  # ... at the end
    dict(strides=[3, 2], output_shape=[19, 10], output_padding=[1, 0]),  # with an output padding of its own
], ids=["output-padding", "notset", "same-upper", "own-output-padding"])
def test_a_conv_transpose_output_shape_is_read_as_onnx_says(attrs, tmp_path):
    """TVM's importer ignores ConvTranspose's output_shape: written as pads first, the import computes the size
    and numbers onnxruntime does."""
    path = tmp_path / "ct.onnx"
    onnx.save(_conv_transpose_model([1, 4, 7, 5], **attrs), str(path))
    x = np.random.default_rng(1).uniform(-1, 1, (1, 4, 7, 5)).astype("float32")
    (want,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert list(want.shape[2:]) == attrs["output_shape"][-2:]
    (got,) = run_module(prepare(path).mod, [x])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_conv_transpose_output_shape_it_cannot_write_as_pads_is_refused(tmp_path):
    path = tmp_path / "ct.onnx"
    onnx.save(_conv_transpose_model([1, 4, 7, 5], strides=[2, 2], output_shape=[17, 9]), str(path))
    with pytest.raises(InputError, match="output_shape, which TVM's importer ignores.*17 on spatial axis 0"):
        prepare(path)


def _old_model(nodes, x_shape, opset, inits=(), y_shape=None):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape or ["a", "b", "c", "d"])],
                              [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _agrees_with_onnxruntime(path, x):
    (want,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    (got,) = run_module(prepare(path).mod, [x])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return got


@pytest.mark.parametrize("opset", [7, 8])
def test_a_nearest_upsample_floors_as_onnx_says(opset, tmp_path):
    """TVM's importer rounds a nearest Upsample's source pixel where ONNX floors it (a row [0, 0, 1, 2, 2, ...]
    for [0, 0, 1, 1, 2, 2, ...]): the model is read through onnx's converter instead, confirmed by onnxruntime."""
    path = tmp_path / "up.onnx"
    up = helper.make_node("Upsample", ["x"], ["y"], mode="nearest", scales=[1.0, 1.0, 2.0, 3.0])
    onnx.save(_old_model([up], [1, 2, 4, 4], opset, y_shape=[1, 2, 8, 12]), str(path))
    x = np.arange(32, dtype="float32").reshape(1, 2, 4, 4)
    got = _agrees_with_onnxruntime(path, x)
    np.testing.assert_array_equal(got[0, 0, :, 0], [0, 0, 4, 4, 8, 8, 12, 12])


@pytest.mark.parametrize("form", ["batch-norm-empty-outputs", "resize-sizes-empty-scales"])
def test_old_forms_tvm_misreads_are_written_as_it_reads_them(form, tmp_path):
    """A batch norm's unused outputs named "" (opset 9) and a Resize-11 given `sizes` with an empty `scales`:
    TVM's importer refuses both as they are; written out, they import and compute what onnxruntime does."""
    if form == "batch-norm-empty-outputs":
        inits = [(n, np.linspace(0.5, 1.5, 3).astype("float32")) for n in ("g", "b", "m", "v")]
        inits.append(("w", np.random.default_rng(1).standard_normal((3, 3, 1, 1)).astype("float32")))
        # (after a Conv: onnxruntime 1.32 crashes running a lone batch norm with outputs named "")
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
                 helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["y", "", "", "", ""])]
        model = _old_model(nodes, [1, 3, 4, 3], 9, inits, [1, 3, 4, 3])
    else:
        inits = [("roi", np.zeros(0, "float32")), ("scales", np.zeros(0, "float32")),
                 ("sizes", np.array([1, 3, 8, 6], "int64"))]
        nodes = [helper.make_node("Resize", ["x", "roi", "scales", "sizes"], ["y"], mode="nearest")]
        model = _old_model(nodes, [1, 3, 4, 3], 11, inits, [1, 3, 8, 6])
    path = tmp_path / "old.onnx"
    onnx.save(model, str(path))
    _agrees_with_onnxruntime(path, np.random.default_rng(0).uniform(-1, 1, (1, 3, 4, 3)).astype("float32"))


def test_opset_6_broadcast_along_an_axis_is_refused(tmp_path):
    """Opset 6's Add with broadcast=1 and axis=1 adds b along the channels; TVM's importer adds it along the last
    axis. Refused with what to do; the trailing alignment (what numpy does) is read as it is."""
    def model(axis, b_len):
        add = helper.make_node("Add", ["x", "b"], ["y"], broadcast=1, axis=axis)
        return _old_model([add], [1, 4, 4, 4], 6, [("b", np.arange(b_len, dtype="float32"))], [1, 4, 4, 4])

    path = tmp_path / "add.onnx"
    onnx.save(model(1, 4), str(path))
    with pytest.raises(InputError, match="Add node 'y' broadcasts along axis 1 .*opset 7 or later"):
        prepare(path)
    onnx.save(model(3, 4), str(path))
    x = np.random.default_rng(0).uniform(-1, 1, (1, 4, 4, 4)).astype("float32")
    (got,) = run_module(prepare(path).mod, [x])
    np.testing.assert_allclose(got, x + np.arange(4, dtype="float32"), rtol=1e-6)
