"""The matcher: structure, attributes, commutativity, constraints, context checks, explanations."""
from __future__ import annotations

import pytest
from rewrite_helpers import PAD1, fixture_rules, nodes_of, rule, two_convs

from taso_relay.graph import Graph, GraphBuilder
from taso_relay.subst.match import Matcher, check_context, explain, find_matches, match_at


def conv_relu(extra_use=False, on_weights=False) -> Graph:
    b = GraphBuilder()
    x = b.weight("wx", (1, 4, 8, 8)) if on_weights else b.input("x", (1, 4, 8, 8))
    c = b.op("conv2d", x, b.weight("w", (4, 4, 3, 3)), padding=PAD1)
    r = b.op("relu", c)
    outs = [r]
    if extra_use:
        outs = [b.op("add", r, c)]
    return b.build(outs)


# ---- structure and attributes ---------------------------------------------------------
def test_parallel_convs_match_as_one_two_output_match_in_both_orders():
    (merge,) = fixture_rules("merge-parallel-conv")
    g = two_convs()
    found = find_matches(g, [merge])
    c1, c2 = nodes_of(g, "conv2d")
    assert sorted(m.nodes for m in found) == [(c1, c2), (c2, c1)]
    m = found[0]
    assert m.variables == {"s": (1, 1), "p": PAD1, "d": (1, 1), "a": "none"}
    assert [g.nodes[r.node].op for r in m.inputs] == ["input", "weight", "weight"]
    assert len(m.source_outputs) == 2


def test_a_variable_bound_twice_must_agree():
    (merge,) = fixture_rules("merge-parallel-conv")
    g = two_convs(stride2=(2, 2))
    assert find_matches(g, [merge]) == []
    why = explain(merge, g, nodes_of(g, "conv2d")[0])
    assert "does not apply" in why and "strides" in why and "(2, 2)" in why


def test_a_failed_constraint_is_named():
    (merge,) = fixture_rules("merge-parallel-conv")
    g = two_convs(kernel2=1)
    assert find_matches(g, [merge]) == []
    assert "dim(w1, 2) == dim(w2, 2)" in match_at(merge, g, nodes_of(g, "conv2d")[0]).reason


def test_an_attribute_the_pattern_omits_must_have_its_default():
    (fuse,) = fixture_rules("fuse-matmul-relu")
    b = GraphBuilder()
    a, w = b.input("a", (2, 4)), b.weight("w", (4, 3))
    g = b.build([b.op("relu", b.op("matmul", a, w, activation="sigmoid"))])
    assert find_matches(g, [fuse]) == []
    assert "activation" in match_at(fuse, g, 3).reason


def test_variables_inside_tuples_bind_elementwise():
    sym = rule("symmetric-pad", ["x", "w"],
               [("c", "conv2d", ["x", "w"], {"padding": ("?p", "?p", "?p", "?p")})],
               [("f", "conv2d", ["x", "w"], {"padding": ("?p", "?p", "?p", "?p")})], [["c", "f"]])
    for padding, expected in [((1, 1, 1, 1), 1), ((1, 0, 1, 0), 0)]:
        b = GraphBuilder()
        g = b.build([b.op("conv2d", b.input("x", (1, 2, 5, 5)), b.weight("w", (2, 2, 3, 3)), padding=padding)])
        assert len(Matcher(sym).find(g)) == expected


def test_commutative_operands_match_in_either_order_but_others_do_not():
    for op, expected in [("add", 1), ("sub", 0)]:
        r = rule(f"{op}-relu-first", ["x", "y"], [("r", "relu", ["x"]), ("s", op, ["r", "y"])],
                 [("r2", "relu", ["x"]), ("s2", op, ["r2", "y"])], [["s", "s2"]])
        b = GraphBuilder()
        x, y = b.input("x", (3,)), b.input("y", (3,))
        g = b.build([b.op(op, y, b.op("relu", x))])  # relu is the *second* operand
        assert len(Matcher(r).find(g)) == expected, op


def test_multi_output_nodes_match_by_output_index():
    r = rule("split-swap", ["x"], [("s", "split", ["x"], {"axis": 0, "sizes": ("?a", "?b")}),
                                   ("n", "neg", ["s:1"])],
             [("s2", "split", ["x"], {"axis": 0, "sizes": ("?a", "?b")}), ("n2", "neg", ["s2:1"])],
             [["s:0", "s2:0"], ["n", "n2"]])
    b = GraphBuilder()
    s0, s1 = b.op("split", b.input("x", (5,)), axis=0, sizes=(2, 3))
    g1 = b.build([s0, b.op("neg", s1)])
    assert len(Matcher(r).find(g1)) == 1
    b = GraphBuilder()
    s0, s1 = b.op("split", b.input("x", (5,)), axis=0, sizes=(2, 3))
    g0 = b.build([s1, b.op("neg", s0)])
    assert Matcher(r).find(g0) == []
    assert "output 1" in match_at(r, g0, 2).reason


def test_target_that_does_not_type_check_is_no_match():
    # concat along axis 1 needs equal first dimensions: fails for these shapes
    r = rule("concat-mm", ["x", "w1", "w2"],
             [("m1", "matmul", ["x", "w1"]), ("m2", "matmul", ["x", "w2"])],
             [("w", "concat", ["w1", "w2"], {"axis": 0}), ("m", "matmul", ["x", "w"]),
              ("s", "split", ["m"], {"axis": 1, "sizes": "=(dim(w1, 1), dim(w2, 1))"})],
             [["m1", "s:0"], ["m2", "s:1"]])
    b = GraphBuilder()
    x = b.input("x", (2, 4))
    g = b.build([b.op("matmul", x, b.weight("w1", (4, 3))), b.op("matmul", x, b.weight("w2", (4, 5)))])
    assert Matcher(r).find(g) == []
    assert "target does not instantiate" in match_at(r, g, nodes_of(g, "matmul")[0]).reason


def test_a_pattern_input_may_not_be_a_value_the_match_computes():
    r = rule("relu-add", ["x", "y"], [("r", "relu", ["x"]), ("s", "add", ["r", "y"])],
             [("r2", "relu", ["x"]), ("s2", "add", ["r2", "y"])], [["s", "s2"]])
    b = GraphBuilder()
    rr = b.op("relu", b.input("x", (3,)))
    g = b.build([b.op("add", rr, rr)])
    assert Matcher(r).find(g) == []
    assert "which the match itself computes" in match_at(r, g, 2).reason


def test_a_rule_with_an_input_the_source_never_uses_is_reported_unmatchable():
    r = rule("unbound", ["x", "z"], [("r", "relu", ["x"])], [("r2", "relu", ["z"])], [["r", "r2"]])
    m = Matcher(r)
    assert m.problem and "'z'" in m.problem
    b = GraphBuilder()
    g = b.build([b.op("relu", b.input("x", (3,)))])
    assert m.find(g) == []
    assert "cannot be bound" in explain(r, g, 1)


# ---- context: escaping intermediates, weights, FoldConstant ---------------------------------
def test_an_escaping_intermediate_is_rejected_with_a_reason():
    (fuse,) = fixture_rules("fuse-conv-relu")
    g = conv_relu(extra_use=True)
    (m,) = Matcher(fuse).find(g)  # structurally it matches...
    reason = check_context(m, g)  # ...but the conv's output is also used by the add
    assert reason is not None and "also used by" in reason and "add" in reason
    assert find_matches(g, [fuse]) == []
    assert "also used by" in explain(fuse, g, nodes_of(g, "relu")[0])


def test_an_intermediate_that_is_a_graph_output_escapes_too():
    (fuse,) = fixture_rules("fuse-conv-relu")
    b = GraphBuilder()
    c = b.op("conv2d", b.input("x", (1, 4, 8, 8)), b.weight("w", (4, 4, 3, 3)), padding=PAD1)
    g = b.build([b.op("relu", c), c])
    (m,) = Matcher(fuse).find(g)
    assert "graph output" in check_context(m, g)


def test_a_weight_input_must_be_weight_only():
    (merge,) = fixture_rules("merge-parallel-conv")
    g = two_convs(w2_from_activation=True)
    assert find_matches(g, [merge]) == []
    assert "must be weight-only" in explain(merge, g, nodes_of(g, "conv2d")[0])


def test_weight_only_computations_are_left_for_fold_constant():
    (fuse,) = fixture_rules("fuse-conv-relu")
    g = conv_relu(on_weights=True)
    assert len(Matcher(fuse).find(g)) == 1
    assert find_matches(g, [fuse]) == []
    assert "FoldConstant" in explain(fuse, g, nodes_of(g, "relu")[0])


def test_opaque_nodes_are_never_part_of_a_match():
    (fuse,) = fixture_rules("fuse-conv-relu")
    b = GraphBuilder()
    c = b.op("conv2d", b.input("x", (1, 4, 8, 8)), b.weight("w", (4, 4, 3, 3)), padding=PAD1)
    (o,) = b.opaque([c], [b.type_of(c)], payload="call", key="k0", label="mystery")
    g = b.build([b.op("relu", o)])
    assert find_matches(g, [fuse]) == []
    assert "needs conv2d" in explain(fuse, g, 4)


# ---- explanations ------------------------------------------------------------------------------
def test_explain_names_the_rule_the_place_and_the_reason():
    fuse, merge = fixture_rules("fuse-conv-relu", "merge-parallel-matmul")
    g = conv_relu()
    assert [n.op for n in g.nodes] == ["input", "weight", "conv2d", "relu"]
    assert explain(fuse, g, 2).startswith("rule fuse-conv-relu applies at %2 conv2d: relu%3")
    assert explain(fuse, g, 3).startswith("rule fuse-conv-relu applies at %3 relu: relu%3")
    assert explain(merge, g, 2) == ("rule merge-parallel-matmul does not apply at %2 conv2d: the source "
                                    "pattern has no conv2d (its operators: matmul)")
    assert "there is no node %99" in explain(fuse, g, 99)
    g2 = two_convs()
    assert "no relu among the users" in explain(fuse, g2, nodes_of(g2, "conv2d")[1])


@pytest.mark.parametrize("rid", ["merge-parallel-conv", "merge-parallel-matmul", "fuse-conv-relu",
                                 "fuse-matmul-relu", "fold-conv-bn", "matmul-assoc"])
def test_every_fixture_rule_matches_its_own_example_source(rid):
    (r,) = fixture_rules(rid)
    g = r.example_graph("source")
    found = Matcher(r).find(g)
    assert found, explain(r, g, g.outputs[0].node)


# ---- patterns in unconnected parts ----------------------------------------------------------
RELU_PAIR = rule("relu-pair", ["x1", "x2"], [("r1", "relu", ["x1"]), ("r2", "relu", ["x2"])],
                 [("c", "concat", ["x1", "x2"], {"axis": 1}), ("r", "relu", ["c"]),
                  ("s", "split", ["r"], {"axis": 1, "sizes": "=(dim(x1, 1), dim(x2, 1))"})],
                 [["r1", "s:0"], ["r2", "s:1"]])


def test_a_pattern_in_parts_matches_nearby_places_only():
    b = GraphBuilder()
    a, c = b.op("split", b.input("x", (2, 6)), axis=1, sizes=(2, 4))
    near1, near2 = b.op("relu", a), b.op("relu", c)  # siblings: two edges apart
    far = b.op("neg", near2)
    for _ in range(3):
        far = b.op("neg", far)
    far = b.op("relu", far)  # many edges from near1
    g = b.build([near1, b.op("add", near2, near2), far])
    found = Matcher(RELU_PAIR).find(g)
    relus = nodes_of(g, "relu")
    assert sorted(m.nodes for m in found) == [(relus[0], relus[1]), (relus[1], relus[0])]
    assert "no relu within 3 edges" in match_at(RELU_PAIR, g, relus[2]).reason
    assert len(Matcher(RELU_PAIR, gap=8).find(g)) == 6  # every ordered pair, given room


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_rule_that_consumes_a_constant_matches_it_in_the_graphs_float_type(dtype):
    """matmul(mul(I, s), w) => mul(w, s): a float16 graph's identity matrix (made by an earlier rewrite in
    float16) is matched as a float32 one is; the rewrite keeps the float type."""
    from taso_relay.subst import default_rules
    from taso_relay.subst.apply import apply

    shipped = next(r for r in default_rules() if r.id == "t3-804059b6")
    b = GraphBuilder()
    s, w = b.weight("s", (), dtype), b.weight("w", (4, 6), dtype)
    x = b.input("x", (4, 4), dtype)
    eye = b.op("constant", kind="identity_matrix", shape=(4, 4), dtype=dtype)
    out = b.op("add", b.op("matmul", b.op("mul", eye, s), w), b.op("matmul", x, w))
    graph = b.build([out])
    found = Matcher(shipped).find(graph)
    assert len(found) == 1
    after = apply(graph, found[0], check=False).graph  # weights only: the pass would leave it to FoldConstant
    assert "constant" not in [n.op for n in after.nodes] and after.output_types == graph.output_types
