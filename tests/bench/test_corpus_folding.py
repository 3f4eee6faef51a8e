"""bench/corpus/check_folding: fold_kernels changes nothing FoldConstant would not, on an imported model."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))

import cli_models as models  # noqa: E402

from bench.corpus import check_folding  # noqa: E402


def test_a_model_folds_the_same_both_ways(tmp_path, capsys):
    path = models.save(models.small_cnn(norm=True), tmp_path / "small.onnx")
    assert check_folding.main([str(path)]) == 0
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert record["tuning"]["same"] and record["default"]["same"] and record["tuning"]["constants"] > 0


def test_a_folding_that_changed_a_constant_is_caught(tmp_path, capsys, monkeypatch):
    """The check must be able to fail: where the two foldings' constants differ by one rounding step, the
    model is reported and the exit code says so."""
    import numpy as np

    path = models.save(models.small_cnn(norm=True), tmp_path / "small.onnx")
    assert check_folding.main([str(path)]) == 0
    capsys.readouterr()
    stock = check_folding._constants
    calls = []

    def differing(mod):
        found = stock(mod)
        calls.append(1)
        if len(calls) % 2 == 0 and found:  # the second of each pair: fold_kernels' module
            found[0] = np.nextafter(found[0], np.inf).astype(found[0].dtype)
        return found

    monkeypatch.setattr(check_folding, "_constants", differing)
    assert check_folding.main([str(path)]) == 1
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert record["tuning"]["same"] is False
