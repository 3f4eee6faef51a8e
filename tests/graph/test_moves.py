"""Chains of transposes and reshapes written shorter (graph/moves.py): the same element in every place."""
from __future__ import annotations

import random

import numpy as np
import pytest

from taso_relay.graph import GraphBuilder
from taso_relay.graph.interpreter import evaluate
from taso_relay.graph.moves import MOVES, axes_map, collapse_moves, moved, same_moves, shorter_forms


def T(*perm):
    return ("transpose", {"perm": perm})


def R(*shape):
    return ("reshape", {"shape": shape})


@pytest.mark.parametrize("shape, steps, want", [
    # an NHWC map to NCHW, reshaped to tokens (N, C, H * W), transposed to (N, H * W, C): one reshape
    ((2, 4, 5, 3), [T(0, 3, 1, 2), R(2, 3, 20), T(0, 2, 1)], [R(2, 20, 3)]),
    # a detection head's output of an NHWC conv: to NCHW, (N, A, K, H, W), (N, H, W, A, K), (N, H * W * A, K)
    ((2, 4, 5, 12), [T(0, 3, 1, 2), R(2, 3, 4, 4, 5), T(0, 3, 4, 1, 2), R(2, 60, 4)], [R(2, 60, 4)]),
    # a flatten after global pooling in NHWC
    ((2, 1, 1, 3), [T(0, 3, 1, 2), R(2, 3)], [R(2, 3)]),
    # a transpose and its inverse around a reshape that splits nothing they move
    ((2, 3, 4), [T(2, 0, 1), R(4, 6), R(4, 2, 3), T(1, 2, 0)], []),
])
def test_a_chain_that_keeps_the_order_is_a_reshape(shape, steps, want):
    forms = shorter_forms(shape, moved(shape, steps).shape, steps)
    assert forms[0] == want
    assert same_moves(shape, steps, forms[0])


def test_tokens_back_to_nchw_can_be_written_with_the_transpose_last():
    """(N, H * W, C) transposed and reshaped to (N, C, H, W) is also a reshape to (N, H, W, C) and a transpose
    to NCHW: the form the layout rules carry on down."""
    steps = [T(0, 2, 1), R(2, 3, 4, 5)]
    forms = shorter_forms((2, 20, 3), (2, 3, 4, 5), steps)
    assert [R(2, 4, 5, 3), T(0, 3, 1, 2)] in forms and steps in forms
    assert all(same_moves((2, 20, 3), steps, f) for f in forms)


def test_axes_are_split_where_a_reshape_cuts_them_and_not_followed_where_it_cuts_unevenly():
    assert axes_map((2, 20, 3), [T(0, 2, 1), R(2, 3, 4, 5)]) == ([2, 4, 5, 3], [[0], [3], [1], [2]])
    assert axes_map((6, 4), [R(4, 6)]) is None  # the 6 would be cut at 4
    assert shorter_forms((6, 4), (6, 4), [R(4, 6), T(1, 0)]) == []


def _random_chain(rng: random.Random, shape):
    steps, cur = [], list(shape)
    for _ in range(rng.randint(1, 5)):
        if rng.random() < 0.5:
            perm = list(range(len(cur)))
            rng.shuffle(perm)
            steps.append(T(*perm))
            cur = [cur[p] for p in perm]
        else:
            left, dims = int(np.prod(cur)), []
            while left > 1 and len(dims) < 5:
                d = rng.choice([f for f in range(2, left + 1) if left % f == 0])
                dims.append(d)
                left //= d
            dims += [left] if left > 1 else []
            if rng.random() < 0.3:
                dims.insert(rng.randrange(len(dims) + 1), 1)
            steps.append(R(*dims))
            cur = dims
    return steps


def test_every_form_moves_every_element_as_the_chain_does_and_none_has_more_transposes():
    rng = random.Random(0)
    written = 0
    for _ in range(3000):
        shape = tuple(rng.choice([1, 2, 3, 4, 5, 6]) for _ in range(rng.randint(1, 5)))
        steps = _random_chain(rng, shape)
        forms = shorter_forms(shape, moved(shape, steps).shape, steps)
        for form in forms:
            assert same_moves(shape, steps, form), (shape, steps, form)
            assert len(form) <= 3 and sum(op == "transpose" for op, _ in form) <= 1
        written += bool(forms)
        if forms:
            assert sum(op == "transpose" for op, _ in forms[0]) <= sum(op == "transpose" for op, _ in steps)
    assert written > 1500  # most random chains are followed


def _head(shared: bool):
    """An NHWC map taken to NCHW, reshaped to tokens and transposed, then added to itself; with `shared` the
    NCHW value is also an output."""
    b = GraphBuilder()
    x = b.input("x", (2, 4, 5, 3))
    nchw = b.op("transpose", x, perm=(0, 3, 1, 2))
    tokens = b.op("transpose", b.op("reshape", nchw, shape=(2, 3, 20)), perm=(0, 2, 1))
    y = b.op("relu", tokens)
    return b.build([y, nchw] if shared else [y])


@pytest.mark.parametrize("shared", [False, True], ids=["alone", "nchw_value_read_elsewhere"])
def test_collapse_replaces_the_chain_and_keeps_what_else_is_read(shared):
    g = _head(shared)
    out, said = collapse_moves(g)
    assert len(said) == 1 and "=> reshape[2, 20, 3]" in said[0]
    counts = out.op_counts()
    assert counts.get("transpose", 0) == (1 if shared else 0) and counts["reshape"] == 1
    x = np.random.default_rng(0).standard_normal((2, 4, 5, 3)).astype(np.float32)
    for want, got in zip(evaluate(g, {"x": x}), evaluate(out, {"x": x})):
        np.testing.assert_array_equal(got, want)


def test_collapse_leaves_a_chain_no_shorter_form_improves():
    b = GraphBuilder()
    x = b.input("x", (2, 20, 3))
    g = b.build([b.op("reshape", b.op("transpose", x, perm=(0, 2, 1)), shape=(2, 3, 4, 5))])
    assert collapse_moves(g)[1] == []  # two nodes, one transpose either way
    out, said = collapse_moves(g, layout=True)  # the layout step wants the transpose last
    assert len(said) == 1 and [n.op for n in out.nodes] == ["input", "reshape", "transpose"]
    assert collapse_moves(out, layout=True)[1] == []


def test_collapse_leaves_chains_of_weights_to_fold_constant():
    """A bias reshaped and transposed is computed at compile time: rewriting it gains nothing, and the report
    would list every one."""
    b = GraphBuilder()
    x = b.input("x", (2, 4, 5, 3))
    bias = b.op("transpose", b.op("reshape", b.weight("b", (3,)), shape=(1, 3, 1, 1)), perm=(0, 2, 3, 1))
    g = b.build([b.op("add", x, b.op("reshape", bias, shape=(1, 1, 1, 3)))])
    assert collapse_moves(g)[1] == []


def test_a_lone_transpose_of_size_one_axes_is_written_as_a_reshape_and_a_real_one_is_left():
    """ECA's (N, C, 1, 1) gate turned to NHWC moves no element: a reshape (a view), not a copy."""
    b = GraphBuilder()
    x = b.input("x", (2, 3, 1, 1))
    y = b.input("y", (2, 3, 4, 1))
    g = b.build([b.op("relu", b.op("transpose", x, perm=(0, 2, 3, 1))),
                 b.op("relu", b.op("transpose", y, perm=(0, 2, 3, 1)))])
    out, said = collapse_moves(g)
    assert len(said) == 1 and "=> reshape[2, 1, 1, 3]" in said[0]
    assert out.op_counts()["transpose"] == 1 and out.op_counts()["reshape"] == 1
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3, 1, 1),
             "y": np.arange(24, dtype=np.float32).reshape(2, 3, 4, 1)}
    for want, got in zip(evaluate(g, feeds), evaluate(out, feeds)):
        np.testing.assert_array_equal(got, want)


def _unfolded_patches(conv_reads: bool = True):
    """MobileViT's unfolding of an NHWC conv's output into 2 x 2 patches, written for NCHW: (N, C, H, W) to
    (N, C, nh, ph, nw, pw), to (N, C, ph, pw, nh, nw), to (N, C, P, N'); then a relu, and the transpose to NHWC
    a converted 1x1 conv reads (`conv_reads`; else a matmul of attention heads reads it)."""
    b = GraphBuilder()
    y = b.input("y", (1, 4, 6, 3))
    x = b.op("transpose", y, perm=(0, 3, 1, 2))
    x = b.op("reshape", b.op("transpose", b.op("reshape", x, shape=(1, 3, 2, 2, 3, 2)), perm=(0, 1, 3, 5, 2, 4)),
             shape=(1, 3, 4, 6))
    x = b.op("relu", x)
    if conv_reads:
        return b.build([b.op("transpose", x, perm=(0, 2, 3, 1))])
    return b.build([b.op("matmul", x, b.weight("w", (6, 2)))])


def test_in_the_layout_step_an_unfolding_of_an_nhwc_value_ends_with_the_transpose_to_nchw():
    """The layout rules carry that last transpose on down (through the residual add to the folding back), so the
    chain is written as the moves of the NHWC data and then NHWC to NCHW; elsewhere as one transpose."""
    g = _unfolded_patches()
    out, said = collapse_moves(g, layout=True, carried=frozenset({"relu"}))
    ops = [(n.op, n.attr("perm") if n.op == "transpose" else None) for n in out.nodes if n.op in MOVES]
    assert len(said) == 1 and ops[-2:] == [("transpose", (0, 3, 1, 2)), ("transpose", (0, 2, 3, 1))], said
    assert len(ops) == 5  # reshape, transpose, reshape of the NHWC data
    plain, _ = collapse_moves(g)
    assert plain.op_counts()["transpose"] == 2  # its own and the conv's
    # where nothing carried the transpose away, the next collapse writes the one-transpose form, and stops there
    again, _ = collapse_moves(out, layout=True, carried=frozenset({"relu"}))
    assert again.op_counts()["transpose"] == 2 and collapse_moves(again, layout=True)[1] == []
    # read by no conv (EfficientViT's heads), or through an operator the rules do not carry it through: one transpose
    for other, carried in ((_unfolded_patches(conv_reads=False), frozenset({"relu"})), (g, frozenset())):
        assert collapse_moves(other, layout=True, carried=carried)[0].op_counts()["transpose"] == 1 + (other is g)
    y = np.arange(72, dtype=np.float32).reshape(1, 4, 6, 3)
    for got in (evaluate(out, {"y": y})[0], evaluate(plain, {"y": y})[0], evaluate(again, {"y": y})[0]):
        np.testing.assert_array_equal(got, evaluate(g, {"y": y})[0])
