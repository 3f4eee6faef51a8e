"""bench/corpus/check_models: a model through the pass as a user runs it, its result checked against the original."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))

import cli_models as models  # noqa: E402
import onnx  # noqa: E402
import pytest  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from bench.corpus import check_models  # noqa: E402


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def changed_numbers(monkeypatch, wrong_mod) -> None:
    """TASOPass replaced by one whose result is `wrong_mod` (its report is the real pass's)."""
    from taso_relay import passes
    from taso_relay.passes import TASOPass

    class ChangedNumbers:
        def __init__(self, *args, **kwargs):
            self.inner = TASOPass(*args, **kwargs)

        @property
        def report(self):
            return self.inner.report

        def __call__(self, mod):
            self.inner(mod)
            return wrong_mod

    monkeypatch.setattr(passes, "TASOPass", ChangedNumbers)


def matmuls(dtype=TensorProto.FLOAT, rows="N", name="feat", cast=None) -> onnx.ModelProto:
    """y = x @ a + x @ b (two matmuls on one input, which the pass merges), x [rows, 8]; cast: computed in that
    type between two Casts."""
    rng = np.random.default_rng(0)
    weights = [helper.make_tensor(w, cast or dtype, [8, 4], rng.uniform(-1, 1, 32).tolist()) for w in ("a", "b")]
    x = name if cast is None else "xc"
    nodes = [helper.make_node("MatMul", [x, "a"], ["p"]), helper.make_node("MatMul", [x, "b"], ["q"]),
             helper.make_node("Add", ["p", "q"], ["s" if cast else "y"])]
    if cast:
        nodes = [helper.make_node("Cast", [name], ["xc"], to=cast), *nodes,
                 helper.make_node("Cast", ["s"], ["y"], to=dtype)]
    graph = helper.make_graph(nodes, "matmuls", [helper.make_tensor_value_info(name, dtype, [rows, 8])],
                              [helper.make_tensor_value_info("y", dtype, [rows, 4])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def float64_cnn(bias: float = 0.0) -> onnx.ModelProto:
    """conv, relu, 1x1 conv in float64: onnxruntime has no float64 Conv. bias: added to the last conv's bias."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape), name)
             for name, shape in (("w1", (4, 3, 3, 3)), ("b1", (4,)), ("w2", (2, 4, 1, 1)))]
    inits.append(numpy_helper.from_array(np.float64([bias, 0.0]), "b2"))
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Conv", ["r", "w2", "b2"], ["y"])]
    graph = helper.make_graph(nodes, "float64_cnn",
                              [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [1, 3, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [1, 2, 6, 6])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_rewritten_model_is_checked_against_its_original(tmp_path, monkeypatch):
    """The small CNN's batch norm is folded into its conv (min_gain=0 keeps the rewrite): the results agree; a pass
    that changed the numbers (another bias on one logit) makes the check fail with exit 1."""
    path = models.save(models.small_cnn(norm=True), tmp_path / "small.onnx")
    out = tmp_path / "results.jsonl"
    assert check_models.main([str(path), "--json", str(out), "--time-limit", "2"]) == 0
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["model"] == "small" and record["status"] == "optimized" and record["rewrites"] >= 1
    assert sum(record["rules"].values()) == record["rewrites"]
    assert all(r.startswith(("h-", "t")) for r in record["rules"])  # shipped rule ids, by name
    assert record["rewritten_vs_original"] < 1e-5 and record["original_vs_onnxruntime"] < 1e-5

    from taso_relay.onnx_io import prepare

    wrong = models.small_cnn(norm=True)
    fcb = next(t for t in wrong.graph.initializer if t.name == "fcb")
    fcb.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(fcb) + np.float32([0.5, 0, 0, 0, 0]), "fcb"))
    changed_numbers(monkeypatch, prepare(models.save(wrong, tmp_path / "wrong.onnx")).mod)
    assert check_models.main([str(path), "--json", str(out), "--time-limit", "2"]) == 1
    assert json.loads(out.read_text().splitlines()[-1])["rewritten_vs_original"] > 1e-4


def test_a_nan_a_shape_or_a_missing_output_counts_as_a_difference():
    def agree(out, ref):
        return check_models.agrees(check_models.error_of_scale(out, ref), 1e-5)

    ones = np.float32([1.0, 2.0])
    assert agree([ones], [ones.copy()]) and not agree([np.float32([1.0, 2.5])], [ones])
    assert not agree([np.float32([1.0, np.nan])], [ones]) and not agree([ones], [np.float32([1.0, np.nan])])
    assert not agree([np.zeros((1, 2))], [np.zeros(2)]) and not agree([ones], [ones, ones])


def test_differences_count_against_the_output_own_scale():
    """MobileNetV2's random logits are about 1e-9: against a scale of at least 1.0 (what the timing
    harness's compare used) a result wrong in every digit agreed. An all-zero original shows nothing at all."""
    from bench.harness.measure import compare

    logits = np.float32([1e-9, -2e-9, 3e-9])
    wrong = -logits
    flagged = compare([wrong], [logits])  # the timing harness reads the same figure
    assert not flagged["ok"] and flagged["max_rel_err"] == 2.0 and compare([logits * (1 + 1e-7)], [logits])["ok"]
    assert check_models.error_of_scale([wrong], [logits]) == 2.0
    assert check_models.error_of_scale([logits * (1 + 1e-7)], [logits]) < 1e-5
    zeros = np.zeros(3, np.float32)
    assert check_models.error_of_scale([zeros], [zeros]) == 0.0 and check_models.all_zero([zeros])
    assert check_models.error_of_scale([logits], [zeros]) == float("inf") and not check_models.all_zero([logits])
    with_inf = np.float32([np.inf, 1.0, 2.0])
    assert check_models.error_of_scale([np.float32([5.0, 100.0, 2.0])], [with_inf]) == float("inf")
    assert 5e-7 < check_models.error_of_scale([np.float32([np.inf, 1.0, 2.000002])], [with_inf]) < 1.5e-6
    both_nan = np.float32([np.nan, 1.0])
    assert check_models.error_of_scale([both_nan.copy()], [both_nan]) == 0.0


def test_with_a_layout_every_conv_is_converted_and_the_result_still_agrees(tmp_path):
    path = models.save(models.small_cnn(), tmp_path / "small.onnx")
    out = tmp_path / "results.jsonl"
    assert check_models.main([str(path), "--json", str(out), "--time-limit", "2", "--layout", "nhwc"]) == 0
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    layout = record["layout"]
    assert layout["convs"] >= 1 and layout["nhwc_convs"] == layout["convs"] and layout["complete"]
    assert layout["transposes"][1] >= 1  # at least the input's
    assert record["rewritten_vs_original"] < 1e-5


def test_an_input_shape_pins_a_dynamic_input_in_the_models_that_have_it(tmp_path):
    dynamic = models.save(matmuls(), tmp_path / "dynamic.onnx")
    small = models.save(models.small_cnn(), tmp_path / "small.onnx")
    out = tmp_path / "results.jsonl"
    assert check_models.main([str(dynamic), "--json", str(out), "--time-limit", "2"]) == 1
    assert "--input-shape feat:" in records(out)[0]["error"]  # unpinned: prepare says what to give
    out.unlink()
    argv = [str(dynamic), str(small), "--input-shape", "feat:3,8", "--json", str(out), "--time-limit", "2"]
    assert check_models.main(argv) == 0
    pinned, other = records(out)
    assert pinned["pinned"] == {"feat": [3, 8]} and "pinned" not in other  # small.onnx has no input 'feat'
    assert pinned["rewritten_vs_original"] < 1e-5 and pinned["original_vs_onnxruntime"] < 1e-5
    for wrong in ("faet:3,8", "feat:3,a", "feat"):  # a name no model has pins nothing: a usage error, as a bad spec
        with pytest.raises(SystemExit) as exit_:
            check_models.main([str(dynamic), "--input-shape", wrong])
        assert exit_.value.code == 2


def test_without_an_onnxruntime_kernel_the_rewritten_model_is_checked_against_the_original(tmp_path, monkeypatch):
    """onnxruntime has no float64 Conv: the row says there is no reference, and the original (TVM) decides."""
    path = models.save(float64_cnn(), tmp_path / "double.onnx")
    out = tmp_path / "results.jsonl"
    assert check_models.main([str(path), "--json", str(out), "--time-limit", "2"]) == 0
    (record,) = records(out)
    assert record["onnxruntime"].startswith("no onnxruntime reference") and "Conv" in record["onnxruntime"]
    assert record["original_vs_onnxruntime"] is None and record["rewritten_vs_original"] < 1e-5

    from taso_relay.onnx_io import prepare

    changed_numbers(monkeypatch, prepare(models.save(float64_cnn(bias=0.5), tmp_path / "wrong.onnx")).mod)
    assert check_models.main([str(path), "--json", str(out), "--time-limit", "2"]) == 1
    assert records(out)[-1]["rewritten_vs_original"] > 1e-4


def test_an_onnxruntime_refusal_of_the_model_leaves_the_comparison_with_tvms_original(tmp_path, monkeypatch):
    """onnxruntime refuses a model TVM reads (torch's 'same' padded Conv with a dilation): no reference, said in
    the record, and the rewritten model still checked against TVM's original (before session 39, a crash)."""
    import onnxruntime
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail

    def refuse(*args, **kwargs):
        raise Fail("[ONNXRuntimeError] : 1 : FAIL : a model it rejects")

    monkeypatch.setattr(onnxruntime, "InferenceSession", refuse)
    path = models.save(models.small_cnn(), tmp_path / "small.onnx")
    out = tmp_path / "results.jsonl"
    assert check_models.main([str(path), "--json", str(out), "--time-limit", "2"]) == 0
    (record,) = records(out)
    assert "it refuses the model" in record["onnxruntime"] and "FAIL" in record["onnxruntime"]
    assert record["rewrites"] >= 1 and record["rewritten_vs_original"] is not None
    assert record["rewritten_vs_original"] < 1e-5


def test_where_tvms_import_differs_from_onnxruntime_it_is_said_not_counted(tmp_path, monkeypatch, capsys):
    """A model TVM's importer reads into another shape than onnxruntime computes (ConvTranspose's output_shape
    before session 40, an If whose branch ends in a batch norm): not the pass's failure, but said, in the record
    and in the summary, where the figure used to be a bare null."""
    real = check_models.onnxruntime_outputs

    def cropped(path, arrays):
        outputs, why = real(path, arrays)
        return [o[..., :1] for o in outputs], why

    monkeypatch.setattr(check_models, "onnxruntime_outputs", cropped)
    path = models.save(models.small_cnn(), tmp_path / "small.onnx")
    out = tmp_path / "results.jsonl"
    assert check_models.main([str(path), "--json", str(out), "--time-limit", "2"]) == 0
    (record,) = records(out)
    assert record["original_vs_onnxruntime"] is None and record["rewritten_vs_original"] < 1e-5
    assert record["onnxruntime"].startswith("TVM's import computes outputs of shapes")
    assert "1 where TVM's import of the model (the original, before the pass) differs" in capsys.readouterr().err


def test_a_model_computing_in_bfloat16_is_judged_with_bfloat16_rounding(tmp_path):
    """float32 in and out, the two matmuls in bfloat16 (which onnxruntime cannot run): merged, they round
    differently by a fraction of a bfloat16 step, far past --tolerance; --bfloat16-tolerance judges it."""
    path = models.save(matmuls(rows=4, name="x", cast=TensorProto.BFLOAT16), tmp_path / "bf16.onnx")
    out = tmp_path / "results.jsonl"
    assert check_models.main([str(path), "--json", str(out), "--time-limit", "2"]) == 0
    (record,) = records(out)
    assert record["computes_in"] == "bfloat16" and not record["float16"] and "MatMul" in record["onnxruntime"]
    assert record["rewrites"] >= 1 and 1e-5 < record["rewritten_vs_original"] < 4e-2
    assert check_models.main([str(path), "--json", str(out), "--time-limit", "2", "--bfloat16-tolerance", "1e-5"]) == 1
