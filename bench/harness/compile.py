"""The kernel treatment, identical for every configuration of a model.

* ``default``: TVM's target-specific default Relax pipeline
  (``relax.get_default_pipeline``): LegalizeOps, FuseOps/FuseTIR and, on GPU,
  DLight's default schedules; on CPU no schedules at all.  Then ``tvm.compile``.
* ``tuned`` (``--tune-trials N``): ``relax.get_pipeline("static_shape_tuning",
  total_trials=N)`` - MetaSchedule with the same trial budget for every
  configuration, each in its own work directory - then ``tvm.compile``.
* ``shared`` (``--trials-per-task N``): the same passes, but every distinct
  kernel of every configuration of a model is tuned once, N trials each, into
  one database, and every configuration is built from it (``SharedTuning``).
  A kernel two configurations have in common then gets the same schedule, so
  their ratio measures the graphs, not two tuning runs (on 2 cores two tunings
  of one graph differed by 9%).

The kernel count is the number of TIR PrimFuncs left after the Relax pipeline
(one per fused kernel) together with the number of ``call_tir`` launches in
``main``.
"""

from __future__ import annotations

import os
import time

import tvm
from tvm import relax, tirx


def _count_kernels(mod) -> dict:
    prims = {gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)}
    launches = 0
    main = next((f for gv, f in mod.functions.items() if gv.name_hint == "main"), None)
    if isinstance(main, relax.Function):
        call_tir = tvm.ir.Op.get("relax.call_tir")

        def visit(e):
            # Before CallTIRRewrite a launch is call_tir(gv, ...); after it, a
            # direct call of the PrimFunc's GlobalVar.
            nonlocal launches
            if not isinstance(e, relax.Call):
                return
            if e.op.same_as(call_tir) or (
                    isinstance(e.op, tvm.ir.GlobalVar) and e.op.name_hint in prims):
                launches += 1
        relax.analysis.post_order_visit(main.body, visit)
    return {"primfuncs": len(prims), "call_tir": launches}


def relax_lowering(mod, target, tune_trials: int = 0, work_dir: str | None = None):
    """The Relax side of the kernel treatment; returns the lowered module."""
    with target:
        if tune_trials > 0:
            os.makedirs(work_dir, exist_ok=True)
            seq = relax.get_pipeline("static_shape_tuning", total_trials=tune_trials,
                                     target=target, work_dir=work_dir)
        else:
            seq = relax.get_default_pipeline(target)
        return seq(mod)


def build(mod, target, tune_trials: int = 0, work_dir: str | None = None):
    """Lowers and compiles ``mod``; returns ``(executable, info)``.

    ``info``: ``compile_time_s`` (wall time of lowering, tuning included, and
    code generation), ``tuning`` flag, and the kernel counts.
    """
    t0 = time.perf_counter()
    lowered = relax_lowering(mod, target, tune_trials, work_dir)
    kernels = _count_kernels(lowered)
    # Default lowering already ran the target pipeline (finalisation
    # included); the tuning pipeline stops before finalisation, so let
    # tvm.compile run its default build pipeline.
    pipeline = "default" if tune_trials > 0 else None
    ex = tvm.compile(lowered, target=target, relax_pipeline=pipeline)
    info = {
        "compile_time_s": time.perf_counter() - t0,
        "kernel_treatment": f"metaschedule-{tune_trials}" if tune_trials > 0 else "default",
        "kernels": kernels["primfuncs"],
        "kernel_launches": kernels["call_tir"],
    }
    return ex, info


class SharedTuning:
    """One MetaSchedule database per model, shared by its configurations.

    ``build`` tunes the kernels of ``mod`` that have no record yet
    (``trials_per_task`` trials each: the budget is per distinct kernel, so
    equal for every configuration) and compiles with the database's best
    schedules - the stock ``static_shape_tuning`` passes, as ``tuned`` runs.
    """

    def __init__(self, target, trials_per_task: int, work_dir: str, tasks_per_run: int = 4):
        from taso_relay.cost.tuned import TunedCost
        self.model = TunedCost(target, trials=trials_per_task, work_dir=work_dir, tasks_per_run=tasks_per_run)
        self.trials_per_task = trials_per_task

    def build(self, mod):
        from taso_relay.cost.lowering import lower, reusing_lowerings
        t0 = time.perf_counter()
        before = self.model.tunings
        with reusing_lowerings():  # tuning lowers the model to find its kernels: the build reuses that
            self.model.tune_module(mod)
            tuned_s = time.perf_counter() - t0
            lowered = lower(mod, self.model.target, self.model.database(), "tuning")
        kernels = _count_kernels(lowered)
        ex = tvm.compile(lowered, target=self.model.target)
        return ex, {
            "compile_time_s": time.perf_counter() - t0,
            "tuning_time_s": tuned_s,
            "kernel_treatment": f"metaschedule-shared-{self.trials_per_task}-per-task",
            "kernels": kernels["primfuncs"],
            "kernel_launches": kernels["call_tir"],
            "tasks_tuned_here": self.model.tunings - before,
        }
