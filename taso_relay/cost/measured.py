"""The measured model: each distinct kernel compiled by TVM for the target and timed.

For every kernel the memo and the SQLite cache have not seen: build it as a
standalone Relax function through the bridge (activations as parameters filled
with random data, weights as constants so that FoldConstant and FuseOps treat
them exactly as in the whole model), lower it with the default lowering
(`lowering.py`), `tvm.compile` it for the target, and time it (runner.py;
RPC in remote.py). The median lands in the cache at once, so an interrupted
run keeps what it measured and a second run measures nothing, except the
kernels timed while other work contended for the CPUs (contention.py), which
are timed again once the CPUs are quiet, keeping the faster time.
"""
from __future__ import annotations

import os
import sqlite3
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from ..graph import Graph
from ..graph.interpreter import usable_cores
from .cache import CostCache, file_lock
from .contention import contended
from .contention import now as contention_now
from .kernel import Kernel
from .lowering import LOWERING_IDS, as_target, check_lowering, compile_module, target_key
from .progress import progress
from .protocol import KernelCostModel
from .runner import LocalRunner, TimerSettings, Timing

INPUT_PREFIX, WEIGHT_PREFIX = "taso_kernel_a", "taso_kernel_w"


def kernel_graph(kernel: Kernel, seed: int = 0) -> tuple[Graph, dict[str, np.ndarray]]:
    """The kernel as a graph with random weight values, and random feeds for its activations."""
    sub = kernel.subgraph(INPUT_PREFIX, WEIGHT_PREFIX)
    rng = np.random.default_rng(seed)
    values, feeds = {}, {}
    for node in sub.nodes:
        if node.op not in ("input", "weight"):
            continue
        a = node.attr_dict
        arr = _random(rng, a["shape"], a["dtype"])
        (values if node.op == "weight" else feeds)[a["name"]] = arr
    payloads = {k: v for k, v in sub.payloads.items() if not str(k).startswith(("taso_kernel_",))}
    return Graph(sub.nodes, sub.outputs, values, payloads), feeds


def _random(rng, shape, dtype) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.uniform(0.1, 1.0, size=shape).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dt)
    return rng.integers(0, 4, size=shape).astype(dt)


def kernel_module(kernel: Kernel, seed: int = 0, opaque=None):
    """(IRModule with "main" = the kernel, its input arrays in parameter order).

    opaque: the model's OpaqueInfo, which supplies PrimFuncs that opaque call_tir nodes call.
    """
    import tvm

    from ..bridge import module_from_graph
    from ..bridge.execute import index_bounds

    graph, feeds = kernel_graph(kernel, seed)
    funcs = opaque.modules_for(kernel.graph, kernel.nodes) if opaque is not None else {}
    mod = module_from_graph(graph, mod=tvm.IRModule(funcs) if funcs else None)
    names = [p.name for p in mod["main"].params]
    # an opaque take of a table smaller than the random indices (BERT's token types: 2 rows) would read
    # out of bounds: TVM's importer emits take in "fast" mode, which does not check
    for name, rows in index_bounds(mod["main"]).items():
        feeds[name] = feeds[name] % max(1, rows)
    return mod, [feeds[n] for n in names]


_WARNED_BUSY = False


def _warn_if_busy() -> None:
    """Once per process: timings taken while other processes compete for the cores are noisy."""
    global _WARNED_BUSY
    if _WARNED_BUSY or not hasattr(os, "getloadavg"):
        return
    cores = usable_cores()
    load = os.getloadavg()[0]
    if load > cores + 0.5:
        _WARNED_BUSY = True
        warnings.warn(f"this machine is busy (load average {load:.1f} on {cores} cores): kernel timings will be "
                      f"noisy; measure on an idle machine (or a remote one through RPC) for reliable costs",
                      RuntimeWarning, stacklevel=4)


def _quiet_now() -> bool:
    """Whether the CPUs are quiet enough now to measure again what was timed on contended ones."""
    share = contention_now()
    return share is not None and not contended(share)


class MeasuredCost(KernelCostModel):
    """Kernels timed with TVM's default lowering on the target (locally or through RPC).

    target: a tvm Target or JSON dict (default: llvm on this CPU).
    cache: a CostCache, a path to the SQLite file, None for the default file
      under the user cache directory, or False for no disk cache.
    runner: LocalRunner (default) or remote.RPCRunner.
    timer: number / repeat / min_repeat_ms / warm-up calls.
    fallback: costs kernels that fail to build (default: an analytic estimate, with a warning).
    module: the IRModule the graphs come from, for opaque calls of its PrimFuncs (or set_module).
    lowering: "default" (relax.get_default_pipeline, what `tvm.compile` users get with fusion) or
      "tuning" (static_shape_tuning's passes); see lowering.py.
    """

    name = "measured"

    def __init__(self, target=None, *, cache: CostCache | str | os.PathLike | None | bool = None,
                 runner=None, timer: TimerSettings | None = None, progress_bar: bool | None = None,
                 fallback=None, seed: int = 0, module=None, lowering: str = "default"):
        from .opaque import OpaqueInfo

        super().__init__(opaque=OpaqueInfo(module), lowering=check_lowering(lowering))
        self.target = as_target(target)
        self.target_key = target_key(self.target)
        if cache is False:
            self.cache = None
        elif isinstance(cache, CostCache):
            self.cache = cache
        else:
            self.cache = CostCache(cache)
        self.runner = runner or LocalRunner(timer)
        if timer is not None and hasattr(self.runner, "settings"):
            self.runner.settings = timer
        self.progress_bar = progress_bar
        self.fallback = fallback
        self.seed = seed
        self.compiles = 0  # kernels compiled by this instance
        self.measurements = 0  # kernels timed by this instance
        self.failures: list[tuple[str, str]] = []  # (kernel label, error) of kernels that failed to build
        self._quiet: bool | None = None  # per batch, read at its first contended entry: then measured again

    @property
    def method(self) -> str:
        return f"measured/{LOWERING_IDS[self.lowering]}"

    @property
    def device(self) -> str:
        return self.runner.device_key

    # ---- the batch --------------------------------------------------------------------------
    def _cached(self, fn, default=None):
        """fn(cache), or `default` without a cache; an unusable cache file (read-only, locked for
        too long, ...) is dropped with one warning and the model goes on measuring without it."""
        if self.cache is None:
            return default
        try:
            return fn(self.cache)
        except sqlite3.Error as exc:
            warnings.warn(f"cost cache {self.cache.path} is unusable ({exc}); going on without it",
                          RuntimeWarning, stacklevel=3)
            self.cache = None
            return default

    def _compute(self, kernels: Sequence[Kernel]) -> list[float]:
        costs: list[float | None] = [None] * len(kernels)
        hits = self._cached(lambda c: c.get_many(self.target_key, self.device, self.method,
                                                 [k.key for k in kernels]), {})
        self._quiet = None
        todo = []
        for i, k in enumerate(kernels):
            entry = hits.get(k.key)
            if self._trusted(entry):
                costs[i] = entry.seconds
            else:
                todo.append(i)
        if todo:
            _warn_if_busy()
            bar = progress(todo, total=len(todo), desc=self._bar_label(), enabled=self.progress_bar)
            for i in bar:
                bar.set_postfix_str(kernels[i].label[:40])
                costs[i] = self._measure_and_store(kernels[i])
            bar.close()
        return [float(c) for c in costs]

    def _trusted(self, entry) -> bool:
        """A cached time is used unless it was taken on contended CPUs and they are quiet now."""
        if entry is None or not contended(entry.contention):
            return entry is not None
        if self._quiet is None:  # the pressure files are read only where a cached time was contended
            self._quiet = self.device == "local" and _quiet_now()
        return not self._quiet

    def _bar_label(self) -> str:
        return "measuring kernels"

    def _measure_and_store(self, kernel: Kernel) -> float:
        # another process may have measured it meanwhile
        entry = self._cached(lambda c: c.get(self.target_key, self.device, self.method, kernel.key))
        if self._trusted(entry):
            return entry.seconds
        try:
            timing = self.measure_kernel(kernel)
        except Exception as exc:  # noqa: BLE001 - a kernel TVM cannot build must not stop the search
            return entry.seconds if entry is not None else self._fail(kernel, exc)
        seconds = timing.median
        if entry is not None:  # contention only slows a kernel: the cache keeps the faster time
            seconds = min(seconds, entry.seconds)
        self._cached(lambda c: c.put(self.target_key, self.device, self.method, kernel.key, timing.median,
                                     timing.std, len(timing.results), kernel.label, timing.contention,
                                     keep_faster=True))
        return seconds

    def _fail(self, kernel: Kernel, exc: Exception) -> float:
        self.failures.append((kernel.label, f"{type(exc).__name__}: {exc}"))
        if self.fallback is None:
            from .analytic import AnalyticCost

            self.fallback = AnalyticCost(efficiency=0.05)
        estimate = self.fallback.kernel_cost(kernel)
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        warnings.warn(f"could not measure kernel {kernel.label}: {first}; using the estimate "
                      f"{estimate * 1e3:.3f} ms (not cached)", RuntimeWarning, stacklevel=3)
        return estimate

    # ---- one kernel -----------------------------------------------------------------------------
    def build(self, kernel: Kernel):
        """(executable, inputs) for a kernel."""
        mod, inputs = kernel_module(kernel, self.seed, self.opaque)
        self.compiles += 1
        return compile_module(mod, self.target, lowering=self.lowering), inputs

    def measure_kernel(self, kernel: Kernel) -> Timing:
        """Build and time one kernel (no cache involved)."""
        executable, inputs = self.build(kernel)
        self.measurements += 1
        if getattr(self.runner, "exclusive", False) and self.cache is not None:
            with file_lock(Path(self.cache.path).with_name("measure.lock")):
                return self.runner.time(executable, inputs, self.target)
        return self.runner.time(executable, inputs, self.target)

    def close(self) -> None:
        self.runner.close()
        if self.cache is not None:
            self.cache.close()
