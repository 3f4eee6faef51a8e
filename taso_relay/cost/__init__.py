"""Cost models: what a graph costs when TVM runs it on the target.

    CostModel       protocol: graph_cost(graph), kernel_cost(kernel), kernels(graph)
    FixedCost       per-operator fixed costs (unit tests of the search)
    AnalyticCost    FLOPs and bytes against the machine's measured peaks (no compilation)
    MeasuredCost    kernels compiled with TVM's default lowering and timed (SQLite cache)
    TunedCost       kernels tuned with MetaSchedule, database kept for the final build
    RPCRunner       measure on a remote device through a TVM RPC tracker

Kernels are formed the way Relax FuseOps forms them (`fusion.partition`).
TVM is imported only by the measured, tuned and remote models.
"""
from .analytic import AnalyticCost, MachinePeaks, load_peaks, measure_peaks
from .cache import CacheCorruptWarning, CostCache
from .fusion import Partition, partition
from .kernel import Kernel
from .protocol import CostModel, CostStats, FixedCost, KernelCostModel

__all__ = ["CostModel", "KernelCostModel", "CostStats", "FixedCost", "AnalyticCost", "MachinePeaks", "load_peaks",
           "measure_peaks", "CostCache", "CacheCorruptWarning", "Kernel", "Partition", "partition",
           "MeasuredCost", "TunedCost", "RPCRunner", "LocalRunner", "TimerSettings"]


def __getattr__(name):
    if name == "MeasuredCost":
        from .measured import MeasuredCost
        return MeasuredCost
    if name == "TunedCost":
        from .tuned import TunedCost
        return TunedCost
    if name == "RPCRunner":
        from .remote import RPCRunner
        return RPCRunner
    if name in ("LocalRunner", "TimerSettings"):
        from . import runner
        return getattr(runner, name)
    raise AttributeError(name)
