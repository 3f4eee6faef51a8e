"""`taso-relay tune MODEL.onnx --trials N --work-dir DIR`: MetaSchedule tuning of the (optimized) model.

The records go into DIR; `taso-relay compile MODEL.onnx -o model.so --work-dir DIR`
then builds with them without tuning again. The trial budget is MetaSchedule's (--trials in all,
--max-trials-per-task per kernel); candidates get integer inputs in range (an embedding lookup is
scheduled, not left unscheduled) and a kernel whose schedules are all measured ends at once.
"""
from __future__ import annotations

from pathlib import Path

from . import common
from .build import add_tuning_arguments, optimized_module, tune, tuning_records


def add_tune(sub) -> None:
    p = sub.add_parser("tune", help="tune the optimized model's kernels with MetaSchedule into a work dir",
                       description=common.description(__doc__))
    common.add_model_arguments(p)
    common.add_taso_arguments(p)
    add_tuning_arguments(p, "--trials", 64)
    p.set_defaults(run=run_tune)


def run_tune(args) -> int:
    if args.trials <= 0:
        raise common.InputError("--trials must be > 0")
    target = common.tuning_target(common.parse_target(args.target))
    common.check_rules(args)
    work_dir = args.work_dir or Path(Path(args.model).stem + ".tuning")
    if work_dir.exists() and not work_dir.is_dir():
        raise common.InputError(f"--work-dir {work_dir} is not a directory")
    with common.steps_for(args, 2 + (not args.no_taso)) as steps:
        prepared, mod, taso, _ = optimized_module(args, target, steps)
        before = tuning_records(work_dir)
        steps.step(f"tuning ({args.trials} trials)")
        tune(mod, target, args.trials, work_dir, args.max_trials_per_task, verbose=args.verbose)
    records = tuning_records(work_dir)
    result = {"model": str(args.model), "target": common.target_json(target), "taso": not args.no_taso,
              "trials": args.trials, "work_dir": str(work_dir), "records": records, "new_records": records - before}
    if args.json:
        common.print_json(result)
        return 0
    for r in (taso.report if taso is not None else {}).values():
        print("taso     " + r.summary().replace("\n", "\n         "))
    print(f"tuned    {args.trials} trials on {common.target_summary(target)}: {records} records in {work_dir} "
          f"({records - before} new)")
    print(f"next:    taso-relay compile {args.model} -o model.so --work-dir {work_dir}"
          + (" --no-taso" if args.no_taso else ""))
    return 0
