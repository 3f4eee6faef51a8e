"""The applier: numerics kept, cycles and lost values refused, index maps, dead nodes, inputs kept."""
from __future__ import annotations

import pytest
from rewrite_helpers import PAD1, assert_same_outputs, count, fixture_rules, nodes_of, rule, two_convs

from taso_relay.graph import Graph, GraphBuilder
from taso_relay.subst.apply import RewriteRejected, apply, apply_all, apply_many, creates_cycle
from taso_relay.subst.index import GraphIndex, index_of
from taso_relay.subst.match import Matcher, explain, find_matches


def only_match(g: Graph, rid: str):
    (r,) = fixture_rules(rid)
    found = find_matches(g, [r])
    assert found, explain(r, g, g.outputs[0].node)
    return found[0]


def conv_bn(relu: bool = False) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (2, 3, 7, 7))
    c = b.op("conv2d", x, b.weight("w", (5, 3, 3, 3)), padding=PAD1, strides=(2, 2))
    y = b.op("batch_norm", c, *(b.weight(n, (5,)) for n in ("gamma", "beta", "mean", "var")), epsilon=1e-3)
    return b.build([b.op("relu", y) if relu else y])


def two_matmuls(w2_from_first=False) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (4, 4))
    m1 = b.op("matmul", x, b.weight("w1", (4, 4)))
    w2 = b.op("relu", m1) if w2_from_first else b.weight("w2", (4, 6))
    return b.build([m1, b.op("matmul", x, w2)])


# ---- every known rewrite keeps the numbers ---------------------------------------------
@pytest.mark.parametrize("make, rid, gone", [
    (two_convs, "merge-parallel-conv", {"conv2d": 1, "split": 1}),
    (two_matmuls, "merge-parallel-matmul", {"matmul": 1, "split": 1}),
    (conv_bn, "fold-conv-bn", {"batch_norm": 2, "conv2d": 1, "add": 1}),
])
def test_rewrites_keep_the_numbers(make, rid, gone):
    g = make()
    rw = apply(g, only_match(g, rid))
    for op, n in gone.items():
        assert count(rw.graph, op) == n, rw.graph.pretty()
    assert rw.graph.output_types == g.output_types
    assert_same_outputs(g, rw.graph)


def test_bn_folding_moves_the_work_onto_weights():
    g = conv_bn()
    after = apply(g, only_match(g, "fold-conv-bn")).graph
    foldable = index_of(after).foldable
    # the two batch norms left compute on weights only: FoldConstant's, free at run time
    assert all(foldable[i] for i in nodes_of(after, "batch_norm"))
    assert not foldable[nodes_of(after, "conv2d")[0]]


def test_relu_fusion_and_matmul_association_keep_the_numbers():
    b = GraphBuilder()
    a, w1, w2 = b.input("a", (3, 4)), b.weight("w1", (4, 5)), b.weight("w2", (5, 2))
    g = b.build([b.op("relu", b.op("matmul", b.op("matmul", a, w1), w2))])
    for rid in ("fuse-matmul-relu", "matmul-assoc"):
        after = apply(g, only_match(g, rid)).graph
        assert_same_outputs(g, after)
    fused = apply(g, only_match(g, "fuse-matmul-relu")).graph
    assert count(fused, "relu") == 0 and count(fused, "matmul") == 2


def test_a_graph_output_that_is_replaced_is_redirected():
    g = two_convs()  # both convs are graph outputs
    after = apply(g, only_match(g, "merge-parallel-conv")).graph
    assert [after.nodes[r.node].op for r in after.outputs] == ["split", "split"]
    assert [r.index for r in after.outputs] == [0, 1]


# ---- refused rewrites --------------------------------------------------------------------
def test_a_rewrite_that_would_create_a_cycle_is_rejected():
    # m2's right operand is computed from m1: merging m1 and m2 would feed the merged matmul its own output
    g = two_matmuls(w2_from_first=True)
    (merge,) = fixture_rules("merge-parallel-matmul")
    m1, m2 = nodes_of(g, "matmul")
    (m,) = [m for m in find_matches(g, [merge]) if m.nodes == (m1, m2)]
    with pytest.raises(RewriteRejected, match="cycle"):
        apply(g, m)
    assert "would create a cycle" in explain(merge, g, m1)


def test_an_escaping_intermediate_is_refused_even_without_the_context_check():
    (fuse,) = fixture_rules("fuse-conv-relu")
    b = GraphBuilder()
    c = b.op("conv2d", b.input("x", (1, 4, 8, 8)), b.weight("w", (4, 4, 3, 3)), padding=PAD1)
    g = b.build([b.op("add", b.op("relu", c), c)])
    (m,) = Matcher(fuse).find(g)
    with pytest.raises(RewriteRejected, match="also used by"):
        apply(g, m)
    with pytest.raises(RewriteRejected, match="still used by add"):
        apply(g, m, check=False)


# ---- what the result keeps and drops -------------------------------------------------------
def test_graph_inputs_stay_and_dead_upstream_nodes_go():
    zero = rule("x-minus-x", ["x"], [("s", "sub", ["x", "x"])],
                [("one", "constant", [], {"kind": "ones", "shape": "=shape(x)"}), ("z", "sub", ["one", "one"])],
                [["s", "z"]])
    b = GraphBuilder()
    x = b.input("x", (3,))
    r = b.op("relu", x)
    g = b.build([b.op("sub", r, r)])
    (m,) = Matcher(zero).find(g)
    after = apply(g, m).graph
    assert after.input_names == ["x"]  # unused now, but the signature stays
    assert count(after, "relu") == 0  # only the match used it
    assert_same_outputs(g, after)


def test_index_map_dirty_set_hashes_and_index_agree_with_a_fresh_build():
    g = conv_bn(relu=True)
    g.hash  # hashes computed, so the applier reuses them upstream
    rw = apply(g, only_match(g, "fold-conv-bn"))
    new = rw.graph
    for old_i, new_i in enumerate(rw.old_to_new):
        if new_i >= 0:
            assert new.nodes[new_i].op == g.nodes[old_i].op
            assert new.nodes[new_i].attrs == g.nodes[old_i].attrs
    assert {new.nodes[i].op for i in rw.added} >= {"conv2d", "add", "mul"}
    (relu,) = nodes_of(new, "relu")
    assert relu in rw.dirty and relu not in rw.added  # its operand was redirected
    fresh = Graph(new.nodes, new.outputs)
    assert new.node_hashes == fresh.node_hashes
    derived, rebuilt = index_of(new), GraphIndex(fresh)
    assert derived.foldable == rebuilt.foldable and derived.by_op == rebuilt.by_op
    assert [derived.users[i] for i in range(len(new.nodes))] == list(rebuilt.users)


def test_opaque_calls_and_their_payloads_survive_a_rewrite():
    b = GraphBuilder()
    x = b.input("x", (4, 4))
    (o,) = b.opaque([x], [b.type_of(x)], payload={"call": "R.foo"}, key="k0", label="foo")
    m1 = b.op("matmul", o, b.weight("w1", (4, 4)))
    g = b.build([m1, b.op("matmul", o, b.weight("w2", (4, 2)))])
    after = apply(g, only_match(g, "merge-parallel-matmul")).graph
    assert count(after, "opaque") == 1 and after.payloads == {"k0": {"call": "R.foo"}}


# ---- several matches ---------------------------------------------------------------------------
def test_overlapping_matches_only_one_is_applied():
    (assoc,) = fixture_rules("matmul-assoc")
    b = GraphBuilder()
    a = b.input("a", (2, 3))
    ws = [b.weight(f"w{i}", s) for i, s in enumerate([(3, 4), (4, 5), (5, 6)])]
    g = b.build([b.op("matmul", b.op("matmul", b.op("matmul", a, ws[0]), ws[1]), ws[2])])
    found = find_matches(g, [assoc])
    assert len(found) == 2 and set(found[0].nodes) & set(found[1].nodes)  # they share a matmul
    assert len(find_matches(g, [assoc], overlapping=False)) == 1
    rw = apply(g, found[0])
    assert found[1].remapped(rw.old_to_new) is None  # the other one is gone with its node
    with pytest.raises(RewriteRejected, match="overlap"):
        apply_many(g, found)
    after = apply_all(g, found)
    assert after == rw.graph
    assert_same_outputs(g, after)


def test_distant_matches_applied_at_once_equal_one_after_another():
    b = GraphBuilder()
    outs = []
    for k in range(2):
        x = b.input(f"x{k}", (1, 4, 6, 6))
        outs.append(b.op("relu", b.op("conv2d", x, b.weight(f"w{k}", (4, 4, 3, 3)), padding=PAD1)))
    g = b.build(outs)
    (fuse,) = fixture_rules("fuse-conv-relu")
    found = find_matches(g, [fuse])
    assert len(found) == 2
    together = apply_many(g, found).graph
    one_by_one = apply_all(g, found)
    assert together == one_by_one and count(together, "relu") == 0
    assert_same_outputs(g, together)


def test_the_cycle_check_predicts_the_applier():
    (merge,) = fixture_rules("merge-parallel-matmul")
    for w2_from_first in (False, True):
        g = two_matmuls(w2_from_first)
        for m in find_matches(g, [merge]):
            try:
                apply(g, m)
                refused = False
            except RewriteRejected:
                refused = True
            assert creates_cycle(g, m) == refused


# ---- a target output that is an input; a mapped value only the match read --------------------------
CANCEL = rule("cancel", ["y"],
              [("a", "transpose", ["y"], {"perm": [0, 3, 1, 2]}), ("b", "transpose", ["a"], {"perm": [0, 2, 3, 1]})],
              [("u", "transpose", ["y"], {"perm": [0, 3, 1, 2]})],
              [["b", "y"], ["a", "u"]])


@pytest.mark.parametrize("shared", [False, True])
def test_a_transpose_pair_cancels_to_its_input_and_a_mapped_value_lives_only_if_read(shared):
    b = GraphBuilder()
    y = b.input("y", (1, 5, 6, 3))
    a = b.op("transpose", y, perm=(0, 3, 1, 2))
    back = b.op("relu", b.op("transpose", a, perm=(0, 2, 3, 1)))
    g = b.build([back, b.op("sigmoid", a)] if shared else [back])
    (m,) = Matcher(CANCEL).find(g)
    after = apply(g, m).graph
    # the pair is gone; the first transpose stays only where something else reads it, with no dead copy
    assert count(after, "transpose") == (1 if shared else 0)
    assert after.nodes[after.nodes[after.outputs[0].node].inputs[0].node].op == "input"
    assert_same_outputs(g, after)


def test_a_source_output_may_not_be_an_input():
    with pytest.raises(ValueError, match="source output 'y' is not a source node"):
        rule("bad", ["y"], [("r", "relu", ["y"])], [("r", "relu", ["y"])], [["y", "r"]])


def test_a_target_that_returns_an_input_keeps_the_node_that_computes_it():
    """Without a target node reading it, the input's producer (read only by the match) must stay."""
    bare = rule("bare-cancel", ["y"],
                [("a", "transpose", ["y"], {"perm": [0, 3, 1, 2]}), ("b", "transpose", ["a"], {"perm": [0, 2, 3, 1]})],
                [], [["b", "y"]])
    b = GraphBuilder()
    y = b.op("relu", b.input("x", (1, 5, 6, 3)))
    g = b.build([b.op("sigmoid", b.op("transpose", b.op("transpose", y, perm=(0, 3, 1, 2)), perm=(0, 2, 3, 1)))])
    (m,) = Matcher(bare).find(g)
    after = apply(g, m).graph
    assert count(after, "transpose") == 0 and count(after, "relu") == 1
    assert_same_outputs(g, after)


def test_an_input_named_with_an_output_index_is_refused_at_load():
    with pytest.raises(ValueError, match="target output 'y:1'"):
        rule("bad-index", ["y"], [("r", "relu", ["y"])], [], [["r", "y:1"]])
