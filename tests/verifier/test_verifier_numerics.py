"""Float32 errors are recorded; a target that overflows where its source does not is flagged."""
from __future__ import annotations

from sample_rules import CORRECT, n, rule
from taso_relay.verifier.numerics import FLOOR, measure

DIV_DISTRIB = next(r for r in CORRECT if r.id == "div_distrib")  # (a+b)/c => a/c + b/c
DIV_UNDISTRIB = rule("div_undistrib", ["a", "b", "c"],
                     [n("d1", "div", "a", "c"), n("d2", "div", "b", "c"), n("s", "add", "d1", "d2")],
                     [n("s", "add", "a", "b"), n("d", "div", "s", "c")],
                     [["s", "d"]], {"inputs": {"a": [2, 3], "b": [2, 3], "c": [2, 3]}})


def test_factoring_a_division_is_flagged_and_distributing_it_is_not():
    assert measure(DIV_UNDISTRIB)["flags"] == ["overflow"]
    assert measure(DIV_UNDISTRIB)["precision_sensitive"]
    assert not measure(DIV_DISTRIB)["precision_sensitive"]


def test_every_sample_rule_has_small_float32_error_and_no_flag():
    for r in CORRECT:
        m = measure(r)
        assert m["shapes"] >= 2, r.id  # the example and at least one rescaled variant
        assert 0 <= m["float32"]["max_rel_err_target"] < FLOOR["float32"], (r.id, m)
        assert not m["precision_sensitive"], (r.id, m)
