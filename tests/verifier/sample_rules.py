"""Rules written as data, in the generator's format: correct ones the verifier must
prove, and planted wrong ones it must never prove."""
from __future__ import annotations

import copy
import json

from taso_relay.subst import rule_from_dict
from taso_relay.subst.rule_io import shipped_rules_dir

CONV = {"strides": "?s", "padding": "?p", "dilation": "?d", "groups": 1}
CONV_VARS = {"s": [1, 1], "p": [1, 1, 1, 1], "d": [1, 1]}


def n(id, op, *inputs, **attrs):
    return {"id": id, "op": op, "inputs": list(inputs), "attrs": attrs}


def shipped_docs(name: str) -> dict:
    """The rules of a shipped file (rules/<name>.json) as written, by id."""
    return {d["id"]: d for d in json.loads((shipped_rules_dir() / f"{name}.json").read_text())["rules"]}


def target_node(doc: dict, node_id: str) -> dict:
    """The node of a rule's target (as written) with that id, to plant a mistake in."""
    return next(node for node in doc["target"] if node["id"] == node_id)


def unverified(doc: dict, **changes) -> dict:
    """A copy of a rule as written, its verdict cleared (so proving it proves it again), with `changes` applied."""
    doc = copy.deepcopy(doc)
    doc["verification"] = {"status": "UNVERIFIED"}
    doc.update(changes)
    return doc


def rule(id, inputs, source, target, outputs, example, constraints=(), kinds=None):
    kinds = kinds or {}
    return rule_from_dict({
        "id": id, "inputs": [{"name": i, "kind": kinds.get(i, "any")} for i in inputs],
        "source": source, "target": target, "outputs": outputs,
        "constraints": list(constraints), "example": example})


CORRECT = [
    rule("matmul_assoc", "abc",
         [n("m1", "matmul", "a", "b"), n("m2", "matmul", "m1", "c")],
         [n("m1", "matmul", "b", "c"), n("m2", "matmul", "a", "m1")],
         [["m2", "m2"]], {"inputs": {"a": [2, 3], "b": [3, 4], "c": [4, 5]}},
         constraints=["rank(a) == 2", "rank(b) == 2", "rank(c) == 2"]),
    rule("conv_distrib_add", ["x", "w1", "w2"],
         [n("c1", "conv2d", "x", "w1", **CONV), n("c2", "conv2d", "x", "w2", **CONV), n("s", "add", "c1", "c2")],
         [n("w", "add", "w1", "w2"), n("c", "conv2d", "x", "w", **CONV)],
         [["s", "c"]], {"inputs": {"x": [1, 4, 5, 5], "w1": [3, 4, 3, 3], "w2": [3, 4, 3, 3]}, "vars": CONV_VARS},
         constraints=["shape(w1) == shape(w2)"]),
    rule("merge_two_convs", ["x", "w1", "w2"],
         [n("c1", "conv2d", "x", "w1", activation="?a", **CONV),
          n("c2", "conv2d", "x", "w2", activation="?a", **CONV)],
         [n("w", "concat", "w1", "w2", axis=0), n("c", "conv2d", "x", "w", activation="?a", **CONV),
          n("sp", "split", "c", axis=1, sizes=["=dim(w1, 0)", "=dim(w2, 0)"])],
         [["c1", "sp:0"], ["c2", "sp:1"]],
         {"inputs": {"x": [1, 4, 5, 5], "w1": [3, 4, 3, 3], "w2": [2, 4, 3, 3]}, "vars": {**CONV_VARS, "a": "relu"}},
         kinds={"w1": "weight", "w2": "weight"}),
    rule("relu_into_conv", ["x", "w"],
         [n("c", "conv2d", "x", "w", **CONV), n("r", "relu", "c")],
         [n("c", "conv2d", "x", "w", activation="relu", **CONV)],
         [["r", "c"]], {"inputs": {"x": [1, 2, 4, 4], "w": [2, 2, 3, 3]}, "vars": CONV_VARS}),
    rule("split_concat_relu", ["a", "b"],
         [n("c", "concat", "a", "b", axis="?ax"),
          n("sp", "split", "c", axis="?ax", sizes=["=dim(a, ?ax)", "=dim(b, ?ax)"]),
          n("r0", "relu", "sp:0"), n("r1", "sigmoid", "sp:1")],
         [n("r0", "relu", "a"), n("r1", "sigmoid", "b")],
         [["r0", "r0"], ["r1", "r1"]], {"inputs": {"a": [2, 3], "b": [2, 4]}, "vars": {"ax": 1}}),
    rule("concat_split_identity", ["x"],
         [n("sp", "split", "x", axis="?ax", sizes="?sz"), n("c", "concat", "sp:0", "sp:1", axis="?ax"),
          n("r", "relu", "c")],
         [n("r", "relu", "x")],
         [["r", "r"]], {"inputs": {"x": [4, 3]}, "vars": {"ax": 0, "sz": [1, 3]}}),
    rule("concat_relu", ["a", "b"],
         [n("ra", "relu", "a"), n("rb", "relu", "b"), n("c", "concat", "ra", "rb", axis="?ax")],
         [n("c", "concat", "a", "b", axis="?ax"), n("r", "relu", "c")],
         [["c", "r"]], {"inputs": {"a": [2, 3, 4], "b": [2, 3, 4]}, "vars": {"ax": 2}}),
    rule("transpose_matmul", ["a", "b"],
         [n("m", "matmul", "a", "b"), n("t", "transpose", "m", perm=[1, 0])],
         [n("tb", "transpose", "b", perm=[1, 0]), n("ta", "transpose", "a", perm=[1, 0]),
          n("m", "matmul", "tb", "ta")],
         [["t", "m"]], {"inputs": {"a": [2, 3], "b": [3, 4]}}, constraints=["rank(a) == 2", "rank(b) == 2"]),
    rule("transpose_twice_add", ["x", "y"],
         [n("t1", "transpose", "x", perm=[0, 2, 3, 1]), n("t2", "transpose", "t1", perm=[0, 3, 1, 2]),
          n("s", "add", "t2", "y")],
         [n("s", "add", "x", "y")],
         [["s", "s"]], {"inputs": {"x": [1, 2, 3, 4], "y": [1, 2, 3, 4]}}),
    rule("enlarge_merge", ["x", "w1", "w3"],
         [n("c1", "conv2d", "x", "w1", strides="?s", padding=[0, 0, 0, 0], groups=1),
          n("c3", "conv2d", "x", "w3", strides="?s", padding=[1, 1, 1, 1], groups=1),
          n("s", "add", "c1", "c3")],
         [n("e", "enlarge", "w1", kernel=[3, 3]), n("w", "add", "e", "w3"),
          n("c", "conv2d", "x", "w", strides="?s", padding=[1, 1, 1, 1], groups=1)],
         [["s", "c"]], {"inputs": {"x": [1, 2, 5, 5], "w1": [3, 2, 1, 1], "w3": [3, 2, 3, 3]}, "vars": {"s": [1, 1]}},
         constraints=["dim(w1, 0) == dim(w3, 0)", "dim(w1, 1) == dim(w3, 1)", "dim(w1, 2) == 1", "dim(w1, 3) == 1",
                      "dim(w3, 2) == 3", "dim(w3, 3) == 3"]),
    rule("avg_pool_as_conv", ["x"],
         [n("p", "avg_pool2d", "x", kernel=[3, 3], strides=[1, 1], padding=[1, 1, 1, 1], count_include_pad=True)],
         [n("k", "constant", kind="avg_kernel", shape="=(dim(x, 1), 1, 3, 3)"),
          n("c", "conv2d", "x", "k", padding=[1, 1, 1, 1], groups="=dim(x, 1)")],
         [["p", "c"]], {"inputs": {"x": [1, 3, 4, 4]}}),
    rule("residual_identity_conv", ["x", "w"],
         [n("c", "conv2d", "x", "w", padding=[1, 1, 1, 1]), n("s", "add", "c", "x")],
         [n("i", "constant", kind="identity_conv", shape="=shape(w)"), n("k", "add", "w", "i"),
          n("c", "conv2d", "x", "k", padding=[1, 1, 1, 1])],
         [["s", "c"]], {"inputs": {"x": [1, 3, 4, 4], "w": [3, 3, 3, 3]}},
         constraints=["dim(w, 2) == 3", "dim(w, 3) == 3", "dim(w, 0) == dim(x, 1)"]),
    rule("matmul_identity", ["a", "b"],
         [n("i", "constant", kind="identity_matrix", shape="=(dim(b, 0), dim(b, 0))"), n("s", "add", "b", "i"),
          n("m", "matmul", "a", "s")],
         [n("m", "matmul", "a", "b"), n("s", "add", "m", "a")],
         [["m", "s"]], {"inputs": {"a": [2, 3], "b": [3, 3]}},
         constraints=["rank(a) == 2", "rank(b) == 2", "dim(b, 0) == dim(b, 1)"]),
    rule("matmul_concat", ["a", "b1", "b2"],
         [n("m1", "matmul", "a", "b1"), n("m2", "matmul", "a", "b2"), n("c", "concat", "m1", "m2", axis=1)],
         [n("b", "concat", "b1", "b2", axis=1), n("m", "matmul", "a", "b")],
         [["c", "m"]], {"inputs": {"a": [2, 3], "b1": [3, 4], "b2": [3, 2]}},
         constraints=["rank(a) == 2", "rank(b1) == 2"]),
    rule("conv_mul_distrib", ["a", "b", "c"],
         [n("m1", "mul", "a", "b"), n("m2", "mul", "a", "c"), n("s", "add", "m1", "m2")],
         [n("t", "add", "b", "c"), n("m", "mul", "a", "t")],
         [["s", "m"]], {"inputs": {"a": [2, 3], "b": [2, 3], "c": [2, 3]}}),
    rule("div_distrib", ["a", "b", "c"],
         [n("s", "add", "a", "b"), n("d", "div", "s", "c")],
         [n("d1", "div", "a", "c"), n("d2", "div", "b", "c"), n("s", "add", "d1", "d2")],
         [["d", "s"]], {"inputs": {"a": [2, 3], "b": [2, 3], "c": [2, 3]}}),
    rule("relu_maxpool", ["x"],
         [n("p", "max_pool2d", "x", kernel=[2, 2], strides=[2, 2]), n("r", "relu", "p")],
         [n("r", "relu", "x"), n("p", "max_pool2d", "r", kernel=[2, 2], strides=[2, 2])],
         [["r", "p"]], {"inputs": {"x": [1, 2, 4, 4]}}),
]

# Planted wrong rules: none of them may be PROVED.
WRONG = [
    rule("bad_grouped_merge_unequal", ["x1", "x2", "w1", "w2"],
         [n("c1", "conv2d", "x1", "w1", groups=1), n("c2", "conv2d", "x2", "w2", groups=2),
          n("c", "concat", "c1", "c2", axis=1)],
         [n("x", "concat", "x1", "x2", axis=1), n("w", "concat", "w1", "w2", axis=0),
          n("c", "conv2d", "x", "w", groups=3)],
         [["c", "c"]],
         {"inputs": {"x1": [1, 2, 3, 3], "x2": [1, 4, 3, 3], "w1": [4, 2, 1, 1], "w2": [2, 2, 1, 1]}}),
    rule("bad_grouped_merge_symbolic", ["x", "w1", "w2"],
         [n("c1", "conv2d", "x", "w1", groups="?g"), n("c2", "conv2d", "x", "w2", groups="?g")],
         [n("w", "concat", "w1", "w2", axis=0), n("c", "conv2d", "x", "w", groups="?g"),
          n("sp", "split", "c", axis=1, sizes=["=dim(w1, 0)", "=dim(w2, 0)"])],
         [["c1", "sp:0"], ["c2", "sp:1"]],
         {"inputs": {"x": [1, 4, 3, 3], "w1": [2, 2, 1, 1], "w2": [2, 2, 1, 1]}, "vars": {"g": 2}}),
    rule("bad_merge_different_strides", ["x", "w1", "w2"],
         [n("c1", "conv2d", "x", "w1", strides=[1, 1]), n("c2", "conv2d", "x", "w2", strides=[2, 2])],
         [n("w", "concat", "w1", "w2", axis=0), n("c", "conv2d", "x", "w", strides=[1, 1]),
          n("sp", "split", "c", axis=1, sizes=["=dim(w1, 0)", "=dim(w2, 0)"])],
         [["c1", "sp:0"], ["c2", "sp:1"]],
         {"inputs": {"x": [1, 2, 1, 1], "w1": [2, 2, 1, 1], "w2": [2, 2, 1, 1]}}),
    rule("bad_split_other_axis", ["a", "b"],
         [n("c", "concat", "a", "b", axis=0), n("sp", "split", "c", axis=1, sizes="?sz"), n("r", "relu", "sp:0")],
         [n("r", "relu", "a")],
         [["r", "r"]], {"inputs": {"a": [2, 2], "b": [2, 2]}, "vars": {"sz": [1, 1]}}),
    rule("bad_relu_linear", ["a", "b"],
         [n("s", "add", "a", "b"), n("r", "relu", "s")],
         [n("ra", "relu", "a"), n("rb", "relu", "b"), n("s", "add", "ra", "rb")],
         [["r", "s"]], {"inputs": {"a": [2, 3], "b": [2, 3]}}),
    rule("bad_transpose_perm", ["x", "y"],
         [n("t1", "transpose", "x", perm=[1, 2, 0]), n("t2", "transpose", "t1", perm=[1, 2, 0]),
          n("s", "add", "t2", "y")],
         [n("s", "add", "x", "y")],
         [["s", "s"]], {"inputs": {"x": [2, 2, 2], "y": [2, 2, 2]}}),
    rule("bad_matmul_assoc_vector", "abc",  # a 1-D middle operand breaks associativity
         [n("m1", "matmul", "a", "b"), n("m2", "matmul", "m1", "c")],
         [n("m1", "matmul", "b", "c"), n("m2", "matmul", "a", "m1")],
         [["m2", "m2"]], {"inputs": {"a": [3, 3], "b": [3], "c": [3, 3]}}),
    rule("bad_scalar_mul_broadcast", ["a", "b", "s"],  # s learned as a scalar, but nothing says so
         [n("m", "mul", "a", "s"), n("p", "matmul", "m", "b")],
         [n("m", "mul", "b", "s"), n("p", "matmul", "a", "m")],
         [["p", "p"]], {"inputs": {"a": [3, 3], "b": [3, 3], "s": []}}),
    rule("bad_concat_add_broadcast", ["a", "b", "c", "d"],
         [n("s1", "add", "a", "b"), n("s2", "add", "c", "d"), n("c0", "concat", "s1", "s2", axis=0)],
         [n("ac", "concat", "a", "c", axis=0), n("bd", "concat", "b", "d", axis=0), n("s", "add", "ac", "bd")],
         [["c0", "s"]], {"inputs": {"a": [2, 3], "b": [2, 3], "c": [2, 3], "d": [2, 3]}}),
]


def rule_dict_with_op(entry: dict, op: str) -> dict:
    """A rule file entry like `entry` whose first source node uses operator `op` (another version's
    rule set), under a new id."""
    import copy

    foreign = copy.deepcopy(entry)
    foreign["id"] = f"{entry['id']}-{op}"
    foreign["source"][0]["op"] = op
    foreign["verification"] = {}
    return foreign
