"""Bad input: one line on stderr, status 2, a traceback only with --verbose."""
from __future__ import annotations

import pytest


def _one_clear_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("taso-relay: error: ")
    return err


@pytest.mark.parametrize("command", ["optimize", "compile"])
def test_missing_file(cli, tmp_path, command):
    extra = ["-o", tmp_path / "m.so"] if command == "compile" else []
    status, _, err = cli(command, tmp_path / "nope.onnx", *extra)
    assert status == 2
    assert _one_clear_line(err).strip() == f"taso-relay: error: no such model file: {tmp_path / 'nope.onnx'}"


def test_not_onnx(cli, tmp_path):
    bad = tmp_path / "notes.onnx"
    bad.write_text("just some text, not a model\n")
    status, _, err = cli("optimize", bad)
    assert status == 2 and "is not an ONNX model" in _one_clear_line(err)


def test_truncated_onnx(cli, small, tmp_path):
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(small.read_bytes()[: small.stat().st_size // 2])
    status, _, err = cli("optimize", cut)
    assert status == 2 and "truncated or corrupt ONNX model" in _one_clear_line(err)
    status, _, err = cli("optimize", cut, "--verbose")
    assert status == 2 and "Traceback" in err


@pytest.mark.parametrize("target, words", [
    ("tpu9000", "unknown target kind 'tpu9000'"),
    ('{"kind": "nosuch"}', "unknown target kind 'nosuch'"),
    ('{"kind": "llvm", "bogus": 1}', "invalid target"),
    ('{"kind": ', "--target is not valid JSON"),
    ("llvm -mcpu=skylake", "JSON dict"),
])
def test_unknown_target(cli, small, target, words):
    status, _, err = cli("optimize", small, "--target", target)
    assert status == 2 and words in _one_clear_line(err)


def test_dynamic_batch_dimension_and_the_fix(cli, model_dir):
    status, _, err = cli("optimize", model_dir / "dynamic_batch.onnx")
    assert status == 2
    assert "input 'x' has a dynamic shape [N,3,8,8]" in _one_clear_line(err)
    assert "--input-shape x:1,3,8,8" in err
    status, out, err = cli("optimize", model_dir / "dynamic_batch.onnx", "--input-shape", "x:1,3,8,8")
    assert status == 0, err
    status, _, err = cli("optimize", model_dir / "dynamic_batch.onnx", "--input-shape", "y:1,3,8,8")
    assert status == 2 and "unknown input(s) y" in _one_clear_line(err)


def test_input_shape_pins_only_dynamic_dimensions(cli, model_dir, small):
    status, _, err = cli("optimize", model_dir / "dynamic_batch.onnx", "--input-shape", "x:1,3,9,8")
    assert status == 2 and "dimension 2 is fixed at 8 in the model, not 9" in _one_clear_line(err)
    status, _, err = cli("optimize", small, "--input-shape", "x:2,3,8,8")  # a static model's batch
    assert status == 2 and "dimension 0 is fixed at 1" in _one_clear_line(err)


def test_importer_failure_names_the_operator(cli, model_dir):
    # batch 2 contradicts the model's hard-coded Reshape to [1, 128]
    status, _, err = cli("optimize", model_dir / "dynamic_batch.onnx", "--input-shape", "x:2,3,8,8")
    assert status == 2 and "cannot convert Reshape node 'flat'" in _one_clear_line(err)


def test_usage_errors_are_one_line(cli, small):
    status, _, err = cli("optimize")
    assert status == 2 and _one_clear_line(err)
    status, _, err = cli("optimize", small, "--cost", "free")
    assert status == 2 and "invalid choice" in _one_clear_line(err)
    for bad, words in (("-1", "must be 0 or more"), ("abc", "is not a number of seconds"), ("nan", "0 or more")):
        status, _, err = cli("optimize", small, "--time-limit", bad)
        assert status == 2 and words in _one_clear_line(err)


def test_unwritable_output(cli, small, tmp_path):
    status, _, err = cli("optimize", small, "--emit-onnx", tmp_path / "no" / "dir" / "o.onnx")
    assert status == 2 and "no such directory" in _one_clear_line(err)


def test_json_errors_are_machine_readable(cli, tmp_path):
    import json
    status, out, err = cli("optimize", tmp_path / "nope.onnx", "--json")
    assert status == 2 and json.loads(out) == {"ok": False, "exit": 2,
                                               "error": f"no such model file: {tmp_path / 'nope.onnx'}"}


def test_a_tvm_build_failure_is_said_to_be_tvms(cli, small, tmp_path, monkeypatch):
    from taso_relay.cost import lowering

    def fails(mod, target):
        raise TypeError("Binary operators must have the same datatype for both operands")

    monkeypatch.setattr(lowering, "compile_module", fails)
    status, _, err = cli("compile", small, "-o", tmp_path / "m.so", "--no-taso")
    assert status == 1 and "internal error" not in err
    assert err.startswith("taso-relay: TVM could not build the model: Binary operators") and err.count("\n") == 1
    assert "(with --no-taso too: the model as imported)" in err


def test_an_error_without_a_message_says_where_it_was_raised():
    """TVM's topi asserts without a message (prelu's slope length): `compile` said only "AssertionError"; the
    source line that raised it says what was checked."""
    from taso_relay.commands.common import first_line

    def slope_check(slope, channels):
        if slope != channels:
            raise AssertionError

    try:
        slope_check(4, 3)
    except AssertionError as exc:
        said = first_line(exc)
    assert said.startswith("AssertionError in ") and said.endswith("slope_check: raise AssertionError")
    assert first_line(ValueError("first\nsecond")) == "first"
