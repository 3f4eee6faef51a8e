"""Timing a compiled kernel: on this machine (LocalRunner) or on a remote one (remote.RPCRunner).

Both run the VM's stateful API (`set_input`, then `invoke_stateful` under
`time_evaluator`), so outputs never cross the wire and tuple results work over
RPC. time_evaluator discards one warm-up call; we add `warmup` more calls
before timing, take `repeat` repeats of `number` calls each, and report the
median and standard deviation.
"""
from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .contention import Window


@dataclass(frozen=True)
class Timing:
    median: float  # seconds
    std: float
    results: tuple[float, ...]
    contention: float | None = None  # share of the timing in which other work waited for a CPU (local timings)

    @classmethod
    def of(cls, results: Sequence[float]) -> "Timing":
        res = tuple(float(r) for r in results)
        std = statistics.pstdev(res) if len(res) > 1 else 0.0
        return cls(float(statistics.median(res)), float(std), res)


@dataclass
class TimerSettings:
    """How a kernel is timed.

    number=1 and no min_repeat_ms by default: a kernel runs once between other
    kernels in a real model, and long back-to-back loops on a shared machine
    measure the scheduler more than the kernel. `repeat` is lowered for slow
    kernels so that one kernel takes about `budget_s` (never below min_repeat).
    cache_flush_bytes > 0 flushes that much CPU cache before each repeat.
    A noisy measurement (std / median above max_rsd: another process took the core for a
    while) is taken again up to `retries` times; the one with the lowest median is kept.
    """

    number: int = 1
    repeat: int = 10
    min_repeat_ms: int = 0
    warmup: int = 2
    budget_s: float = 1.0
    min_repeat: int = 3
    cache_flush_bytes: int = 0
    max_rsd: float = 0.1
    retries: int = 2


def time_vm(vm, dev, inputs: Sequence, settings: TimerSettings) -> Timing:
    """Time the VM's "main" on already-placed inputs (warm-up, then `repeat` repeats; median)."""
    import time

    vm.set_input("main", *inputs)
    first = 0.0
    for k in range(max(settings.warmup, 1)):
        start = time.perf_counter()
        vm.invoke_stateful("main")
        dev.sync()
        first = time.perf_counter() - start
    repeat = settings.repeat
    if first > 0 and first * settings.number * repeat > settings.budget_s:
        repeat = max(settings.min_repeat, int(settings.budget_s / (first * settings.number)))
    timer = vm.module.time_evaluator("invoke_stateful", dev, number=settings.number, repeat=repeat,
                                     min_repeat_ms=settings.min_repeat_ms,
                                     cache_flush_bytes=settings.cache_flush_bytes)
    best = Timing.of(timer("main").results)
    for _ in range(settings.retries):
        if best.median <= 0 or best.std / best.median <= settings.max_rsd:
            break
        again = Timing.of(timer("main").results)
        if again.median < best.median:
            best = again
    return best


class LocalRunner:
    """Times executables on this machine's device for the target (CPU for llvm)."""

    device_key = "local"
    exclusive = True  # timings must not overlap other processes' timings on this machine

    def __init__(self, settings: TimerSettings | None = None, device: str | None = None):
        self.settings = settings or TimerSettings()
        self.device = device

    def time(self, executable, inputs: Sequence[np.ndarray], target=None) -> Timing:
        import tvm
        from tvm import relax

        dev = tvm.runtime.device(self.device) if self.device else (
            tvm.runtime.device_from_target(target) if target is not None else tvm.cpu())
        vm = relax.VirtualMachine(executable, dev)
        args = [tvm.runtime.tensor(a, dev) for a in inputs]
        with Window() as window:
            timing = time_vm(vm, dev, args, self.settings)
        if dev.dlpack_device_type() != tvm.cpu().dlpack_device_type():  # a GPU kernel's time: not CPU-bound
            return timing
        return dataclasses.replace(timing, contention=window.share)

    def close(self) -> None:
        pass
