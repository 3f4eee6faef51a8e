"""How far the layout step's transposes cancel on each ONNX model: nothing is built or tuned.

    .venv/bin/python -m bench.corpus.layout_census build/corpus/*.onnx

Per model: its convs, whether the conversion reached its fixpoint, and the transposes of activations
left (those of weights fold at compile time), grouped by what they sit between, which names the
operator a layout rule is missing for.
"""
from __future__ import annotations

import argparse
import collections
import sys
import warnings


def activation_transposes(graph) -> list[int]:
    """The transposes of activations (those of weights fold at compile time)."""
    from taso_relay.subst.index import index_of

    foldable = index_of(graph).foldable
    return [i for i, n in enumerate(graph.nodes) if n.op == "transpose" and not foldable[i]]


def census(path: str) -> dict:
    from taso_relay.bridge.from_relax import graph_from_function
    from taso_relay.onnx_io import prepare
    from taso_relay.search.layout import Collapsed, convert_layout
    from taso_relay.subst.index import index_of

    def label(node) -> str:
        return node.op + (":" + node.attr("label") if node.op == "opaque" else "")

    mod = prepare(path, {}).mod
    graph = graph_from_function(mod["main"], "main", mod).graph
    converted, trail, complete = convert_layout(graph, "nhwc")
    index = index_of(converted)
    left: collections.Counter = collections.Counter()
    for i in activation_transposes(converted):
        node = converted.nodes[i]
        users = sorted({label(converted.nodes[u]) for u, _ in index.users[i]})
        to = "NHWC" if tuple(node.attr("perm")) == (0, 2, 3, 1) else "NCHW"
        left[f"{label(converted.nodes[node.inputs[0].node])} -> {to} -> {','.join(users)}"] += 1
    return {"convs": sum(n.op == "conv2d" for n in converted.nodes), "complete": complete,
            "transposes_left": sum(left.values()), "where": dict(left.most_common()),
            "chains_shortened": sum(isinstance(m, Collapsed) for m, _ in trail)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+")
    args = p.parse_args(argv)
    for path in args.models:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            row = census(path)
        print(f"{path}: {row['convs']} convs, {row['transposes_left']} activation transposes left"
              + f" ({row['chains_shortened']} chains of transposes and reshapes written shorter)"
              + ("" if row["complete"] else " (conversion cut short)"))
        for where, n in row["where"].items():
            print(f"    {n:4d}  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
