"""A hand-written rule that adds the biases of a split's parts before the split.

After parallel matmuls merge, each part of the split carries its own bias add;
added before the split, with the biases concatenated, the add fuses into the
merged matmul (as TVM's CombineParallelMatmul leaves it). TASO's generator has
no rule of this shape: its activations are 2-D and its biases are not 1-D.

    python -m taso_relay.generator.split_rules --out rules/handwritten_split.json
    taso-relay rules verify rules/handwritten_split.json
"""
from __future__ import annotations

from .handwritten import node, write_main


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
        "provenance": {"generator": "handwritten", "family": "split"},
    }]


def main(argv=None) -> int:
    return write_main(argv, __doc__.splitlines()[0], split_rules, (
        "A bias added to each part of a split is added before the split, with the biases concatenated: after "
        "parallel matmuls are merged their bias adds then fuse into the merged matmul, as in TVM's "
        "CombineParallelMatmul. TASO's generator has no rule of this shape (its activations are 2-D and its "
        "biases are not 1-D; taso_relay/generator/split_rules.py). Proved like the generated ones "
        "(taso-relay rules verify)."))


if __name__ == "__main__":
    raise SystemExit(main())
