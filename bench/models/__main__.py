"""Prints the README size table: ``python -m bench.models``.

Counts are measured from the built graphs (params = float tensor
initializers; nodes = ONNX nodes); the quick column is the ``quick=True:``
paragraph of each model module's docstring.
"""

from __future__ import annotations

import re
import sys

from . import MODELS, build
from ._builder import count_params


def _shape(value_info) -> str:
    return "x".join(str(d.dim_value) for d in value_info.type.tensor_type.shape.dim)


def _quick_summary(name: str) -> str:
    doc = sys.modules[MODELS[name].__module__].__doc__ or ""
    match = re.search(r"quick=True:(.*?)(?:\n\s*\n|$)", doc, re.S)
    return " ".join(match.group(1).split()) if match else ""


def main() -> None:
    print("| model | input | params | nodes | quick input | quick params | quick nodes "
          "| what quick changes |")
    print("|---|---|---|---|---|---|---|---|")
    for name in MODELS:
        full, quick = build(name), build(name, quick=True)
        print(f"| {name} | {_shape(full.graph.input[0])} | {count_params(full):,} "
              f"| {len(full.graph.node)} | {_shape(quick.graph.input[0])} "
              f"| {count_params(quick):,} | {len(quick.graph.node)} | {_quick_summary(name)} |")


if __name__ == "__main__":
    main()
