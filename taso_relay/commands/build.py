"""Shared by compile and tune: the optimized Relax module, and MetaSchedule tuning of it."""
from __future__ import annotations

from pathlib import Path

from . import common


def optimized_module(args, target, steps):
    """(prepared model, module to compile, the TASOPass applied or None, pass warnings)."""
    prepared = common.prepare_model(args, steps)
    if getattr(args, "no_taso", False):
        return prepared, prepared.mod, None, []
    steps.step("optimizing")
    taso = common.make_pass(args, target)
    mod, pass_warnings = common.run_pass(taso, prepared.mod)
    return prepared, mod, taso, pass_warnings


def tune(mod, target, trials: int, work_dir: Path, max_trials_per_task: int | None = None, verbose: bool = False):
    """MetaSchedule: tune `mod`'s kernels (trials > 0) into work_dir and apply its database; returns the module.

    static_shape_tuning's passes and trial budget (`trials` in all, at most `max_trials_per_task` per
    kernel), with the parts the tuned cost model uses (cost/metaschedule_parts.py): integer inputs in
    range (MetaSchedule's own runner reads an embedding table out of bounds, so the lookup was left
    unscheduled), a kernel ended at its first empty batch, and a builder that does not import every
    tensor intrinsic per batch. MetaSchedule's own log lines go to work_dir/logs; its C++ chatter on
    stderr only shows with --verbose.
    """
    import contextlib

    from tvm.s_tir import meta_schedule as ms

    from ..bridge.execute import stderr_silenced
    from ..cost.best_records import read_database, synced_stamp
    from ..cost.cache import file_lock
    from ..cost.lowering import apply_database, lower, open_database
    from ..cost.metaschedule_parts import local_runner, stop_when_exhausted
    from ..cost.tuned import drop_foreign_log_handlers, local_builder

    work_dir.mkdir(parents=True, exist_ok=True)
    drop_foreign_log_handlers()
    with common.quiet_output(), (contextlib.nullcontext() if verbose else stderr_silenced()):
        lowered = lower(mod, target, lowering="tuning")  # static_shape_tuning's passes before its tuning
        if trials > 0:
            with file_lock(work_dir / ".lock"):  # as the tuned cost model: one writer at a time
                database = open_database(work_dir)  # every record: tuning appends to MetaSchedule's own files
                ms.relax_integration.tune_relax(lowered, {}, target, str(work_dir), max_trials_global=int(trials),
                                                max_trials_per_task=max_trials_per_task, builder=local_builder(),
                                                runner=local_runner(), database=database,
                                                strategy=stop_when_exhausted())
                synced = synced_stamp(work_dir, database)
                if synced is not None:
                    read_database(work_dir, database, synced)  # the best records' copy that later runs read
        else:
            database = read_database(work_dir)
        return apply_database(lowered, target, database)


def with_judge_schedules(mod, judge, database):
    """`mod` lowered with the judge's schedules: static_shape_tuning's passes with no trials (what `tune`
    does with trials=0), from the lowering the judge's tuning made when inside reusing_lowerings."""
    from ..cost.lowering import lower

    return lower(mod, judge.target, database, "tuning")


def tuning_records(work_dir: Path) -> int:
    """Number of tuning records MetaSchedule keeps in work_dir (0 when there is no database)."""
    path = Path(work_dir) / "database_tuning_record.json"
    if not path.is_file():
        return 0
    with path.open() as fh:
        return sum(1 for line in fh if line.strip())


def add_tuning_arguments(p, trials_flag: str, default_trials: int) -> None:
    p.add_argument(trials_flag, dest="trials", type=int, default=default_trials, metavar="N",
                   help=f"MetaSchedule trials in total (default {default_trials}"
                        + (": no tuning" if default_trials == 0 else "") + ")")
    p.add_argument("--max-trials-per-task", type=int, default=None, metavar="N",
                   help="MetaSchedule trials per kernel (default: the total; with --cost tuned and no "
                        "--tune-trials, 64)")
    p.add_argument("--work-dir", type=Path, default=None, metavar="DIR",
                   help="MetaSchedule database: tuning records are written there and reused by later runs")
    p.add_argument("--no-taso", action="store_true", help="skip TASOPass (plain TVM, for comparison)")
