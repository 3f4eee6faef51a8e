"""Weight-only values: computed from weights and constants alone.

TVM's FoldConstant evaluates them at compile time, so they cost nothing at run
time, a rule's pattern input of kind "weight" may bind to them, and the emitter
computes them once. The matcher, the cost models and the emitter must agree on
which values these are, so this is the one definition. Opaque calls never fold:
the optimizer does not know what they compute, so no rule may rely on them.
The cost models may assume otherwise (`opaque_folds=True`): FoldConstant does
fold an opaque call on constants that legalizes to a kernel (sin, clip, flip),
though not every one (cumsum).
"""
from __future__ import annotations

from typing import AbstractSet, Sequence

from .graph import Graph, Node

CONSTANT_OPS = frozenset({"weight", "constant"})


def folds(node: Node, flags: Sequence[bool], params: AbstractSet[str] = frozenset(),
          opaque_folds: bool = False) -> bool:
    """Whether `node` is weight-only, given the flags of the nodes before it.

    params: names of weights passed as function parameters, which are not constants."""
    if node.op in CONSTANT_OPS:
        return node.op == "constant" or not params or node.attr_dict.get("name") not in params
    if node.op == "input" or (node.op == "opaque" and not opaque_folds) or not node.inputs:
        return False
    return all(flags[r.node] for r in node.inputs)


def weight_only(graph: Graph, params: AbstractSet[str] = frozenset(), opaque_folds: bool = False) -> list[bool]:
    """Per node of `graph`: whether it is weight-only (`folds`)."""
    flags: list[bool] = []
    for node in graph.nodes:
        flags.append(folds(node, flags, params, opaque_folds))
    return flags
