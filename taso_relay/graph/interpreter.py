"""Evaluate a Graph with numpy: float32/float64, or exact integers modulo a prime.

The float mode is the reference the tests hold TVM to; the modular mode is the
fingerprint the generator uses, where equal outputs mean equal polynomials
with overwhelming probability and no rounding noise.
"""
from __future__ import annotations

import contextlib
import os
from typing import Mapping

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from .graph import Graph
from .ops import get_op
from .ops.modular import DEFAULT_PRIME
from .types import NotModelled


@contextlib.contextmanager
def blas_on_free_cores():
    """numpy's BLAS on as many threads as there are cores free while a model-sized graph is evaluated.

    OpenBLAS threads wait for work by spinning: beside a MetaSchedule run on both cores, full
    NASNet-A's numeric check spent 10 s in its convs' matmuls on two threads, against 0.1-1.2 s on
    one. On an idle machine two threads are faster (full BERT-base's pass spent 2.9-3.0 s outside its
    search, against 3.4-3.7 s on one)."""
    current = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    if not current:  # no BLAS loaded: nothing to limit
        yield
        return
    with threadpool_limits(limits=min(min(current), free_cores()), user_api="blas"):  # never above the user's
        yield


def usable_cores() -> int:
    """The cores this process may use (its affinity where the platform says it, else every core)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def free_cores() -> int:
    """The cores this process may use, less the 1-minute load of everything else (this process counted
    as one), and at least one."""
    cores = usable_cores()
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):  # no load average on this platform (Windows) or none readable
        return cores
    return max(1, min(cores, int(cores - load + 1)))


def evaluate(graph: Graph, feeds: Mapping[str, np.ndarray] | None = None, *, dtype: str | None = None,
             modular: bool = False, prime: int = DEFAULT_PRIME, outputs=None) -> list[np.ndarray]:
    """Run `graph` on `feeds` (inputs, and weights missing from graph.values) by name.

    dtype: compute in this float dtype instead of each tensor's own (e.g. "float64").
    modular: integer arithmetic mod `prime`; feeds must be integer arrays.
    """
    feeds = dict(feeds or {})
    results: list[list[np.ndarray]] = []
    for i, node in enumerate(graph.nodes):
        opdef = get_op(node.op)
        attrs = node.attr_dict
        if node.op in ("input", "weight"):
            name = attrs["name"]
            if name in feeds:
                value = feeds[name]
            elif node.op == "weight" and name in graph.values:
                value = graph.values[name]
            else:
                raise NotModelled(f"no value fed for {node.op} '{name}'")
            value = np.asarray(value)
            if tuple(value.shape) != tuple(attrs["shape"]):
                raise NotModelled(f"{node.op} '{name}': fed shape {value.shape}, declared {attrs['shape']}")
            results.append([_convert(value, dtype, modular, prime)])
            continue
        args = [results[r.node][r.index] for r in node.inputs]
        if modular:
            if opdef.modular is None:
                raise NotModelled(f"{node.op} has no modular-integer form")
            outs = opdef.modular(args, attrs, prime)
        else:
            if opdef.ref is None:
                raise NotModelled(f"{node.op} cannot be evaluated by the interpreter")
            outs = opdef.ref(args, attrs)
            if dtype is not None:
                outs = [np.asarray(o).astype(dtype) for o in outs]
        results.append([np.asarray(o) for o in outs])
    wanted = graph.outputs if outputs is None else outputs
    return [results[r.node][r.index] for r in wanted]


def fold_weights(graph: Graph, params=frozenset()) -> dict[int, list[np.ndarray]]:
    """The values of the nodes computed from weights with values and constants alone.

    What FoldConstant would compute, done here in numpy: TVM builds one kernel per folded
    call, so a model whose batch norms were folded into ~200 convs took 70 s more to
    compile. Weights named in `params` (function parameters) are not constants; a node
    the interpreter cannot evaluate (or that fails on these values) is left out, and so is
    everything computed from it.
    """
    with blas_on_free_cores():
        return _fold(graph, params)


def _fold(graph: Graph, params) -> dict[int, list[np.ndarray]]:
    known: dict[int, list[np.ndarray]] = {}
    for i, node in enumerate(graph.nodes):
        attrs = node.attr_dict
        if node.op == "weight":
            if attrs["name"] not in params and attrs["name"] in graph.values:
                known[i] = [np.asarray(graph.values[attrs["name"]])]
            continue
        if node.op in ("input", "opaque") or not all(r.node in known for r in node.inputs):
            continue
        opdef = get_op(node.op)
        if opdef.ref is None:
            continue
        try:
            with np.errstate(all="ignore"):
                outs = opdef.ref([known[r.node][r.index] for r in node.inputs], attrs)
        except Exception:  # noqa: BLE001 - not evaluable here: FoldConstant computes it at build time
            continue
        known[i] = [np.asarray(o).astype(t.dtype, copy=False) for o, t in zip(outs, node.types)]
    return known


def _convert(value, dtype, modular, prime):
    if modular:
        if not np.issubdtype(value.dtype, np.integer):
            raise NotModelled("modular evaluation needs integer inputs")
        return np.mod(value.astype(np.int64), prime)
    if dtype is not None and np.issubdtype(value.dtype, np.floating):
        return value.astype(dtype)
    return value


INT_HIGH = 4  # random integer inputs are drawn from [0, INT_HIGH): indices into small tables


def random_feeds(graph: Graph, rng: np.random.Generator, *, modular: bool = False,
                 prime: int = DEFAULT_PRIME, include_weights: bool = False) -> dict[str, np.ndarray]:
    """Random values for every input (and weights without values, or all with include_weights)."""
    feeds = {}
    for node in graph.nodes:
        if node.op not in ("input", "weight"):
            continue
        a = node.attr_dict
        if node.op == "weight" and a["name"] in graph.values and not include_weights:
            continue
        if modular:
            feeds[a["name"]] = rng.integers(0, prime, size=a["shape"], dtype=np.int64)
        elif np.issubdtype(np.dtype(a["dtype"]), np.floating):
            feeds[a["name"]] = rng.uniform(-1, 1, size=a["shape"]).astype(a["dtype"])
        else:
            feeds[a["name"]] = rng.integers(0, INT_HIGH, size=a["shape"]).astype(a["dtype"])
    return feeds
