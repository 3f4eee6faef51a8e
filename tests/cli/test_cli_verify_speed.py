"""`--verify-speed` reaches TASOPass from optimize, compile and tune, and shows in the report."""
from __future__ import annotations

import argparse
import json

import pytest

from taso_relay.commands import common


@pytest.mark.parametrize("argv, expected", [([], True), (["--verify-speed"], True), (["--no-verify-speed"], False),
                                            (["--cost", "tuned"], True), (["--cost", "measured"], True),
                                            (["--cost", "measured", "--no-verify-speed"], False)])
def test_flag_sets_the_pass_option(argv, expected, tmp_path, monkeypatch):
    """Without the flag the pass decides: on for the default lowering on this machine's CPU, and
    with the tuned cost model; --no-verify-speed turns it off."""
    monkeypatch.setenv("TASO_RELAY_CACHE_DIR", str(tmp_path))  # the tuned model makes its database folder
    p = argparse.ArgumentParser()
    common.add_taso_arguments(p)
    taso = common.make_pass(p.parse_args(argv), None)
    assert taso.verifies_speed is expected


def test_optimize_reports_the_setting(cli, small):
    status, out, err = cli("optimize", small, "--json", "--time-limit", "2", "--verify-speed")
    assert status == 0, err
    result = json.loads(out)
    assert result["pass_settings"]["verify_speed"] is True
    main = result["functions"]["main"]
    if main["status"] in ("optimized", "rejected") and main.get("speed"):
        assert main["speed"]["before_s"] > 0 and main["speed"]["after_s"] > 0


@pytest.mark.parametrize("trials, work_dir, lowering", [(0, None, "default"), (64, None, "tuning"),
                                                         (0, "records", "tuning")])
def test_compile_with_tuning_prices_the_tuning_pipelines_kernels(trials, work_dir, lowering):
    """`compile --tune-trials N` (or with tuning records) builds with MetaSchedule's pipeline:
    the pass prices kernels as that pipeline forms them."""
    from taso_relay.commands import common

    args = argparse.Namespace(cost=None, time_limit=None, verify_speed=False, trials=trials, work_dir=work_dir)
    taso = common.make_pass(args, None)
    assert taso.lowering == lowering and taso.cost_model().lowering == lowering


def test_compile_with_a_tuned_judge_tunes_into_the_build_database(tmp_path):
    """`compile --cost tuned --tune-trials N`: the judge's schedules are the ones the library is built
    with, so it tunes into the command's database, with the per-kernel budget asked for."""
    from taso_relay.commands import common

    args = argparse.Namespace(cost="tuned", time_limit=None, verify_speed=False, trials=512,
                              work_dir=tmp_path / "db", max_trials_per_task=32)
    model = common.make_pass(args, None).cost_model()
    assert model.name == "tuned" and model.work_dir == tmp_path / "db" and model.trials == 32


def test_compile_with_a_tuned_judge_builds_from_its_database(cli, small, tmp_path, monkeypatch):
    """`compile --cost tuned` without --tune-trials: the search was judged on MetaSchedule's kernels, so
    the library is built from the judge's database (before, with TVM's default lowering), and the
    final module's kernels are tuned into it first. Tuning is replaced by a recorder here."""
    from taso_relay.commands import compile as compile_command
    from taso_relay.cost.tuned import TunedCost
    from taso_relay.passes import TASOOptimizer

    monkeypatch.setenv("TASO_RELAY_CACHE_DIR", str(tmp_path / "cache"))  # the judge's default database
    calls, built = [], []

    def record(self, mods):
        calls.append((self.work_dir, self.trials, mods, self))
        return self.database()

    def build_tuned(mod, judge, database):
        built.append((mod, judge, database))
        return real_build(mod, judge, database)

    real_build = compile_command.with_judge_schedules
    monkeypatch.setattr(TunedCost, "tune_modules", record)
    monkeypatch.setattr(compile_command, "with_judge_schedules", build_tuned)
    monkeypatch.setattr(compile_command, "tune", lambda *a, **k: pytest.fail("tuned with static_shape_tuning"))
    # Where the search changed the model in its 2 s, the speed check built it with this database and the
    # compile takes that build (test_cli_compile_run.py); here the compile's own build is what is checked.
    monkeypatch.setattr(TASOOptimizer, "take_build", lambda self, *args, **kwargs: None)
    out = tmp_path / "small.so"
    status, _, err = cli("compile", small, "-o", out, "--cost", "tuned", "--time-limit", "2",
                         "--max-trials-per-task", "16")
    assert status == 0, err
    meta = json.loads((tmp_path / "small.so.json").read_text())
    (final, judge, database), = built
    work_dir = judge.work_dir
    host = common.tuning_target(common.parse_target(None))  # the host CPU, with the cores MetaSchedule needs
    assert database is not None and work_dir == compile_command.judge_database(host)
    assert str(work_dir).startswith(str(tmp_path / "cache"))  # the shared database, not one per library
    assert meta["tuning"]["work_dir"] == str(work_dir) and meta["tuning"]["trials_per_kernel"] == 16
    assert calls[-1][0] == work_dir and calls[-1][1] == 16 and calls[-1][2] == [final]  # the module built
    assert all(c[0] == work_dir for c in calls)  # the judge tuned into the database the build reads
    assert len(calls) >= 2 and len({id(c[3]) for c in calls}) == 1  # one judge: the build's last tuning reuses the pass's


@pytest.mark.parametrize("argv, expected", [([], True), (["--no-verify-speed"], False)])
def test_compile_times_the_rewrites_by_default(cli, small, tmp_path, argv, expected):
    """compile builds what the user runs: under the default lowering it keeps a rewrite only if the
    model measures faster with it, unless told not to."""
    from taso_relay.passes import TASOPass

    made = []
    real_init = TASOPass.__init__

    def spy(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        made.append(self)

    import unittest.mock as mock
    with mock.patch.object(TASOPass, "__init__", spy):
        status, out, err = cli("compile", small, "-o", tmp_path / "m.so", "--time-limit", "1", *argv)
    assert status == 0, err
    assert [t.verifies_speed for t in made] == [expected]
    assert json.loads((tmp_path / "m.so.json").read_text())["verify_speed"] is expected


@pytest.mark.parametrize("argv, expected", [([], True), (["--no-verify-speed"], False),
                                            (["--verify-speed"], True)])
def test_compile_with_a_tuned_judge_checks_speed_unless_told_not_to(argv, expected, tmp_path, monkeypatch):
    """With --cost tuned the pass checks speed by default (its judge times kernels alone);
    --no-verify-speed reaches it as False, not as 'unset'."""
    from taso_relay.cli import build_parser

    monkeypatch.setenv("TASO_RELAY_CACHE_DIR", str(tmp_path))
    args = build_parser().parse_args(["compile", "m.onnx", "-o", str(tmp_path / "m.so"), "--cost", "tuned", *argv])
    assert common.make_pass(args, None).verifies_speed is expected


def test_compile_measures_only_what_runs_here(tmp_path, monkeypatch):
    """compile's default speed check needs to run the library: not for another architecture, nor
    for a cost model that prices another machine (its own target, or a remote runner)."""
    import platform
    from types import SimpleNamespace

    from taso_relay.cost import MeasuredCost

    import tvm

    from taso_relay.bridge.execute import runs_here

    other = "aarch64-linux-gnu" if platform.machine().lower() in ("x86_64", "amd64") else "x86_64-linux-gnu"
    assert runs_here(tvm.target.Target({"kind": "llvm"}))
    assert not runs_here(tvm.target.Target({"kind": "llvm", "mtriple": other}))
    assert runs_here(tvm.target.Target({"kind": "cuda"})) == tvm.cuda().exist
    from taso_relay.passes import TASOPass  # the pass's own default follows the same rule
    assert TASOPass().verifies_speed and TASOPass(target={"kind": "llvm"}).verifies_speed
    assert not TASOPass(target=tvm.target.Target({"kind": "llvm", "mtriple": other})).verifies_speed
    monkeypatch.setenv("TASO_RELAY_CACHE_DIR", str(tmp_path))
    assert not TASOPass(cost=MeasuredCost({"kind": "llvm", "mtriple": other})).verifies_speed
    assert TASOPass(cost=MeasuredCost({"kind": "llvm"})).verifies_speed
    board = SimpleNamespace(device_key="rpc:board", close=lambda: None)
    assert not TASOPass(cost=MeasuredCost({"kind": "llvm"}, runner=board)).verifies_speed


@pytest.mark.parametrize("argv, expected", [([], "auto"), (["--layout", "nhwc"], "nhwc"), (["--layout", "none"], None)])
def test_layout_flag_sets_the_pass_option(argv, expected):
    p = argparse.ArgumentParser()
    common.add_taso_arguments(p)
    assert common.make_pass(p.parse_args(argv), None).layout == expected


def _target_given_to_the_pass(cli, argv, monkeypatch):
    """The target the command hands TASOPass (the command is stopped there: the CLI reports the error)."""
    seen = []

    def spy(args, target):
        seen.append(target)
        raise RuntimeError("stopped by the test")

    monkeypatch.setattr(common, "make_pass", spy)
    cli(*argv)
    return seen[0]


@pytest.mark.parametrize("argv", [["optimize", "--cost", "tuned"], ["compile", "--cost", "tuned"],
                                  ["compile", "--tune-trials", "8"], ["tune", "--trials", "8"]],
                         ids=["optimize-tuned", "compile-tuned", "compile-trials", "tune"])
def test_a_tuning_command_gives_the_host_target_its_cores(argv, cli, small, tmp_path, monkeypatch):
    """MetaSchedule refuses a CPU target without num-cores ("physical core number must be defined"); the
    host target the commands default to has none, so every command that tunes adds this machine's."""
    import os

    monkeypatch.setenv("TASO_RELAY_CACHE_DIR", str(tmp_path))
    command, *flags = argv
    out = ["-o", tmp_path / "m.so"] if command == "compile" else ["--work-dir", tmp_path / "w"] * (command == "tune")
    target = _target_given_to_the_pass(cli, [command, small, *flags, *out], monkeypatch)
    assert int(target.attrs["num-cores"]) == len(os.sched_getaffinity(0))


def test_a_command_that_does_not_tune_keeps_the_target_as_given(cli, small, monkeypatch):
    assert "num-cores" not in _target_given_to_the_pass(cli, ["optimize", small], monkeypatch).attrs
