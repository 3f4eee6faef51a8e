"""The Z3 shape rules agree with the operator table's shape inference on concrete shapes."""
from __future__ import annotations

import itertools
import random

import pytest
import z3

from taso_relay.graph import GraphBuilder
from taso_relay.graph.types import GraphError
from taso_relay.verifier import typing as TY
from taso_relay.verifier import vocab as V
from taso_relay.verifier.encode import encode_op

CASES = [
    ("conv2d", [(1, 4, 5, 5), (6, 2, 3, 3)], dict(strides=(2, 1), padding=(1, 0, 1, 2), dilation=(1, 2), groups=2,
                                                  activation="relu")),
    ("conv2d", [(2, 3, 4, 4), (5, 3, 1, 1)], {}),
    ("conv2d_transpose", [(1, 4, 5, 5), (4, 3, 3, 3)], dict(strides=(2, 2), padding=(1, 1, 1, 1),
                                                            output_padding=(1, 1))),
    ("conv2d_transpose", [(2, 4, 3, 6), (4, 2, 4, 1)], dict(strides=(1, 3), padding=(0, 2, 1, 0), dilation=(2, 1),
                                                            groups=2)),
    ("matmul", [(2, 3), (3, 4)], {}),
    ("matmul", [(5, 2, 3), (5, 3, 4)], {"activation": "tanh"}),
    ("concat", [(2, 3, 4), (2, 5, 4)], {"axis": 1}),
    ("concat", [(2, 3), (2, 3), (2, 1)], {"axis": -1}),
    ("split", [(2, 7, 3)], {"axis": 1, "sizes": (3, 4)}),
    ("strided_slice", [(4, 6)], {"axes": (1,), "begin": (1,), "end": (9,)}),
    ("strided_slice", [(4, 6)], {"axes": (0,), "begin": (-3,), "end": (4,)}),
    ("transpose", [(2, 3, 4, 5)], {"perm": (0, 2, 3, 1)}),
    ("enlarge", [(4, 2, 1, 3)], {"kernel": (5, 3)}),
    ("pad", [(1, 2, 6, 5)], {"pad_width": (0, 1, 0, 0, 2, 1, 0, 3), "value": 0.0}),
    ("pad", [(3, 4)], {"pad_width": (1, 0, 2, 2), "value": -1.5}),
    ("max_pool2d", [(1, 2, 6, 5)], dict(kernel=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1))),
    ("avg_pool2d", [(1, 2, 6, 5)], dict(kernel=(2, 3), strides=(1, 2), count_include_pad=True)),
    ("add", [(2, 3), (2, 3)], {}),
    ("mul", [(2, 3), ()], {}),
    ("relu", [(2, 3, 4)], {}),
    ("constant", [], {"kind": "identity_conv", "shape": (4, 2, 3, 3)}),
    ("constant", [], {"kind": "identity_matrix", "shape": (3, 3)}),
    ("constant", [], {"kind": "ones", "shape": (2, 3)}),
]


def _shape_is(t, shape):
    return [V.rank(t) == len(shape)] + [V.dim(t, i) == d for i, d in enumerate(shape)]


@pytest.mark.parametrize("op,shapes,attrs", CASES, ids=lambda c: str(c)[:30])
def test_typing_facts_match_shape_inference(op, shapes, attrs):
    b = GraphBuilder()
    refs = [b.input(f"t{i}", s) for i, s in enumerate(shapes)]
    node = b.add(op, refs, **attrs)
    args = [z3.Const(f"t{i}", V.T) for i in range(len(shapes))]
    enc_attrs = dict(node.attr_dict) if op != "strided_slice" else dict(attrs, strides=(1,))
    if op == "concat":
        enc_attrs["axis"] = attrs["axis"]
    built = encode_op(op, enc_attrs, args)
    given = [f for a, s in zip(args, shapes) for f in _shape_is(a, s)] + [V.wt(a) for a in args]
    facts = built.facts + built.extra + [V.wt(o) for o in built.outputs]
    s = z3.Solver()
    s.set(timeout=3000)
    s.set("smt.mbqi", False)
    s.add(TY.shape_algebra() + TY.shape_axioms(built.funcs) + given + facts)
    expected = [f for o, t in zip(built.outputs, node.types) for f in _shape_is(o, t.shape)]
    # soundness: the facts must not contradict a well-typed instance (unsat would be a bug)
    assert s.check(expected) != z3.unsat, "typing facts contradict a well-typed instance"
    if op not in ("add", "mul", "relu") and not op.startswith("matmul"):
        s.add(z3.Not(z3.And(*expected)))
        assert s.check() == z3.unsat, "typing facts do not determine the output shape"


def test_shape_algebra_laws_hold_on_tuples():
    laws = TY.shape_algebra_concrete()
    rnd = random.Random(0)
    for _ in range(300):
        s = tuple(rnd.randint(1, 4) for _ in range(rnd.randint(1, 4)))
        a, b, i = (rnd.randint(-1, 4) for _ in range(3))
        v, u = rnd.randint(0, 5), rnd.randint(0, 5)
        for k, law in enumerate(laws):
            assert law(s, a, v, b, u, i), f"law {k} fails on {s, a, v, b, u, i}"
    assert len(laws) == len(TY.shape_algebra())


def test_ill_typed_instance_contradicts_the_facts():
    """A concat whose inputs differ off the axis cannot be wt."""
    a, c = z3.Const("a", V.T), z3.Const("c", V.T)
    built = encode_op("concat", {"axis": 0}, [a, c])
    s = z3.Solver()
    s.set(timeout=3000)
    s.set("smt.mbqi", False)
    s.add(TY.shape_algebra() + _shape_is(a, (2, 3)) + _shape_is(c, (2, 4)) + built.facts + [V.wt(built.outputs[0])])
    assert s.check() == z3.unsat
    with pytest.raises(GraphError):
        b = GraphBuilder()
        b.op("concat", b.input("a", (2, 3)), b.input("c", (2, 4)), axis=0)
    assert list(itertools.islice(iter(built.outputs), 1))
