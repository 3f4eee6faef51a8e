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
* A kernel without a reduction (a chain of element-wise and layout ops): its
  schedules are a few choices of parallel, vectorize and unroll, yet the
  search samples its population of 512 five times over before it settles for
  the one or two it found, then evolves 512 more. On the tiny Llama's merged
  Q/K/V with its rotary embedding fused in, that took 260 and 349 s to pick
  one candidate each. Such kernels get a population of 64 (SMALL_SPACE).
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


# The evolutionary search's settings for a kernel with no reduction (default: 512 and 50).
SMALL_SPACE = {"population_size": 64, "init_min_unmeasured": 8}


def has_reduction(mod) -> bool:
    """Whether a kernel (an IRModule whose "main" is a PrimFunc) has a block with a reduction axis;
    True where that cannot be told (a PrimFunc without blocks)."""
    from tvm import s_tir

    try:
        sch = s_tir.Schedule(mod)
        root = sch.get_sblock("root")
    except Exception:  # noqa: BLE001 - hand-written TIR with no root block: MetaSchedule's own settings
        return True
    todo = [root]
    while todo:
        block = todo.pop()
        if any(int(iv.iter_type) == 2 for iv in sch.get(block).iter_vars):  # IterVar.CommReduce
            return True
        todo.extend(sch.get_child_blocks(block))
    return False


def search_settings(mod) -> dict:
    """The evolutionary search's settings for a kernel: SMALL_SPACE where it has no reduction."""
    return {} if has_reduction(mod) else dict(SMALL_SPACE)


def stop_when_exhausted():
    """MetaSchedule's evolutionary search, ended at its first empty batch, with a smaller population for a
    kernel without a reduction (see the module's docstring)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    @derived_object
    class StopWhenExhausted(ms.search_strategy.PySearchStrategy):
        def __init__(self):
            self.inner = None  # chosen for each kernel: a context initializes its own clone
            self.tuning = False

        def _initialize_with_tune_context(self, context) -> None:
            self.inner = ms.search_strategy.EvolutionarySearch(**search_settings(context.mod))
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
