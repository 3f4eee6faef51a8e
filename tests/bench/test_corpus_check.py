"""bench/corpus/check_models: a model through the pass as a user runs it, its result checked against the original."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))

import cli_models as models  # noqa: E402

from bench.corpus import check_models  # noqa: E402


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

    from onnx import numpy_helper

    from taso_relay import passes
    from taso_relay.onnx_io import prepare
    from taso_relay.passes import TASOPass

    wrong = models.small_cnn(norm=True)
    fcb = next(t for t in wrong.graph.initializer if t.name == "fcb")
    fcb.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(fcb) + np.float32([0.5, 0, 0, 0, 0]), "fcb"))
    wrong_mod = prepare(models.save(wrong, tmp_path / "wrong.onnx")).mod

    class ChangedNumbers:  # a pass that changed the numbers (its report is the real pass's)
        def __init__(self, *args, **kwargs):
            self.inner = TASOPass(*args, **kwargs)

        @property
        def report(self):
            return self.inner.report

        def __call__(self, mod):
            self.inner(mod)
            return wrong_mod

    monkeypatch.setattr(passes, "TASOPass", ChangedNumbers)
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
