"""Hand-written rules that do a split's per-part element-wise work once, before the split.

After parallel matmuls merge, each part of the split carries its own bias add;
added before the split, with the biases concatenated, the add fuses into the
merged matmul (as TVM's CombineParallelMatmul leaves it). TASO's generator has
no rule of this shape: its activations are 2-D and its biases are not 1-D.
Merged convs leave the same behind on the channel axis (NCHW biases of shape
(1, C, 1, 1)), then an activation per part, then often the concat that joins
the parts again (Inception's branches), which the last rule removes.

    python -m taso_relay.generator.split_rules --out rules/handwritten_split.json
    taso-relay rules verify rules/handwritten_split.json
"""
from __future__ import annotations

from .handwritten import node, write_main

_PROVENANCE = {"generator": "handwritten", "family": "split"}


def split_rules() -> list[dict]:
    return [{
        "id": "h-split-bias",
        "inputs": [{"name": "y", "kind": "any"}, {"name": "b1", "kind": "weight"}, {"name": "b2", "kind": "weight"}],
        "source": [node("s", "split", ["y"], axis="?a", sizes="?sz"), node("a1", "add", ["s:0", "b1"]),
                   node("a2", "add", ["s:1", "b2"])],
        "target": [node("c", "concat", ["b1", "b2"], axis=0), node("a", "add", ["y", "c"]),
                   node("t", "split", ["a"], axis="?a", sizes="?sz")],
        "outputs": [["a1", "t:0"], ["a2", "t:1"]],
        # the last axis, where a 1-D bias broadcasts, split exactly at the biases' lengths
        "constraints": ["?a == rank(y) - 1", "rank(b1) == 1", "rank(b2) == 1", "?sz == (dim(b1, 0), dim(b2, 0))"],
        "example": {"inputs": {"y": [2, 3, 7], "b1": [3], "b2": [4]}, "vars": {"a": 2, "sz": [3, 4]}},
        "provenance": _PROVENANCE,
    }, _channel_bias(), *(_activation(op) for op in ACTIVATIONS), _rejoined(),
        _rejoined(other_first=True), _rejoined(other_last=True), *(_as_slices(n) for n in SLICED_PARTS),
        _slice_of_slice()]


ACTIVATIONS = ("relu", "sigmoid", "tanh")
_ONE = {"name": "y", "kind": "any"}


def _channel_bias() -> dict:
    """NCHW biases, (1, C, 1, 1), on the parts of a split of the channel axis (a merged conv's)."""
    per_channel = [f"{c} == 1" for b in ("b1", "b2") for c in (f"dim({b}, 0)", f"dim({b}, 2)", f"dim({b}, 3)")]
    return {
        "id": "h-split-bias-channels",
        "inputs": [_ONE, {"name": "b1", "kind": "weight"}, {"name": "b2", "kind": "weight"}],
        "source": [node("s", "split", ["y"], axis=1, sizes="?sz"), node("a1", "add", ["s:0", "b1"]),
                   node("a2", "add", ["s:1", "b2"])],
        "target": [node("c", "concat", ["b1", "b2"], axis=1), node("a", "add", ["y", "c"]),
                   node("t", "split", ["a"], axis=1, sizes="?sz")],
        "outputs": [["a1", "t:0"], ["a2", "t:1"]],
        "constraints": ["rank(y) == 4", "rank(b1) == 4", "rank(b2) == 4", *per_channel,
                        "?sz == (dim(b1, 1), dim(b2, 1))"],
        "example": {"inputs": {"y": [2, 7, 3, 5], "b1": [1, 3, 1, 1], "b2": [1, 4, 1, 1]}, "vars": {"sz": [3, 4]}},
        "provenance": _PROVENANCE,
    }


def _activation(op: str) -> dict:
    """The same activation on both parts of a split: once on the whole, split after."""
    return {
        "id": f"h-split-{op}", "inputs": [_ONE],
        "source": [node("s", "split", ["y"], axis="?a", sizes="?sz"), node("u1", op, ["s:0"]),
                   node("u2", op, ["s:1"])],
        "target": [node("u", op, ["y"]), node("t", "split", ["u"], axis="?a", sizes="?sz")],
        "outputs": [["u1", "t:0"], ["u2", "t:1"]], "constraints": [],
        "example": {"inputs": {"y": [2, 7, 3]}, "vars": {"a": 1, "sz": [3, 4]}},
        "provenance": _PROVENANCE,
    }


def _rejoined(other_first: bool = False, other_last: bool = False) -> dict:
    """A split's two parts concatenated again, in order, on the same axis: the tensor that was split.
    other_first/other_last: a third tensor z joined in front of them or behind (what pairwise merges of three
    parallel convs leave in a three-way concat); the id names where the split's parts are."""
    parts = ["z"] * other_first + ["s:0", "s:1"] + ["z"] * other_last
    rest = ["z"] * other_first + ["y"] + ["z"] * other_last
    inputs = [_ONE] + [{"name": "z", "kind": "any"}] * (other_first or other_last)
    example = {"y": [2, 7, 3]} | ({"z": [2, 2, 3]} if other_first or other_last else {})
    suffix = "-after" if other_first else "-before" if other_last else ""
    return {
        "id": f"h-split-rejoined{suffix}", "inputs": inputs,
        "source": [node("s", "split", ["y"], axis="?a", sizes="?sz"), node("k", "concat", parts, axis="?a")],
        "target": [node("j", "concat", rest, axis="?a")] if other_first or other_last else [],
        "outputs": [["k", "j" if other_first or other_last else "y"]], "constraints": [],
        "example": {"inputs": example, "vars": {"a": 1, "sz": [3, 4]}},
        "provenance": _PROVENANCE,
    }


SLICED_PARTS = (2, 3, 4)


def _as_slices(parts: int) -> dict:
    """A split read as one slice per part. TVM runs a split whose parts go different ways as a kernel of its own
    (FuseOps finds no injective post-dominator for it), copying every part; a slice is element-wise to FuseOps
    and fuses into its reader: after Q/K/V (or gate/up) projections merge, each part's slice joins its
    reshape and transpose (or the activation), and the copy is gone. The cost model decides where it pays."""
    ends = [" + ".join(f"?sz[{k}]" for k in range(i + 1)) for i in range(parts)]
    begins = ["0"] + ends[:-1]
    return {
        "id": f"h-split-slices{parts}", "inputs": [_ONE],
        "source": [node("s", "split", ["y"], axis="?a", sizes="?sz")],
        "target": [node(f"p{i}", "strided_slice", ["y"], axes=["?a"], begin=[_expr(b)], end=[_expr(e)], strides=[1])
                   for i, (b, e) in enumerate(zip(begins, ends))],
        "outputs": [[f"s:{i}", f"p{i}"] for i in range(parts)],
        "constraints": [f"len(?sz) == {parts}"],
        "example": {"inputs": {"y": [2, 3 * parts + 1, 3]},
                    "vars": {"a": 1, "sz": [3] * (parts - 1) + [4]}},
        "provenance": _PROVENANCE,
    }


def _slice_of_slice() -> dict:
    """A slice of a slice (on one axis, in bounds) is one slice: what merging a third matmul into two merged
    ones leaves. The outer slice is kept as an output, for its other readers (it is dropped where it has none)."""
    def sl(id_, x, b, e):
        return node(id_, "strided_slice", [x], axes=["?a"], begin=[b], end=[e], strides=[1])
    return {
        "id": "h-slice-of-slice", "inputs": [_ONE],
        "source": [sl("s1", "y", "?b1", "?e1"), sl("s2", "s1", "?b2", "?e2")],
        "target": [sl("k", "y", "?b1", "?e1"), sl("t", "y", "=?b1 + ?b2", "=?b1 + ?e2")],
        "outputs": [["s1", "k"], ["s2", "t"]],
        "constraints": ["?a >= 0", "0 <= ?b1", "?b1 <= ?e1", "?e1 <= dim(y, ?a)", "0 <= ?b2", "?b2 <= ?e2",
                        "?e2 <= ?e1 - ?b1"],
        "example": {"inputs": {"y": [2, 9, 3]}, "vars": {"a": 1, "b1": 2, "e1": 8, "b2": 1, "e2": 4}},
        "provenance": _PROVENANCE,
    }


def _expr(text: str):
    return 0 if text == "0" else "=" + text


def main(argv=None) -> int:
    return write_main(argv, __doc__.splitlines()[0], split_rules, (
        "A bias added to each part of a split is added before the split, with the biases concatenated: after "
        "parallel matmuls (or convs, whose biases are (1, C, 1, 1)) are merged their bias adds then fuse into the "
        "merged operator, as in TVM's CombineParallelMatmul. The same activation on both parts runs once before "
        "the split, and a split's parts concatenated again (alone or beside a third tensor) are the tensor that "
        "was split. A split's parts are also slices of the tensor, which TVM fuses into their readers where it "
        "runs the split alone. TASO's generator has no rule of these shapes (its activations are 2-D and its "
        "biases are not 1-D; taso_relay/generator/split_rules.py). Proved like the generated ones (taso-relay "
        "rules verify)."))


if __name__ == "__main__":
    raise SystemExit(main())
