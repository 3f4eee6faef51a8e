"""The region check: a rewrite is judged on the nodes where the graphs differ, not on the whole graph."""
from __future__ import annotations

import numpy as np
import pytest

from taso_relay.graph import GraphBuilder, TensorType
from taso_relay.guard import check_region

DEPTH = 30  # unchanged layers above and below the rewritten spot


def close(a, b) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True))


def chain(middle):
    """x -> DEPTH x (tanh, add w) -> middle(b, h) -> DEPTH x (tanh, add w) -> output."""
    b = GraphBuilder()
    h = b.input("x", (4, 8))
    for k in range(2 * DEPTH):
        if k == DEPTH:
            h = middle(b, h)
        w = b.weight(f"w{k}", (4, 8), value=np.linspace(-1, 1, 32, dtype="float32").reshape(4, 8) / (k + 1))
        h = b.op("add", b.op("tanh", h), w)
    return b.build([h])


def test_unchanged_graph_runs_nothing():
    g = chain(lambda b, h: b.op("relu", h))
    result = check_region(g, chain(lambda b, h: b.op("relu", h)), close)
    assert result.same is True and result.compared == 0 and result.evaluated == 0


def test_a_wrong_rewrite_is_caught_from_its_region_alone():
    before = chain(lambda b, h: b.op("relu", h))
    after = chain(lambda b, h: b.op("sigmoid", h))
    result = check_region(before, after, close)
    assert result.same is False
    assert result.evaluated <= 30  # a few levels around relu and sigmoid: not the 4 * DEPTH nodes


def test_same_operator_on_different_inputs_is_compared_higher_up():
    """relu(relu(x)) -> relu(x): the roots pair up but their inputs differ; the pair above is equal."""
    before = chain(lambda b, h: b.op("relu", b.op("relu", h)))
    after = chain(lambda b, h: b.op("relu", h))
    result = check_region(before, after, close)
    assert result.same is True
    assert 0 < result.evaluated <= 6


def test_matmul_reassociation_is_equal():
    def build(assoc_left: bool):
        b = GraphBuilder()
        x = b.input("x", (3, 4))
        w1 = b.weight("w1", (4, 5), value=np.full((4, 5), 0.5, "float32"))
        w2 = b.weight("w2", (5, 2), value=np.eye(5, 2, dtype="float32"))
        h = b.op("tanh", x)
        out = (b.op("matmul", b.op("matmul", h, w1), w2) if assoc_left
               else b.op("matmul", h, b.op("matmul", w1, w2)))
        return b.build([out])

    assert check_region(build(True), build(False), close).same is True


def test_cut_values_stay_consistent_with_what_is_computed_from_them():
    """A shared node used by one side while the other computes its rewritten form from its input:
    it must not get an independent random value (relu(tt(tt(y))) == tt(tt(relu(y))))."""
    def build(rewritten: bool):
        b = GraphBuilder()
        y = b.op("tanh", b.input("x", (3, 4)))
        x = b.op("transpose", b.op("transpose", y, perm=(1, 0)), perm=(1, 0))
        if rewritten:
            out = b.op("transpose", b.op("transpose", b.op("relu", y), perm=(1, 0)), perm=(1, 0))
        else:
            out = b.op("relu", x)
        return b.build([out, x])  # x is an output of both: shared

    assert check_region(build(False), build(True), close).same is True


def opaque_model(first: str, drop_second: bool):
    """first(x) -> opaque -> transpose twice (dropped when rewritten) -> output."""
    b = GraphBuilder()
    x = b.input("x", (4, 4))
    h = b.op("relu", b.op("relu", x)) if first == "relu2" else b.op(first, x)
    (o,) = b.opaque([h], [TensorType((4, 4))], payload=None, key="call0", label="relax.erfinv")
    if not drop_second:
        o = b.op("transpose", b.op("transpose", o, perm=(1, 0)), perm=(1, 0))
    return b.build([b.op("tanh", o)])


def test_opaque_call_between_rewrites_is_paired_not_evaluated():
    result = check_region(opaque_model("relu2", False), opaque_model("relu", True), close)
    assert result.same is True


def test_wrong_rewrite_feeding_an_opaque_call_is_caught():
    result = check_region(opaque_model("relu2", False), opaque_model("sigmoid", True), close)
    assert result.same is False


def test_different_output_types_differ():
    before = chain(lambda b, h: b.op("relu", h))
    b = GraphBuilder()
    after = b.build([b.op("relu", b.input("x", (8, 4)))])
    assert check_region(before, after, close).same is False


def dense(layers: int, rewritten: bool, wrong_at: int = -1):
    """Every layer rewritten (relu(relu(h)) -> relu(h)): cones are deep, no cut stays consistent."""
    b = GraphBuilder()
    h = b.input("x", (4, 8))
    for k in range(layers):
        r = b.op("relu", h) if rewritten else b.op("relu", b.op("relu", h))
        if k == wrong_at:
            r = b.op("sigmoid", h)
        w = b.weight(f"w{k}", (4, 8), value=np.full((4, 8), 0.1 * (k % 5), "float32"))
        h = b.op("add", r, w)  # no squashing: a difference carries to the output
    return b.build([h])


def test_dense_rewrites_share_values_instead_of_evaluating_twice():
    before, after = dense(80, False), dense(80, True)
    result = check_region(before, after, close)
    assert result.same is True
    # one evaluation and the rewritten nodes; both graphs in full would be len(before) + len(after)
    assert result.evaluated <= 1.25 * len(before.nodes)


def test_a_wrong_rewrite_among_dense_ones_is_caught():
    assert check_region(dense(80, False), dense(80, True, wrong_at=40), close).same is False


@pytest.mark.parametrize("load, users, threads", [(7.5, 3, 1), (0.2, 3, 2), (0.2, 1, 1)],
                         ids=["busy", "idle", "idle-user-set-one"])
def test_the_check_runs_numpy_blas_on_the_free_cores(monkeypatch, load, users, threads):
    """OpenBLAS threads spin while they wait: beside a busy core (tuning), model-sized matmuls ran 10-50x
    slower on two threads. Inside the check BLAS has the cores the load leaves free (one at least, and
    no more than the user set); outside, the user's setting is back."""
    import dataclasses
    import os

    from threadpoolctl import threadpool_info, threadpool_limits

    from taso_relay.graph.ops import registry

    def blas_threads():
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    seen = []
    matmul = registry.OPS["matmul"]
    monkeypatch.setitem(registry.OPS, "matmul", dataclasses.replace(
        matmul, ref=lambda xs, attrs: seen.append(blas_threads()) or matmul.ref(xs, attrs)))
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})  # two cores

    def build(assoc_left: bool):
        b = GraphBuilder()
        x = b.input("x", (3, 4))
        w1 = b.weight("w1", (4, 5), value=np.full((4, 5), 0.5, "float32"))
        w2 = b.weight("w2", (5, 2), value=np.eye(5, 2, dtype="float32"))
        out = (b.op("matmul", b.op("matmul", x, w1), w2) if assoc_left
               else b.op("matmul", x, b.op("matmul", w1, w2)))
        return b.build([out])

    with threadpool_limits(limits=users, user_api="blas"):  # the user's own setting: never exceeded
        assert blas_threads() == {users}
        assert check_region(build(True), build(False), close).same is True
        assert blas_threads() == {users}
    assert seen and all(s == {threads} for s in seen)


def test_stacked_samples_find_every_value_close_would_share():
    """The check shares a rewritten value with an equal original one; a vectorised prefilter finds the
    candidates. It must keep every sample TASOPass's `close` accepts (in order) and drop far ones."""
    from taso_relay.guard.numeric import _Samples
    from taso_relay.guard.close import close as _close

    rng = np.random.default_rng(0)
    base = [rng.normal(size=64).astype("float32") * 10.0 ** rng.integers(-3, 4) for _ in range(40)]
    base[3][5], base[7][0] = np.nan, np.inf
    samples = _Samples()
    for i, v in enumerate(base):
        samples.add(i, v)
        if i % 7 == 0:
            samples.near(v)  # queries between additions: the stack grows in place
    for i, v in enumerate(base):
        for probe in (v, v + np.float32(1e-6) * (1 + np.abs(v[np.isfinite(v)]).max()), -v, v * 2):
            want = [j for j, theirs in enumerate(base) if _close(theirs, probe)]
            got = [key for key, _ in samples.near(probe)]
            assert set(want) <= set(got) and got == sorted(got)
            if np.nanmax(np.abs(v)) >= 1:  # tolerances have an absolute part: tiny values all look alike
                assert len(got) <= len(want) + 1  # values far apart: few false candidates
    assert [key for key, _ in samples.near(base[3])] == [3]  # NaN matches NaN only where both have it


@pytest.mark.parametrize("block", [None, 2, 5])
def test_close_decides_as_float64_allclose_does(block, monkeypatch):
    """TASOPass's `close` works in the arrays' dtype and looks at NaN and inf only when an element
    fails; its verdicts are those of the float64 np.allclose it replaced (with float16's own bound),
    whether it takes the arrays whole or in blocks (the scale stays that of the whole reference). The
    scale is the reference's largest magnitude itself: with 1 + it, logits of 1e-9 (random-weight
    MobileNets) agreed with anything below 1e-4."""
    from taso_relay.guard import close as closeness
    from taso_relay.guard.close import close as _close

    if block is not None:
        monkeypatch.setattr(closeness, "CLOSE_BLOCK", block)

    def reference(a, b):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        finite = np.abs(a64[np.isfinite(a64)])
        scale = max(float(finite.max()) if finite.size else 0.0, float(np.finfo(a.dtype).tiny))
        tol = max(1e-4, 10 * float(np.finfo(a.dtype).eps))  # float16: ten rounding steps, 9.8e-3
        return bool(np.allclose(b64, a64, rtol=0.0, atol=tol * scale, equal_nan=True))

    rng = np.random.default_rng(1)
    specials = (np.nan, np.inf, -np.inf, 3e38, -3e38, 0.0)
    verdicts = set()
    for trial in range(600):
        dtype = ("float32", "float64", "float16")[trial % 3]
        a = (rng.normal(size=(3, 5)) * 10.0 ** rng.integers(-4, 5)).astype(dtype)
        b = a + (rng.normal(size=a.shape) * 10.0 ** rng.integers(-9, 0) * (1 + np.abs(a).max())).astype(dtype)
        for x in (a, b):
            if rng.random() < 0.4:
                with np.errstate(over="ignore"):  # 3e38 is inf in float16
                    x.flat[rng.integers(a.size)] = specials[rng.integers(len(specials))]
        if rng.random() < 0.3:
            b.flat[rng.integers(a.size)] = a.flat[rng.integers(a.size)]
        assert _close(a, b) == reference(a, b), (a, b)
        verdicts.add(_close(a, b))
    assert verdicts == {True, False}  # both verdicts were exercised
    assert not _close(np.zeros(3, "float32"), np.zeros(3, "float64")) and _close(np.zeros(0), np.zeros(0))
    assert not _close(np.float32([0, 2]), np.float32([3e-4, 2]))  # 3e-4 in float32 is above the bound 2e-4
    logits = np.float32([1e-9, -2e-9, 3e-9])
    assert not _close(logits, -logits) and _close(logits, logits * np.float32(1 + 1e-6))
    assert _close(np.zeros(3, "float32"), np.zeros(3, "float32"))
    assert not _close(np.zeros(3, "float32"), np.float32([0, 1e-30, 0]))
    for trial in range(2000):  # differences on the bound itself, where float32 rounding would decide
        a = (rng.normal(size=4) * 10.0 ** rng.integers(-3, 4)).astype("float32")
        b = a.copy()
        atol = 1e-4 * np.abs(a).max()
        b[trial % 4] = a[trial % 4] + atol * rng.choice([1, -1]) * (1 + rng.normal() * 1e-7)
        assert _close(a, b) == reference(a, b), (a, b)
    nan_at_1 = np.array([1.0, np.nan, np.inf], "float32")
    assert _close(nan_at_1, nan_at_1.copy()) and reference(nan_at_1, nan_at_1.copy())
    assert not _close(nan_at_1, np.array([1.0, 0.0, np.inf], "float32"))


def test_close_takes_bfloat16_as_a_float_and_a_narrow_inner_type_for_float32_outputs():
    """bfloat16 (ml_dtypes) is compared as a float with its own rounding, not element for element; a function
    that computes in bfloat16 or float16 and casts its outputs to float32 has them compared with that type's
    rounding (_close_for); float16 weights cast to float32 before any arithmetic do not loosen the check."""
    import ml_dtypes

    from taso_relay.graph import GraphBuilder
    from taso_relay.guard.close import close as _close, close_for as _close_for

    bf16 = np.dtype(ml_dtypes.bfloat16)
    a = np.array([8.25, -3.0, 0.5], bf16)
    assert _close(a, (a.astype(np.float32) + np.float32(0.03125)).astype(bf16))  # a step or two of 8.25's
    assert not _close(a, (a.astype(np.float32) + np.float32(1.0)).astype(bf16))
    f32 = a.astype(np.float32)
    near = f32 + np.float32(0.03125)  # 0.4% of the magnitude: bfloat16 rounding, far outside float32's 1e-4

    def model(inner: str, cast_first: bool):
        b = GraphBuilder()
        x = b.input("x", (4, 8))
        w = b.weight("w", (8, 3), dtype="float16" if cast_first else "float32")
        if cast_first:  # float16 storage, float32 arithmetic
            y = b.op("matmul", x, b.op("cast", w, dtype="float32"))
        else:
            y = b.op("cast", b.op("matmul", b.op("cast", x, dtype=inner), b.op("cast", w, dtype=inner)),
                     dtype="float32")
        return b.build([y])

    assert not _close(f32, near) and not _close_for(None)(f32, near)
    assert _close_for(model("bfloat16", False))(f32, near)
    assert _close_for(model("float16", False))(f32, f32 + np.float32(0.02))  # ten float16 steps: 1% of 8.25
    assert not _close_for(model("float16", False))(f32, near + np.float32(0.1))
    assert not _close_for(model("float32", True))(f32, near)  # computes in float32

    def moved_or_folded(how: str):
        """float16 values that are only transposed (input) or computed from weights (folded) before a cast."""
        b = GraphBuilder()
        if how == "moved":
            x = b.op("cast", b.op("transpose", b.input("x", (8, 4), dtype="float16"), perm=(1, 0)), dtype="float32")
            w = b.weight("w", (8, 3))
        else:
            x = b.input("x", (4, 8))
            w16 = b.weight("w", (8, 3), dtype="float16")
            w = b.op("cast", b.op("mul", w16, w16), dtype="float32")
        return b.build([b.op("matmul", x, w)])

    for how in ("moved", "folded"):
        assert not _close_for(moved_or_folded(how))(f32, near), how

