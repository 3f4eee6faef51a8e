"""The speed verdict and its report (the measurement itself is exercised in tests/test_passes.py)."""
from __future__ import annotations

import json

import pytest

from taso_relay.guard.speed import SpeedCheck, faster


@pytest.mark.parametrize("before, after, min_gain, expected", [
    ([10, 10, 10], [9, 9, 9], 0.05, True),
    ([10, 10, 10], [9.6, 9.6, 9.6], 0.05, False),  # faster, but by less than the margin
    ([10, 10, 10], [10, 10, 10], 0.0, True),  # no margin asked: a tie is not slower
    ([10, 10, 10], [11, 8, 12], 0.0, False),  # medians, not the best round
    ([10, 30, 10], [9, 9, 9], 0.05, True),  # one disturbed round does not decide
    ([], [9], 0.0, False),  # nothing measured: not shown faster
])
def test_faster_compares_medians_with_a_margin(before, after, min_gain, expected):
    assert faster(before, after, min_gain) is expected


def test_report_carries_both_times_as_text_and_json():
    check = SpeedCheck(lowering="tuning", min_gain=0.01, before_s=0.002, after_s=0.001,
                       before_rounds=[0.002] * 3, after_rounds=[0.001] * 3, number=5, kept=True)
    text = check.to_text()
    assert "tuning lowering" in text and "original 2.000 ms, rewritten 1.000 ms" in text and "x2.000" in text
    data = json.loads(json.dumps(check.to_dict()))
    assert data["before_s"] == 0.002 and data["after_s"] == 0.001 and data["speedup"] == 2.0


def test_unmeasured_check_says_why():
    check = SpeedCheck(note="function has symbolic shapes")
    assert not check.measured and check.speedup is None
    assert "not measured (function has symbolic shapes)" in check.to_text()


def test_overlapping_rounds_do_not_count_as_faster():
    from taso_relay.guard.speed import faster

    # the committed ResNet-50 rounds: medians 1% apart would pass, but the rounds overlap
    assert not faster([3.327, 3.300, 3.254], [3.20, 3.26, 3.19], 0.01)
    assert faster([3.327, 3.300, 3.254], [3.20, 3.21, 3.19], 0.01)


def test_one_disturbed_round_among_many_does_not_decide():
    """The quick NASNet run: 25 rounds, 2.9% faster by median, one rewritten round hit by noise."""
    before = [16.4, 16.2, 16.3, 16.4, 16.4, 17.2, 16.4, 16.4, 16.5, 16.6, 16.5, 16.5, 17.5, 16.2, 16.4,
              16.4, 16.4, 16.3, 16.3, 16.4, 16.5, 16.7, 16.8, 16.6, 16.6]
    after = [15.9, 15.9, 15.9, 15.9, 16.0, 15.9, 16.0, 16.0, 15.9, 16.1, 15.9, 16.1, 16.1, 15.9, 16.0,
             16.0, 16.0, 15.9, 16.6, 16.0, 15.9, 16.0, 17.8, 16.4, 15.8]
    assert faster(before, after, 0.01)
    assert not faster(before, [t + 0.4 for t in after], 0.01)  # then the central rounds overlap
    assert not faster(after, before, 0.0)


def test_a_gain_within_the_spread_is_shown_by_enough_paired_rounds():
    """Rounds spread over 13% hide a 3% gain from the trimmed every-round comparison; paired side by
    side, the rewrite wins so often that chance is ruled out (a sign test at 1%)."""
    import numpy as np

    from taso_relay.guard.speed import sign_test_p

    rng = np.random.default_rng(0)
    machine = 1.0 + 0.06 * rng.standard_normal(60)  # the state both runs of a round share
    before = list(2.3 * machine * (1 + 0.01 * rng.standard_normal(60)))
    after = list(2.23 * machine * (1 + 0.01 * rng.standard_normal(60)))
    assert faster(before, after, 0.01)
    assert sorted(after)[60 - 1 - 12] > sorted(before)[12]  # the trimmed every-round comparison fails
    assert not faster(before[:9], after[:9], 0.01)  # and 9 pairs are too few for the sign test
    assert not faster(after, before, 0.0)  # the other way round: slower
    # quick ResNeXt-50's folds: 17 wins of 25 pairs, p = 0.054 > 1%
    assert abs(sign_test_p(17, 25) - 0.0539) < 1e-3 and sign_test_p(19, 25) < 0.01 < sign_test_p(18, 25)


def test_unpaired_noise_is_not_a_gain():
    """A/A: the same module timed twice. Across many seeds a sign test at 1% passes about 1 in 100."""
    import numpy as np

    rng = np.random.default_rng(1)
    accepted = 0
    for _ in range(400):
        machine = 1.0 + 0.05 * rng.standard_normal(60)
        same = [list(2.3 * machine * (1 + 0.02 * rng.standard_normal(60))) for _ in range(2)]
        accepted += faster(same[0], same[1], 0.0)
    assert accepted <= 8  # 1% of 400 is 4; 8 allows for chance


def test_report_names_the_threads_and_cores_left_idle():
    """A rewrite's gain can hinge on the thread count, so the verdict says what it was timed with."""
    base = dict(before_s=0.002, after_s=0.001, before_rounds=[0.002] * 3, after_rounds=[0.001] * 3)
    short = SpeedCheck(threads=1, target_cores=2, **base).to_text()
    assert "1 thread)" in short and "TVM ran 1 of the target's 2 cores" in short
    full = SpeedCheck(threads=2, target_cores=2, **base).to_text()
    assert "2 threads" in full and "cores" not in full
    assert "thread" not in SpeedCheck(**base).to_text()  # not known: not claimed


@pytest.mark.parametrize("threads", ["1", "2"])
def test_runtime_threads_follows_tvm_num_threads(threads):
    import os
    import subprocess
    import sys

    env = dict(os.environ, TVM_NUM_THREADS=threads)
    code = "from taso_relay.guard.speed import runtime_threads; print(runtime_threads())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == threads


def test_a_host_slowed_from_outside_is_named_in_the_check(monkeypatch):
    """Session 30: the host ran full Inception-v3 1.5x slower without the load average showing it, and
    its ratios shifted. numpy's matmul and copy against the best rates this machine has shown show it."""
    pytest.importorskip("tvm")
    from taso_relay.cost import host_speed
    from taso_relay.guard import speed

    monkeypatch.setattr(host_speed, "slowdown_now", lambda: 2.0)
    assert speed.host_slowdown("llvm") == 2.0
    assert speed.host_slowdown({"kind": "cuda"}) is None  # a GPU's timing does not hinge on the host's copy
    timed = dict(before_s=0.002, after_s=0.001, before_rounds=[0.002] * 3, after_rounds=[0.001] * 3)
    assert "2.00x slower than the best it has shown" in SpeedCheck(host_slowdown=2.0, **timed).to_text()
    assert "best it has shown" not in SpeedCheck(host_slowdown=1.1, **timed).to_text()
    assert json.loads(json.dumps(SpeedCheck(host_slowdown=2.0, **timed).to_dict()))["host_slowdown"] == 2.0


@pytest.mark.parametrize("ones, slow", [
    ([0.1, 0.1], [False, False]),  # full Inception-v3: one timed run a round, one untimed warm-up beside it
    ([0.04, 0.03], [False, False]),  # two timed runs a round
    ([0.8, 0.6], [True, True]),  # slow runs, timed by the wall clock: no warm-up
    ([0.6, 0.3], [True, False]),  # one of each
])
def test_the_timing_rounds_fit_the_budget_with_their_warm_ups(ones, slow):
    """time_evaluator runs the function once untimed before the runs it times: session 31 saw 17 s of rounds
    for a 10 s budget on full Inception-v3 when only the timed runs were counted."""
    from taso_relay.guard.speed import plan_rounds

    budget = 10.0
    number, rounds = plan_rounds(ones, slow, budget, round_s=0.05, min_rounds=3, max_rounds=60)
    assert number * max(ones) >= 0.05 or number == 1
    spent = rounds * sum((number + (0 if s else 1)) * one for one, s in zip(ones, slow))
    assert 0.8 * budget <= spent <= budget
    assert plan_rounds(ones, slow, 0.0, 0.05, 3, 60)[1] == 3  # min_rounds whatever the budget
    assert plan_rounds([1e-6, 1e-6], [False, False], 1e3, 0.05, 3, 60)[1] == 60
    assert plan_rounds(ones, slow, float("inf"), 0.05, 3, 60)[1] == 60


def _tiny_module():
    import tvm
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4, 4), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.add(x, x))
        bb.emit_func_output(out)
    return bb.get()


def test_slow_runs_count_their_first_timed_runs_as_the_first_round(monkeypatch):
    """Runs of half a second or more (a float16 model on a CPU: half a minute) are timed one at a time:
    the runs timed to plan the rounds are the first round, not thrown away."""
    from taso_relay.guard import speed

    rounds = []
    real = speed._Timer.round
    monkeypatch.setattr(speed._Timer, "round", lambda self, number: rounds.append(number) or real(self, number))
    mod = _tiny_module()
    timed = dict(budget_s=0.0, round_s=0.0, min_rounds=3)
    check = speed.measure(mod, mod, "main", "llvm", **timed)
    assert check.number == 1 and len(check.before_rounds) == len(check.after_rounds) == 3
    assert len(rounds) == 6  # fast runs: three rounds of each timed by time_evaluator
    rounds.clear()
    monkeypatch.setattr(speed._Timer, "SLOW_S", 0.0)  # every run counts as slow
    check = speed.measure(mod, mod, "main", "llvm", **timed)
    assert check.number == 1 and len(check.before_rounds) == len(check.after_rounds) == 3
    assert len(rounds) == 4  # two more rounds of each: the first was the planning runs
