"""One proof for both directions of an equivalence, and never for a direction that needs more."""
from __future__ import annotations

from dataclasses import replace

from sample_rules import CONV, CONV_VARS, n, rule
from taso_relay.subst import load_rules, save_rules
from taso_relay.verifier.mirror import covered_outputs
from taso_relay.verifier.prover import PROVED, UNKNOWN, build_query
from taso_relay.verifier.run import _is_current, rule_digest, verify_file, verify_pair

EX = {"inputs": {"x": [1, 4, 5, 5], "w1": [3, 4, 3, 3], "w2": [3, 4, 3, 3]}, "vars": CONV_VARS}
# the same equivalence in both directions, with the input names swapped in the second
FACTOR = rule("factor", ["x", "w1", "w2"],
              [n("c1", "conv2d", "x", "w1", **CONV), n("c2", "conv2d", "x", "w2", **CONV), n("s", "add", "c1", "c2")],
              [n("w", "add", "w1", "w2"), n("c", "conv2d", "x", "w", **CONV)],
              [["s", "c"]], EX, constraints=["shape(w1) == shape(w2)"])
EXPAND = rule("expand", ["x", "w1", "w2"],
              [n("w", "add", "w2", "w1"), n("c", "conv2d", "x", "w", **CONV)],
              [n("c1", "conv2d", "x", "w2", **CONV), n("c2", "conv2d", "x", "w1", **CONV), n("s", "add", "c1", "c2")],
              [["c", "s"]], EX, constraints=["shape(w2) == shape(w1)"])


def _dicts(nodes):
    return [{"id": x.id, "op": x.op, "inputs": list(x.inputs), "attrs": dict(x.attrs)} for x in nodes]


# the expansion without the equal-shape constraint: wrong where w1 and w2 broadcast
EXPAND_BROADCAST = rule("expand_broadcast", ["x", "w1", "w2"], _dicts(EXPAND.source), _dicts(EXPAND.target),
                        [["c", "s"]], EX)


def test_mirror_directions_cover_each_other():
    qa, qb = build_query(FACTOR), build_query(EXPAND)
    assert covered_outputs(qa, qb) == [0]
    assert covered_outputs(qb, qa) == [0]


def test_a_direction_with_fewer_premises_is_not_covered():
    qa, qb = build_query(FACTOR), build_query(EXPAND_BROADCAST)
    assert covered_outputs(qa, qb) is None  # nothing in qb says the weights have one shape


def test_verify_pair_proves_once_and_reports_the_cover():
    (va, _), (vb, _) = verify_pair(FACTOR, EXPAND, timeout=10, numerics=False)
    assert va["status"] == vb["status"] == PROVED
    assert sum("covered_by" in v for v in (va, vb)) == 1
    covered = va if "covered_by" in va else vb
    assert covered["covered_by"] == ("factor" if covered is vb else "expand")


def test_verify_pair_never_proves_the_broadcasting_direction():
    (va, _), (vb, _) = verify_pair(FACTOR, EXPAND_BROADCAST, timeout=5, numerics=False)
    assert va["status"] == PROVED
    assert vb["status"] != PROVED and "covered_by" not in vb


def _verified_pair():
    """FACTOR and EXPAND of one equivalence with the verdicts verify_pair gives them: (cover, mirror)."""
    pair = [replace(r, provenance={"equivalence": "e1"}) for r in (FACTOR, EXPAND)]
    verdicts = verify_pair(*pair, timeout=10, numerics=False)
    a, b = (replace(r, verification=v) for r, (v, _) in zip(pair, verdicts))
    return (b, a) if "covered_by" in a.verification else (a, b)


def test_a_mirror_is_current_only_while_its_cover_is():
    cover, mirror = _verified_pair()
    assert mirror.verification["covered_digest"] == rule_digest(cover)
    assert _is_current(mirror, {cover.id: cover, mirror.id: mirror})
    assert not _is_current(mirror, {mirror.id: mirror})  # the cover is gone
    assert not _is_current(mirror)
    unknown = replace(cover, verification={**cover.verification, "status": UNKNOWN})
    assert not _is_current(mirror, {cover.id: unknown})
    old_axioms = replace(cover, verification={**cover.verification, "axioms_digest": "0" * 16})
    assert not _is_current(mirror, {cover.id: old_axioms})
    # the cover changed and was proved again on its own: the mirror borrowed an older proof
    changed = replace(cover, example={**cover.example, "inputs": {**cover.example["inputs"], "x": [2, 4, 5, 5]}})
    changed = replace(changed, verification={**cover.verification, "rule_digest": rule_digest(changed)})
    assert _is_current(changed) and not _is_current(mirror, {cover.id: changed})
    legacy = replace(mirror, verification={k: v for k, v in mirror.verification.items() if k != "covered_digest"})
    assert not _is_current(legacy, {cover.id: cover})


def test_a_stale_mirror_is_proved_again_with_its_cover(tmp_path):
    """Re-verifying re-proves the whole equivalence, so the mirror is recorded afresh, not proved alone."""
    cover, mirror = _verified_pair()
    legacy = replace(mirror, verification={k: v for k, v in mirror.verification.items() if k != "covered_digest"})
    path = tmp_path / "pair.json"
    save_rules(path, [cover, legacy])
    result = verify_file(path, workers=1, timeout=10, numerics=False)
    assert result.reused == 0
    again = {r.id: r for r in load_rules(path)}
    assert again[mirror.id].verification["covered_by"] == cover.id
    assert again[mirror.id].verification["covered_digest"] == rule_digest(again[cover.id])
    assert verify_file(path, workers=1, timeout=10, numerics=False).reused == 2
