"""`--verify-speed` reaches TASOPass from optimize, compile and tune, and shows in the report."""
from __future__ import annotations

import argparse
import json

import pytest

from taso_relay.commands import common


@pytest.mark.parametrize("argv, expected", [([], False), (["--verify-speed"], True)])
def test_flag_sets_the_pass_option(argv, expected):
    p = argparse.ArgumentParser()
    common.add_taso_arguments(p)
    taso = common.make_pass(p.parse_args(argv), None)
    assert taso.verify_speed is expected


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
