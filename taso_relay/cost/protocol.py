"""The CostModel protocol, the incremental base class, and FixedCost for unit tests.

The search calls `graph_cost` thousands of times on graphs that differ by one
rewrite. `KernelCostModel` makes that cheap: it partitions a graph into kernels
(`fusion.partition`), and memoises kernel costs by workload signature, so only
kernels that no earlier graph contained are costed (and those in one batch, so
the measured models can show one progress bar and share one RPC session).
"""
from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterable, Mapping, Protocol, Sequence, runtime_checkable

from ..graph import Graph, weight_only
from .fusion import SOURCE_OPS, Partition, partition
from .kernel import Kernel, make_kernel


@runtime_checkable
class CostModel(Protocol):
    """Cost of graphs and kernels in seconds."""

    def graph_cost(self, graph: Graph) -> float: ...

    def kernel_cost(self, kernel: Kernel) -> float: ...

    def kernels(self, graph: Graph) -> list[Kernel]: ...


@dataclass
class CostStats:
    graph_calls: int = 0
    graph_hits: int = 0  # graphs answered from the graph memo
    kernel_hits: int = 0  # kernels answered from the in-memory memo
    computed: int = 0  # kernels costed by the model (cache lookups, measurements, formulas)
    seconds: float = 0.0  # wall time spent inside graph_cost / kernel_cost

    def __str__(self) -> str:
        return (f"{self.graph_calls} graph costs ({self.graph_hits} memoised), {self.kernel_hits} kernel hits, "
                f"{self.computed} kernels costed, {self.seconds:.3f} s in the cost model")


class _LRU(OrderedDict):
    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def get(self, key, default=None):
        if key in self:
            self.move_to_end(key)
            return self[key]
        return default

    def put(self, key, value):
        self[key] = value
        self.move_to_end(key)
        if len(self) > self.size:
            self.popitem(last=False)


class KernelCostModel:
    """Base class: fusion-aware partition plus a memo of kernel costs by workload.

    Subclasses implement `_compute(kernels) -> list[float]` for kernels the memo
    has not seen (each distinct workload appears once in a call).
    """

    name = "kernel"

    def __init__(self, memo_graphs: int = 4096, opaque=None, lowering: str = "default"):
        self.opaque = opaque  # opaque.OpaqueInfo: TVM patterns and keys of opaque calls
        self.lowering = lowering  # which TVM lowering the kernels are formed by (fusion.partition)
        self._memo: dict[tuple, float] = {}
        self._graphs = _LRU(memo_graphs)
        self._partitions = _LRU(64)
        self.stats = CostStats()

    # ---- partition -------------------------------------------------------
    def partition(self, graph: Graph) -> Partition:
        hit = self._partitions.get(id(graph))
        if hit is not None and hit[0] is graph:
            return hit[1]
        part = self._partition(graph)
        self._partitions.put(id(graph), (graph, part))
        return part

    def _partition(self, graph: Graph) -> Partition:
        return partition(graph, self.opaque, self.lowering)

    def set_module(self, module) -> None:
        """The IRModule the graphs come from: resolves opaque calls of its PrimFuncs (call_tir)."""
        from .opaque import OpaqueInfo

        self.opaque = OpaqueInfo(module)
        self._partitions.clear()
        self._graphs.clear()

    def kernels(self, graph: Graph) -> list[Kernel]:
        return list(self.partition(graph).kernels)

    # ---- costs -----------------------------------------------------------
    def kernel_cost(self, kernel: Kernel) -> float:
        start = time.perf_counter()
        try:
            cost = self._memo.get(kernel.signature)
            if cost is None:
                self.prefetch([kernel])
                cost = self._memo[kernel.signature]
            else:
                self.stats.kernel_hits += 1
            return cost
        finally:
            self.stats.seconds += time.perf_counter() - start

    def graph_cost(self, graph: Graph) -> float:
        start = time.perf_counter()
        try:
            self.stats.graph_calls += 1
            key = graph.hash
            total = self._graphs.get(key)
            if total is not None:
                self.stats.graph_hits += 1
                return total
            kernels = self.partition(graph).kernels
            memo = self._memo
            missing = [k for k in kernels if k.signature not in memo]
            self.stats.kernel_hits += len(kernels) - len(missing)
            if missing:
                self.prefetch(missing)
            total = float(sum(memo[k.signature] for k in kernels))
            self._graphs.put(key, total)
            return total
        finally:
            self.stats.seconds += time.perf_counter() - start

    def breakdown(self, graph: Graph) -> list[tuple[Kernel, float]]:
        """Each kernel of the graph with its cost, in graph order."""
        kernels = self.kernels(graph)
        self.prefetch([k for k in kernels if k.signature not in self._memo])
        return [(k, self._memo[k.signature]) for k in kernels]

    def prefetch(self, kernels: Iterable[Kernel]) -> None:
        """Cost every kernel not memoised yet, in one batch."""
        todo: dict[tuple, Kernel] = {}
        for k in kernels:
            if k.signature not in self._memo and k.signature not in todo:
                todo[k.signature] = k
        if not todo:
            return
        batch = list(todo.values())
        costs = self._compute(batch)
        for k, c in zip(batch, costs):
            self._memo[k.signature] = float(c)
        self.stats.computed += len(batch)

    def _compute(self, kernels: Sequence[Kernel]) -> list[float]:
        raise NotImplementedError

    def search_model(self) -> "KernelCostModel":
        """The model the search prices its thousands of candidates with: this one, unless each of its
        verdicts is too dear for that (TunedCost tunes every new kernel), in which case a cheap
        stand-in searches and this model judges the few graphs the search proposes."""
        return self

    def forget(self) -> None:
        """Drop the in-memory memos (the on-disk cache, if any, stays)."""
        self._memo.clear()
        self._graphs.clear()
        self._partitions.clear()


def per_node_partition(graph: Graph, opaque=None) -> Partition:
    """One kernel per node that runs: no fusion (weight-only nodes still fold)."""
    const = weight_only(graph, opaque_folds=True)
    kernels, group_of = [], [-1] * len(graph.nodes)
    for i, node in enumerate(graph.nodes):
        if node.op in SOURCE_OPS or const[i]:
            continue
        group_of[i] = len(kernels)
        kernels.append(make_kernel(graph, (i,), const, opaque))
    folded = tuple(i for i, c in enumerate(const) if c and graph.nodes[i].op not in SOURCE_OPS)
    return Partition(tuple(kernels), folded, (), tuple(group_of))


class FixedCost(KernelCostModel):
    """Deterministic per-operator costs for unit tests of the search.

    costs: seconds per operator name; operators not listed cost `default`.
    fuse=False: every node that runs is its own kernel, costing costs[op].
    fuse=True: kernels as FuseOps forms them; a kernel costs its most expensive
    member (its epilogue comes free).
    Weight-only nodes are folded (free) either way.
    """

    name = "fixed"

    def __init__(self, costs: Mapping[str, float] | None = None, default: float = 1.0, fuse: bool = False,
                 lowering: str = "default"):
        super().__init__(lowering=lowering)
        self.costs = dict(costs or {})
        self.default = float(default)
        self.fuse = fuse

    def _partition(self, graph: Graph) -> Partition:
        if self.fuse:
            return partition(graph, self.opaque, self.lowering)
        return per_node_partition(graph, self.opaque)

    def _compute(self, kernels: Sequence[Kernel]) -> list[float]:
        out = []
        for k in kernels:
            costs = [self.costs.get(op, self.default) for op in k.ops]
            out.append(max(costs) if self.fuse else sum(costs))
        return out
