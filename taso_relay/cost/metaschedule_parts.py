"""The parts of a MetaSchedule run that TunedCost replaces, and why.

* Inputs for timing candidates: MetaSchedule's runner fills every input with
  random values, integer ones too, so a gather (`take` of an embedding table)
  reads far out of bounds and its worker dies: the kernel never gets a record,
  and since a kernel without a record is tuned again, every graph the judge
  priced on a transformer started another run for it (the tiny Llama export:
  a run per graph). Integer inputs are filled with ones (an index into any
  table of two rows or more, and never a zero divisor: an integer division by
  zero kills the worker too), boolean ones from [0, 2); float inputs keep
  MetaSchedule's own fill. A kernel whose every candidate failed anyway is not
  tuned again by the same model (TunedCost.tune_modules).
* A kernel whose design space is used up: MetaSchedule's evolutionary search
  answers an empty batch five times before it gives up, and each answer
  evolves a population again (42 s for Llama's fused rotary kernel). With 8
  trials per kernel, 458 of the tiny Llama's 1,182 s of tuning went to empty
  batches. The search stops at the first empty batch instead. An empty batch
  means a fresh sample of the population and its evolution found no schedule
  not yet measured: in a space that small the four more tries seldom find one.
"""
from __future__ import annotations


def _make_alloc_function():
    """MetaSchedule's argument allocation with in-range integers (a nested function: cloudpickle
    sends it by value, so the runner's worker needs not import taso_relay)."""

    def alloc(device, args_info, alloc_repeat):
        import numpy as np
        import tvm
        from tvm.s_tir.meta_schedule.utils import get_global_func_with_default_on_worker

        fill = get_global_func_with_default_on_worker("tvm.contrib.random.random_fill_for_measure", None)
        rng = np.random.default_rng(0)
        repeated = []
        for _ in range(alloc_repeat):
            args = []
            for kind, dtype, shape in args_info:
                if kind != "TENSOR":
                    raise NotImplementedError((kind, dtype, shape))
                dt = np.dtype(dtype) if dtype != "bool" else np.dtype(bool)
                if dt.kind == "b":
                    args.append(tvm.runtime.tensor(rng.integers(0, 2, size=shape).astype(dt), device=device))
                elif dt.kind in "iu":
                    args.append(tvm.runtime.tensor(np.ones(shape, dtype=dt), device=device))
                else:
                    arg = tvm.runtime.empty(shape=shape, dtype=dtype, device=device)
                    fill(arg)
                    args.append(arg)
            repeated.append(args)
        return repeated

    return alloc


def local_runner(timeout_sec: float = 30.0):
    """MetaSchedule's LocalRunner, with integer inputs in range (see the module's docstring)."""
    from tvm.s_tir import meta_schedule as ms

    return ms.runner.LocalRunner(timeout_sec=timeout_sec, f_alloc_argument=_make_alloc_function())


def stop_when_exhausted():
    """MetaSchedule's evolutionary search, ended at its first empty batch (see the module's docstring)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    @derived_object
    class StopWhenExhausted(ms.search_strategy.PySearchStrategy):
        def __init__(self):
            self.inner = None  # made for each kernel: a context initializes its own clone
            self.tuning = False

        def _initialize_with_tune_context(self, context) -> None:
            self.inner = ms.search_strategy.EvolutionarySearch()
            self.inner._initialize_with_tune_context(context)

        def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None):
            self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)
            self.tuning = True

        def post_tuning(self) -> None:
            if self.tuning:  # the scheduler ends a task it already ended: the inner search once only
                self.tuning = False
                self.inner.post_tuning()

        def generate_measure_candidates(self):
            batch = self.inner.generate_measure_candidates()
            return None if batch is not None and len(batch) == 0 else batch

        def notify_runner_results(self, measure_candidates, results) -> None:
            self.inner.notify_runner_results(measure_candidates, results)

        def clone(self):
            return StopWhenExhausted()

    return StopWhenExhausted()
