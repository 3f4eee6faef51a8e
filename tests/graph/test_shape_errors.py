"""Shape inference failures are ShapeErrors that name the operator and the input shapes."""
from __future__ import annotations

import pytest

from taso_relay.graph import GraphBuilder, ShapeError

CASES = [
    ("conv2d", [(1, 3, 8, 8), (4, 2, 3, 3)], {}, "conv2d", "[1, 3, 8, 8]"),
    ("conv2d", [(1, 4, 8, 8), (4, 2, 3, 3)], {"groups": 3}, "groups=3", "[4, 2, 3, 3]"),
    ("conv2d", [(1, 3, 2, 2), (4, 3, 5, 5)], {}, "conv2d", "[4, 3, 5, 5]"),
    ("matmul", [(2, 3), (4, 5)], {}, "matmul: inner dimensions 3 and 4", "[2, 3], [4, 5]"),
    ("add", [(2, 3), (4, 3)], {}, "add", "[2, 3], [4, 3]"),
    ("concat", [(2, 3), (3, 4)], {"axis": 0}, "concat", "[2, 3], [3, 4]"),
    ("split", [(2, 6)], {"axis": 1, "sizes": (2, 2)}, "split", "[2, 6]"),
    ("reshape", [(2, 6)], {"shape": (5, 2)}, "reshape", "[2, 6]"),
    ("transpose", [(2, 6)], {"perm": (0, 0)}, "transpose", "[2, 6]"),
    ("max_pool2d", [(1, 2, 3)], {"kernel": (2, 2)}, "max_pool2d", "[1, 2, 3]"),
    ("layer_norm", [(2, 8), (4,), (4,)], {}, "layer_norm", "[2, 8], [4], [4]"),
    ("squeeze", [(2, 3)], {"axes": (0,)}, "squeeze", "[2, 3]"),
    ("broadcast_to", [(2, 3)], {"shape": (3, 3)}, "broadcast_to", "[2, 3]"),
    # out-of-range axes must not be wrapped into range by canonicalisation
    ("sum", [(2, 3, 4)], {"axes": (7,)}, "sum: axes [7] out of range", "[2, 3, 4]"),
    ("concat", [(2, 3), (2, 3)], {"axis": 5}, "concat: axis 5 out of range", "[2, 3], [2, 3]"),
    ("softmax", [(2, 3)], {"axis": -3}, "softmax: axis -3 out of range", "[2, 3]"),
    ("expand_dims", [(2, 3)], {"axes": (9,)}, "expand_dims", "[2, 3]"),
    ("layer_norm", [(2, 3), (3,), (3,)], {"axes": (5,)}, "layer_norm", "[2, 3], [3], [3]"),
]


@pytest.mark.parametrize("op, shapes, attrs, names, shown", CASES, ids=[c[0] for c in CASES])
def test_shape_error_names_op_and_shapes(op, shapes, attrs, names, shown):
    b = GraphBuilder()
    xs = [b.input(f"x{i}", s) for i, s in enumerate(shapes)]
    with pytest.raises(ShapeError) as info:
        b.op(op, *xs, **attrs)
    assert names in str(info.value)
    assert shown in str(info.value)


def test_bad_graph_is_refused_before_any_node_is_added():
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    with pytest.raises(ShapeError):
        b.op("matmul", x, x)
    assert len(b.nodes) == 1
