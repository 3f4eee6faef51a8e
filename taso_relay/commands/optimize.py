"""`taso-relay optimize MODEL.onnx`: run TASOPass, print the rewrite report, write what was asked for."""
from __future__ import annotations

import warnings
from pathlib import Path

from . import common
from .report import changed, format_report, report_dict


def add_optimize(sub) -> None:
    p = sub.add_parser("optimize", help="optimize an ONNX model with TASOPass and report the rewrites",
                       description="Import an ONNX model with TVM, run TASOPass on it and print which rewrites "
                                   "were applied; optionally write the report, the optimized Relax module, the "
                                   "optimized model as ONNX and a drawing of the rewritten regions.")
    common.add_model_arguments(p)
    common.add_taso_arguments(p)
    p.add_argument("--report", type=Path, metavar="OUT.json", help="write the report as JSON")
    p.add_argument("--emit-relax", type=Path, metavar="OUT.py", help="write the optimized module as TVMScript")
    p.add_argument("--emit-onnx", type=Path, metavar="OUT.onnx",
                   help="write the optimized graph as ONNX (checked against the input with onnxruntime)")
    p.add_argument("--draw", type=Path, metavar="OUT.svg",
                   help="draw the rewritten regions before and after (DOT; SVG when graphviz's dot is installed)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs of the numeric check")
    p.set_defaults(run=run_optimize)


def run_optimize(args) -> int:
    for path in (args.report, args.emit_relax, args.emit_onnx, args.draw):
        if path:
            common.output_path(path)  # a bad destination fails now, not after the search
    common.check_rules(args)
    target = common.parse_target(args.target)
    if getattr(args, "cost", None) == "tuned":
        target = common.tuning_target(target)
    n_steps = 2 + sum(bool(x) for x in (args.emit_onnx, args.draw))
    with common.steps_for(args, n_steps) as steps:
        prepared = common.prepare_model(args, steps)
        steps.step("optimizing")
        taso = common.make_pass(args, target)
        optimized, pass_warnings = common.run_pass(taso, prepared.mod)
        result = {
            "model": str(args.model), "target": common.target_json(target),
            "inputs": [t.as_dict() for t in prepared.inputs], "outputs": [t.as_dict() for t in prepared.outputs],
            "folded_nodes": prepared.folded, "converted": prepared.converted or None,
            "cost": args.cost, "time_limit": args.time_limit,
            "pinned": bool(args.input_shape),
            "changed": changed(taso.report),
            "functions": {name: report_dict(r) for name, r in taso.report.items()},
            "pass_settings": {"cost": _describe(getattr(taso, "cost", args.cost)) or "analytic",
                              "time_limit": getattr(taso, "time_limit", args.time_limit),
                              "verify_speed": bool(getattr(taso, "verifies_speed", False)),
                              "layout": _layout(taso),
                              "rules": args.rules or ["shipped"]},
            "warnings": sorted(set(pass_warnings) | set(prepared.warnings)), "written": {},
        }
        if args.report:
            result["written"]["report"] = str(args.report)
        if args.emit_relax:
            args.emit_relax.write_text(_script(optimized))
            result["written"]["relax"] = str(args.emit_relax)
        if args.emit_onnx:
            steps.step("exporting ONNX")
            result["onnx"] = _emit_onnx(args, taso, optimized, prepared)
            result["written"]["onnx"] = str(args.emit_onnx)
        if args.draw:
            steps.step("drawing")
            result["drawing"] = _draw(args, taso, prepared, optimized)
            result["written"]["drawing"] = result["drawing"]["path"]
    if args.report:
        common.write_json(args.report, result)
    if args.json:
        common.print_json(result)
        return 0
    _print(args, target, prepared, taso, result)
    return 0


def _layout(taso):
    """The layout the pass offered ("auto" resolved against its cost model), not the option's spelling."""
    resolve = getattr(taso, "resolved_layout", None)
    return resolve() if callable(resolve) else getattr(taso, "layout", None)


def _describe(value):
    return value if value is None or isinstance(value, (str, int, float)) else type(value).__name__


def _script(mod) -> str:
    header = ("# Optimized by taso_relay (TASOPass). Load with:\n"
              "#   import tvm; from tvm.script import from_source; mod = from_source(open(__file__).read())\n")
    try:
        text = mod.script(show_meta=True)
    except TypeError:
        text = mod.script()
    return header + text + "\n"


def _graphs(taso, prepared, optimized, func="main"):
    """(before, after, signature after): from the pass's report when it keeps them, else re-imported."""
    from ..bridge import graph_from_function

    report = taso.report.get(func)
    before = getattr(report, "graph_before", None)
    after = getattr(report, "graph_after", None)
    signature = getattr(report, "signature", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if before is None:
            imported = graph_from_function(prepared.mod[func], func, prepared.mod)
            before = imported.graph if imported else None
        if after is None or signature is None:
            imported = graph_from_function(optimized[func], func, optimized)
            if imported is not None:
                after, signature = imported.graph, imported.signature
    return before, after, signature


def _emit_onnx(args, taso, optimized, prepared) -> dict:
    import onnx

    from ..onnx_io.export import export_module

    _, after, signature = _graphs(taso, prepared, optimized)
    partial = getattr(taso.report.get("main"), "partial", "")
    if partial:  # its graphs are the static part's alone
        after = signature = None
    exported = export_module(optimized, prepared, graph=after, signature=signature, seed=args.seed)
    onnx.save(exported.model, str(args.emit_onnx))
    info = {"path": str(args.emit_onnx), "exported": exported.exported, "max_abs_diff": exported.max_diff}
    if not exported.exported:
        reason = (f"the pass optimized the static part of 'main' alone ({partial}), and the ONNX export "
                  "writes whole functions" if partial else exported.reason)
        info["reason"] = reason
        if changed(taso.report):  # (nothing rewritten: the input model is the result, no graph went unwritten)
            warnings.warn(f"could not export the optimized graph ({reason}); wrote the input model "
                          f"(shapes inferred, constants folded) to {args.emit_onnx} instead")
    return info


def _draw(args, taso, prepared, optimized) -> dict:
    from ..draw import draw_regions

    before, after, _ = _graphs(taso, prepared, optimized)
    if before is None or after is None:
        raise common.InputError("cannot draw: the function has no graph form (see the report's warnings)")
    return draw_regions(before, after, args.draw, title=Path(args.model).name)


def _print(args, target, prepared, taso, result) -> None:
    print(f"model    {args.model} ({Path(args.model).stat().st_size / 1024:.0f} KB)")
    print(f"inputs   {common.describe_tensors(prepared.inputs)}")
    print(f"outputs  {common.describe_tensors(prepared.outputs)}")
    if prepared.converted:
        print(f"converted {prepared.converted}")
    if prepared.folded:
        print(f"folded   {prepared.folded} ONNX nodes into constants before import")
    settings = result["pass_settings"]
    cost = settings["cost"] or "analytic"
    speed = "; speed verified on the target" if settings.get("verify_speed") else ""
    print(f"target   {common.target_summary(target)}; cost model {cost}, time limit {settings['time_limit']} s{speed}")
    for line in format_report(taso.report):
        print(f"  {line}")
    for message in result["warnings"]:
        if not any(message in line for line in format_report(taso.report)):
            print(f"  warning: {message}")
    if result["changed"] and not settings.get("verify_speed"):
        print("  note: the rewrites are kept on the cost model's prediction, not measured "
              "(--verify-speed times them on the target)")
    written = result["written"]
    if "report" in written:
        print(f"wrote    report {written['report']}")
    if "relax" in written:
        print(f"wrote    TVMScript {written['relax']}")
    if "onnx" in result:
        onnx_info = result["onnx"]
        if onnx_info["exported"]:
            diff = onnx_info["max_abs_diff"]
            check = (f"matches the input model in onnxruntime (max abs diff {diff:.3g})" if diff is not None
                     else "not checked: onnxruntime cannot run the input model")
            what = "optimized graph" if result["changed"] else "the graph as imported (no rewrite applied)"
            pinned = " Its inputs have the shapes --input-shape pinned." if result.get("pinned") else ""
            print(f"wrote    ONNX {onnx_info['path']}: {what}, {check}.{pinned}")
        elif result["changed"]:
            print(f"wrote    ONNX {onnx_info['path']}: the input model, not the optimized graph (see the warning)")
        else:
            print(f"wrote    ONNX {onnx_info['path']}: the input model (no rewrite applied), shapes inferred and "
                  "constants folded")
    if "drawing" in result:
        drawing = result["drawing"]
        print(f"wrote    drawing {drawing['path']}" + (f" ({drawing['note']})" if drawing.get("note") else ""))
