"""`taso-relay demo` end to end, its error handling, and the bundled example it runs."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from taso_relay.cli import EXAMPLE, main

ROOT = Path(__file__).resolve().parent.parent


def test_demo_runs_the_bundled_example(capsys):
    """The search folds the ACNet branch's three batch norms and sums its three convs into one (a proven rewrite,
    whatever the machine); the speed check, which times it here, decides whether the module keeps it."""
    assert main(["demo", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "inception_block.onnx" in out
    assert "1 opaque: relax.topk" in out
    assert "h-bn-conv x3" in out and "h-sum-conv-bias-enlarge x2" in out
    kept = re.search(r"pass +main: (\w+)", out)[1] == "optimized"
    assert ("conv2d 6" if kept else "conv2d 8") in out and ("batch_norm 1" if kept else "batch_norm 4") in out
    assert "concat 1" in out and "matmul 1" in out
    diff = float(re.search(r"max abs diff (\S+)", out)[1])
    assert diff < 1e-5  # the summed weights round a little differently
    run = re.search(r"run +before ([\d.]+) ms, after ([\d.]+) ms: x([\d.]+) \(medians of 1 interleaved", out)
    assert run and float(run[3]) == pytest.approx(float(run[1]) / float(run[2]), rel=0.01)  # their ratio


def test_missing_model_is_one_line_and_status_2(capsys):
    assert main(["demo", "--model", "no/such/model.onnx"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "taso-relay: error: no such model file: no/such/model.onnx"


def test_corrupt_model_traceback_only_with_verbose(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    assert main(["demo", "--model", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot import" in err and "Traceback" not in err
    assert main(["demo", "--model", str(bad), "--verbose"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_bundled_example_is_small_and_reproducible():
    assert EXAMPLE.is_file() and EXAMPLE.stat().st_size < 100 * 1024
    spec = importlib.util.spec_from_file_location("make_example", ROOT / "examples" / "make_example.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.build().SerializeToString() == EXAMPLE.read_bytes()
