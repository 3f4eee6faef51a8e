"""`taso-relay compile` then `taso-relay run`: outputs equal onnxruntime's."""
from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    path = tmp_path_factory.mktemp("inputs") / "in.npz"
    np.savez(path, x=np.random.default_rng(3).uniform(-1, 1, (1, 3, 8, 8)).astype("float32"))
    return path


def _onnxruntime(model, x):
    return ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})


@pytest.mark.parametrize("taso", [True, False], ids=["taso", "no-taso"])
def test_compile_then_run_matches_onnxruntime(cli, small, inputs, tmp_path, taso):
    lib = tmp_path / "model.so"
    status, out, err = cli("compile", small, "-o", lib, *([] if taso else ["--no-taso"]))
    assert status == 0, err
    assert lib.is_file() and (tmp_path / "model.so.json").is_file()
    assert ("taso     main:" in out) == taso

    outputs = tmp_path / "out.npz"
    status, out, err = cli("run", lib, "--inputs", inputs, "--outputs", outputs, "--print-time", "--repeat", "2")
    assert status == 0, err
    assert "output   probs float32[1, 5]" in out and "ms median" in out
    got = np.load(outputs)
    assert list(got.files) == ["probs"]
    (want,) = _onnxruntime(small, np.load(inputs)["x"])
    np.testing.assert_allclose(got["probs"], want, rtol=1e-5, atol=1e-6)


def test_run_json_random_inputs_and_bad_inputs(cli, small, tmp_path):
    lib = tmp_path / "m.so"
    assert cli("compile", small, "-o", lib, "--json")[0] == 0
    status, out, _ = cli("run", lib, "--json")
    assert status == 0 and json.loads(out)["outputs"][0]["shape"] == [1, 5]

    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, x=np.zeros((2, 3, 8, 8), "float32"))
    status, _, err = cli("run", lib, "--inputs", wrong)
    assert status == 2 and "has shape [2, 3, 8, 8], the model takes [1, 3, 8, 8]" in err

    named = tmp_path / "named.npz"
    np.savez(named, y=np.zeros((1, 3, 8, 8), "float32"), z=np.zeros(1))
    status, _, err = cli("run", lib, "--inputs", named)
    assert status == 2 and "has no array 'x'" in err

    loose = tmp_path / "loose.npz"  # float64 under another name: taken and rounded, and said so
    np.savez(loose, data=np.full((1, 3, 8, 8), 0.1))
    status, out, err = cli("run", lib, "--inputs", loose, "--json")
    assert status == 0 and json.loads(out)["outputs"][0]["shape"] == [1, 5]
    assert "'data', is taken as input 'x'" in err and "input 'x' is float64, rounded to the model's float32" in err

    status, _, err = cli("run", tmp_path / "missing.so")
    assert status == 2 and err.strip() == f"taso-relay: error: no such library: {tmp_path / 'missing.so'}"

    junk = tmp_path / "junk.so"
    junk.write_text("not a library")
    status, _, err = cli("run", junk, "--inputs", wrong)
    assert status == 2 and "cannot load" in err and err.count("\n") == 1


def test_run_draws_token_ids_inside_their_tables(cli, tmp_path):
    """The sidecar records the table an integer input indexes; `run`'s random ids stay inside it and
    the library's outputs equal onnxruntime's on the same ids (out-of-table ids crashed it)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "bridge"))
    from bridge_onnx_models import token_types

    import cli_models

    model = cli_models.save(token_types(), tmp_path / "types.onnx")
    lib, out = tmp_path / "t.so", tmp_path / "out.npz"
    assert cli("compile", model, "-o", lib, "--no-taso")[0] == 0
    inputs = {i["name"]: i.get("index_below") for i in json.loads((tmp_path / "t.so.json").read_text())["inputs"]}
    assert inputs == {"ids": 12, "types": 2}
    status, _, err = cli("run", lib, "--outputs", out, "--seed", "3")
    assert status == 0, err
    from taso_relay.commands.run import random_inputs
    specs = json.loads((tmp_path / "t.so.json").read_text())["inputs"]
    ids, types = random_inputs(specs, 3)
    want = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"ids": ids, "types": types})
    np.testing.assert_allclose(next(iter(np.load(out).values())), want[0], rtol=1e-5, atol=1e-6)

    past = tmp_path / "past.npz"  # an id past the table: refused, as onnxruntime refuses it
    np.savez(past, ids=np.where(ids == ids.max(), 12, ids).astype(ids.dtype), types=types)
    status, _, err = cli("run", lib, "--inputs", past)
    assert status == 2 and "input 'ids' indexes a table of 12 rows but holds values" in err


def test_inputs_are_narrowed_only_where_the_values_fit(capsys):
    from taso_relay.commands.run import _narrow
    from taso_relay.onnx_io.errors import InputError

    spec = {"name": "ids", "dtype": "int32"}
    got = _narrow(np.array([1, 2**20], "int64"), spec)
    assert got.dtype == np.int32 and got.tolist() == [1, 2**20]
    assert "is int64, converted to the model's int32" in capsys.readouterr().err
    with pytest.raises(InputError, match="values outside the model's int32"):
        _narrow(np.array([2**40], "int64"), spec)
    assert _narrow(np.array([1.5], "float64"), {"name": "x", "dtype": "float32"}).dtype == np.float32
    assert "rounded to the model's float32" in capsys.readouterr().err


def test_repeated_output_names_get_their_own_keys():
    from taso_relay.commands.run import _unique

    assert _unique(["y", "y", "z", "y"]) == ["y", "y_1", "z", "y_3"]


@pytest.mark.slow
def test_tune_then_compile_with_its_records(cli, small, inputs, tmp_path):
    """MetaSchedule tuning (a few trials: minutes on two cores), then a build that reuses the records."""
    work = tmp_path / "tuning"
    target = '{"kind": "llvm", "num-cores": 2}'
    status, out, err = cli("tune", small, "--trials", "4", "--max-trials-per-task", "1", "--work-dir", work,
                           "--target", target)
    assert status == 0, err
    assert "records in" in out and (work / "database_tuning_record.json").is_file()
    lib, outputs = tmp_path / "tuned.so", tmp_path / "out.npz"
    status, out, err = cli("compile", small, "-o", lib, "--work-dir", work, "--target", target, "--json")
    assert status == 0, err
    assert json.loads(out)["tuning"]["records"] > 0
    assert cli("run", lib, "--inputs", inputs, "--outputs", outputs)[0] == 0
    (want,) = _onnxruntime(small, np.load(inputs)["x"])
    np.testing.assert_allclose(np.load(outputs)["probs"], want, rtol=1e-5, atol=1e-6)


def _rewrite_adds(monkeypatch) -> None:
    """The search replaced: add(a, b) -> add(b, a), changed and computing the same, so the speed check runs."""
    from taso_relay.graph import make_node
    from taso_relay.passes import TASOOptimizer

    def swapped(self, graph, report=None):
        nodes = [make_node("add", n.inputs[::-1], [graph.type_of(r) for r in n.inputs[::-1]], {})
                 if n.op == "add" else n for n in graph.nodes]
        return graph.rebuilt(nodes, graph.outputs)

    monkeypatch.setattr(TASOOptimizer, "optimize_graph", swapped)


def _whole_model_builds(monkeypatch) -> list:
    """The modules lowering.compile_module builds (the speed check's and the default-lowering compile's)."""
    from taso_relay.cost import lowering

    built = []
    real = lowering.compile_module
    monkeypatch.setattr(lowering, "compile_module", lambda mod, *a, **k: built.append(mod) or real(mod, *a, **k))
    return built


def _runs_like_onnxruntime(cli, small, lib, inputs, outputs) -> None:
    assert cli("run", lib, "--inputs", inputs, "--outputs", outputs)[0] == 0
    (want,) = _onnxruntime(small, np.load(inputs)["x"])
    np.testing.assert_allclose(np.load(outputs)["probs"], want, rtol=1e-5, atol=1e-6)


def test_compile_builds_the_speed_checked_model_once(cli, small, inputs, tmp_path, monkeypatch):
    """The speed check built the module the pass returns (the rewrite, or the original it kept):
    `compile` exports that executable rather than building it a third time."""
    _rewrite_adds(monkeypatch)
    built = _whole_model_builds(monkeypatch)
    lib = tmp_path / "model.so"
    status, out, err = cli("compile", small, "-o", lib, "--verify-speed")
    assert status == 0, err
    assert "speed check" in out, out
    assert len(built) == 2, out  # the original and the rewrite, for the check; nothing after
    _runs_like_onnxruntime(cli, small, lib, inputs, tmp_path / "out.npz")


@pytest.mark.parametrize("new_schedules", [False, True], ids=["nothing-tuned-since", "tuned-since"])
def test_tuned_compile_takes_the_speed_checked_build_unless_tuned_since(cli, small, inputs, tmp_path, monkeypatch,
                                                                       new_schedules):
    """`--cost tuned`: the speed check built the result with the judge's schedules, as the library is
    built. If the compile's last tuning adds none, that executable is exported; if it adds some, the
    build predates them and the library is built again from the database. Tuning is faked here."""
    from taso_relay.commands import compile as compile_command
    from taso_relay.cost.tuned import TunedCost

    monkeypatch.setenv("TASO_RELAY_CACHE_DIR", str(tmp_path / "cache"))  # the judge's default database

    def fake_tuning(self, mods):  # the speed check tunes [original, rewrite]; the compile [result]
        self.tunings += new_schedules and len(mods) == 1
        return self.database()

    monkeypatch.setattr(TunedCost, "tune_modules", fake_tuning)
    _rewrite_adds(monkeypatch)
    built, rebuilt = _whole_model_builds(monkeypatch), []
    real = compile_command.with_judge_schedules
    monkeypatch.setattr(compile_command, "with_judge_schedules", lambda mod, *a: rebuilt.append(mod) or real(mod, *a))
    lib = tmp_path / "model.so"
    status, out, err = cli("compile", small, "-o", lib, "--cost", "tuned", "--max-trials-per-task", "16")
    assert status == 0, err
    assert "speed check (tuning lowering" in out, out
    assert len(built) == 2, out  # the speed check's two builds
    assert len(rebuilt) == new_schedules  # the library's own build, only when schedules came since
    _runs_like_onnxruntime(cli, small, lib, inputs, tmp_path / "out.npz")
