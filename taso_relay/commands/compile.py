"""`taso-relay compile MODEL.onnx -o model.so`: optimize, (tune,) compile and export a deployable library.

Beside the library, `model.so.json` records the model's input and output
names, shapes and dtypes and the target, so `taso-relay run` can feed an .npz
by input name and name the outputs.
"""
from __future__ import annotations

from pathlib import Path

from . import common
from .build import add_tuning_arguments, optimized_module, tune, tuning_records, with_judge_schedules
from .report import changed


class BuildError(RuntimeError):
    """tvm.compile failed on the module: TVM's error, not taso-relay's (the CLI says which)."""

    kind = "TVM could not build the model"


def add_compile(sub) -> None:
    p = sub.add_parser("compile", help="optimize and compile an ONNX model into a deployable library",
                       description=common.description(__doc__))
    common.add_model_arguments(p)
    p.add_argument("-o", "--output", type=Path, required=True, metavar="model.so",
                   help="the library to write (.so; .tar also works)")
    common.add_taso_arguments(p)
    add_tuning_arguments(p, "--tune-trials", 0)
    p.set_defaults(run=run_compile)


def judge_database(target) -> Path:
    """Where `--cost tuned` tunes without --tune-trials: the tuned cost model's own database for the
    target, shared by every compile of every model, so a second compile tunes nothing again."""
    from ..cost.paths import default_tuning_dir
    from ..cost.tuned import tuning_key

    return default_tuning_dir() / tuning_key(target)


def _index_bound(name: str, bounds: dict) -> dict:
    """`index_below` for an input used as indices into a table: `run` draws its random values below it."""
    return {"index_below": int(bounds[name])} if name in bounds else {}


def sidecar_path(library) -> Path:
    return Path(str(library) + ".json")


def run_compile(args) -> int:
    import contextlib

    import tvm

    from ..bridge.execute import stderr_silenced
    from ..cost.lowering import compile_module, reusing_lowerings
    from ..onnx_io.export import onnx_index_bounds

    out = common.output_path(args.output)
    common.check_rules(args)
    if args.trials < 0:
        raise common.InputError("--tune-trials must be >= 0")
    target = common.parse_target(args.target)
    # the tuned judge priced MetaSchedule's kernels: the library is built from its database
    judged = getattr(args, "cost", None) == "tuned" and not args.no_taso
    tuning = args.trials > 0 or args.work_dir is not None or judged
    if tuning:
        target = common.tuning_target(target)
    work_dir = args.work_dir or (Path(str(out) + ".tuning") if args.trials or not judged else judge_database(target))
    if tuning:
        args.work_dir = work_dir  # TASOPass(cost="tuned") tunes into the same database
    n_steps = 3 + (not args.no_taso) + tuning
    # the speed check builds as this build does: TVM's default lowering, or the judge's schedules
    args.keep_build = not tuning or (judged and not args.trials)
    with common.steps_for(args, n_steps) as steps, reusing_lowerings():  # tuning's lowering, then the build's
        prepared, mod, taso, pass_warnings = optimized_module(args, target, steps)
        report = taso.report if taso is not None else {}
        executable = None  # the speed check's executable of `mod`, when it is what this build would make
        if tuning:
            if judged and not args.trials:  # kernels the judge never met alone (fused otherwise) get tuned too
                steps.step(f"tuning the kernels not yet tuned ({common.judge_trials(args)} trials each)")
                judge = common.judge_cost(args, target)
                tuned_before = judge.tunings
                database = judge.tune_modules([mod])
                if judge.tunings == tuned_before:  # no new schedule since the speed check built `mod`
                    executable = taso.take_build(mod, target, "tuning", database)
                if executable is None:  # static_shape_tuning's passes with no trials, on the lowering tuning made
                    with common.quiet_output(), (contextlib.nullcontext() if args.verbose else stderr_silenced()):
                        mod = with_judge_schedules(mod, judge, database)
            else:
                steps.step(f"tuning ({args.trials} trials)" if args.trials else "applying tuning records")
                mod = tune(mod, target, args.trials, work_dir, args.max_trials_per_task, verbose=args.verbose)
        elif taso is not None:
            executable = taso.take_build(mod, target)
        steps.step("compiling")
        # TVM's C++ notes while lowering ("Fast mode segfaults..." for every embedding take) only with --verbose
        with common.quiet_output(), (contextlib.nullcontext() if args.verbose else stderr_silenced()):
            # tuned: already lowered with its schedules. Else the target's default pipeline, which fuses
            # (TVM 0.27's plain tvm.compile does not, on CPU): what the cost model and speed check assume
            if executable is None:
                try:
                    executable = tvm.compile(mod, target) if tuning else compile_module(mod, target)
                except Exception as exc:  # TVM's own failure: said as such, with how to tell whether the pass matters
                    hint = ("with --no-taso too: the model as imported" if args.no_taso
                            else "try --no-taso to see whether the pass's rewrite is involved")
                    raise BuildError(f"{common.first_line(exc)} ({hint})") from exc
        steps.step(f"writing {out.name}")
        try:
            executable.export_library(str(out))
        except Exception as exc:  # noqa: BLE001 - usually a missing C compiler / cross toolchain
            raise RuntimeError(f"cannot write {out}: {common.first_line(exc)}") from exc
    params = [p.name for p in prepared.mod["main"].params]
    bounds = onnx_index_bounds(prepared.model)
    meta = {
        "format": "taso_relay.library/1", "model": str(args.model), "library": out.name,
        "target": common.target_json(target), "taso": not args.no_taso, "changed": changed(report),
        "verify_speed": taso is not None and taso.verifies_speed,
        "tuning": {"trials": args.trials, "work_dir": str(work_dir), "records": tuning_records(work_dir),
                   "trials_per_kernel": common.judge_trials(args) if judged and not args.trials else None}
        if tuning else None,
        "inputs": [dict(t.as_dict(), param=p, **_index_bound(t.name, bounds))
                   for t, p in zip(prepared.inputs, params)],
        "outputs": [t.as_dict() for t in prepared.outputs],
    }
    common.write_json(sidecar_path(out), meta)
    result = dict(meta, library=str(out), sidecar=str(sidecar_path(out)), warnings=sorted(set(pass_warnings)),
                  functions={name: r.summary() for name, r in report.items()})
    if args.json:
        common.print_json(result)
        return 0
    print(f"model    {args.model}: inputs {common.describe_tensors(prepared.inputs)}")
    print(f"target   {common.target_summary(target)}")
    if args.no_taso:
        print("taso     skipped (--no-taso)")
    for r in report.values():
        print("taso     " + r.summary().replace("\n", "\n         "))
    if tuning:
        per_kernel = meta["tuning"]["trials_per_kernel"]
        budget = f"{per_kernel} trials per new kernel" if per_kernel else f"{args.trials} trials"
        print(f"tuning   {budget}, database {work_dir} ({meta['tuning']['records']} records)")
    print(f"wrote    {out} ({out.stat().st_size / 1024:.0f} KB) and {sidecar_path(out).name}")
    print(f"run it:  taso-relay run {out} --inputs inputs.npz")
    return 0
