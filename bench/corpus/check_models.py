"""Each ONNX model through the pass as a user would run it, the compiled result against the compiled original.

    .venv/bin/python -m bench.corpus.check_models build/corpus/*.onnx --json build/corpus/results.jsonl

Per model: `taso_relay.onnx_io.prepare` (as the CLI imports), TASOPass with min_gain=0 and no speed
check, so every rewrite the search finds is kept and checked; both modules built with TVM's
default pipeline and run on the same random inputs; the original also against onnxruntime. Where
TVM cannot build the original and the pass did not rewrite it, the pass again with its speed check
on, as users run it (it then returns the function re-emitted: a float16 DenseNet), against onnxruntime.
Prints one JSON line per model and exits 1 if any result differs by more than --tolerance of the
output's scale (its largest magnitude; --float16-tolerance for float16 outputs or a function computing in
float16, --bfloat16-tolerance for one computing in bfloat16 between casts), if the original's
outputs are all zeros (a comparison that shows nothing), or if any model fails. Where TVM cannot
build the original but can build the rewritten model (TVM 0.27's default pipeline legalizes a
float16 batch_norm to a float32 result, so a float16 model whose batch norms the pass folds builds
only after it), the rewritten model is compared with onnxruntime instead. Where onnxruntime has no kernel
for the model (a float64 Conv, a bfloat16 MatMul) the rewritten model is still compared with the original (TVM
against TVM) and the line says there is no onnxruntime reference; where TVM cannot build the original either,
the model fails. `--input-shape NAME:D1,D2,...` pins a dynamic input as the CLI's option does, in each model
that has an input of that name.

`--symbolic` imports dynamic exports with their symbolic sizes kept, as `from_onnx` gives them to TVM users
(the CLI's prepare pins them instead), and compares the pass's result, written back in the symbols, with the
original at several sizes (bench/corpus/README.md, session 38).

`--layout nhwc` also converts every conv of the pass's result to NHWC with the layout step's proved
rules (search/layout.py), which in use only a tuned judge chooses: the conversion's bridge back to
Relax (NHWC convs, pools, pads and the transposes left) checked on graphs nobody here wrote, with
TVM's default pipeline, without tuning anything.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

from bench.harness.measure import error_of_scale


def all_zero(outputs: list[np.ndarray]) -> bool:
    """Outputs that show nothing: a wrong rewrite would agree with them as well."""
    return all(not np.any(o) for o in outputs)


def agrees(max_rel_err: float | None, tolerance: float) -> bool:
    """error_of_scale's figure is within `tolerance`: None (another number of outputs or another shape)
    and inf do not agree."""
    return max_rel_err is not None and max_rel_err <= tolerance


def onnxruntime_outputs(path: Path, arrays: list[np.ndarray]) -> tuple[list[np.ndarray] | None, str | None]:
    """onnxruntime's outputs, or None and why where it has no kernel for one of the model's operators (its
    NOT_IMPLEMENTED: no float64 Conv, no bfloat16 MatMul) or refuses the model (a 'same' padded Conv with a
    dilation, which torch exports and TVM reads): the rewritten model is then compared with TVM's original."""
    import onnxruntime as ort
    from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as NoKernel

    options = ort.SessionOptions()
    options.log_severity_level = 4  # the refusal is the record's, not stderr's
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return session.run(None, {i.name: a for i, a in zip(session.get_inputs(), arrays)}), None
    except NoKernel as exc:
        return None, f"no onnxruntime reference: {str(exc).strip().splitlines()[0][:200]}"
    except Exception as exc:  # noqa: BLE001 - onnxruntime's refusal of the model: no reference, said so
        return None, f"no onnxruntime reference (it refuses the model): {str(exc).strip().splitlines()[0][:200]}"


def model_inputs(path: Path) -> set[str]:
    """The names of a model's inputs, as the CLI reads them (initializers listed as inputs left out; the
    weights' data not loaded)."""
    import onnx

    from taso_relay.onnx_io.prepare import graph_inputs

    return {i.name for i in graph_inputs(onnx.load(str(path), load_external_data=False))}


def shapes_for(path: Path, shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The pinned shapes of `path`'s inputs: one run checks a directory, the dynamic exports among the rest."""
    names = model_inputs(path) if shapes else set()
    return {name: shape for name, shape in shapes.items() if name in names}


def tolerance_of(record: dict, args) -> float:
    """--tolerance, or a narrow float's where the outputs are float16 or the function computes in one."""
    narrow = {record.get("computes_in"), "float16" if record.get("float16") else None}
    bounds = {"float16": args.float16_tolerance, "bfloat16": args.bfloat16_tolerance}
    return max([args.tolerance] + [bounds[dtype] for dtype in narrow if dtype in bounds])


def layout_pass(layout: str):
    """TASOPass whose result also has every conv in `layout` (grouped and depthwise ones included)."""
    from tvm import relax

    from bench.corpus.layout_census import activation_transposes
    from taso_relay.passes import TASOOptimizer
    from taso_relay.search.layout import convert_layout

    class Converted(TASOOptimizer):
        def optimize_graph(self, graph, report=None):
            best = super().optimize_graph(graph, report)
            converted, _trail, complete = convert_layout(best, layout)
            self.layout_note = {"convs": sum(n.op == "conv2d" for n in converted.nodes),
                                f"{layout}_convs": sum(n.op == "conv2d" and n.attr("data_layout") == layout.upper()
                                                       for n in converted.nodes),
                                "transposes": [len(activation_transposes(g)) for g in (best, converted)],
                                "complete": complete}
            return converted

    return relax.transform.function_pass(opt_level=0, name=f"TASOPass+{layout}")(Converted)


def check(path: Path, target, time_limit: float, layout: str | None = None, lowering: str = "default",
          input_shapes: dict[str, tuple[int, ...]] | None = None) -> dict:
    import tvm
    from tvm import relax

    from taso_relay.bridge.execute import flatten, random_inputs
    from taso_relay.cost.lowering import compile_module
    from taso_relay.guard.close import narrow_float
    from taso_relay.onnx_io import prepare
    from taso_relay.passes import TASOPass

    record: dict = {"model": path.stem}
    start = time.perf_counter()
    mod = prepare(path, input_shapes or {}).mod
    if input_shapes:
        record["pinned"] = {name: list(shape) for name, shape in input_shapes.items()}
    kind = layout_pass(layout) if layout else TASOPass
    taso = kind(target=target, min_gain=0.0, verify_speed=False, time_limit=time_limit, lowering=lowering)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rewritten = taso(mod)
    report = taso.report.get("main")
    applied = [a.rule_id for a in report.search.applied] if report.search else []
    record.update(status=report.status, rewrites=len(applied), opaque=report.opaque,
                  pass_s=round(time.perf_counter() - start, 1), check=report.check,
                  rules=dict(sorted(Counter(applied).items())))  # which rules, so two runs compare exactly
    said = [w[:300] for w in report.warnings if w.startswith("taso_relay")]
    if said:  # the pass's own warnings: why it left a function unchanged, what it skipped
        record["warnings"] = said
    if layout:
        record["layout"] = getattr(taso, "layout_note", None)
    arrays = random_inputs(mod["main"].params, np.random.default_rng(0), mod["main"])
    device = tvm.cpu()

    def run(module):
        vm = relax.VirtualMachine(compile_module(module, target), device)
        return [np.asarray(o) for o in flatten(vm["main"](*[tvm.runtime.tensor(a, device) for a in arrays]))]

    reference, no_reference = onnxruntime_outputs(path, arrays)
    if no_reference:
        record["onnxruntime"] = no_reference
    try:
        original = run(mod)
    except Exception as exc:  # noqa: BLE001 - a float16 batch_norm (TVM 0.27): onnxruntime decides
        record["original_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        original = None
        if report.status != "optimized":  # as a user runs it (speed check on), the pass returns it re-emitted
            taso = kind(target=target, min_gain=0.0, verify_speed=True, time_limit=time_limit, lowering=lowering)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rewritten = taso(mod)
            record["status"] = taso.report["main"].status
            if record["status"] != "re-emitted":
                raise
    if original is None and reference is None:
        raise RuntimeError(f"nothing to compare with: TVM cannot build the original ({record['original_error']}) "
                           f"and there is {no_reference}")
    result = run(rewritten)
    if original is None:
        record["rewritten_vs_onnxruntime"] = error_of_scale(result, reference)
    else:
        record["rewritten_vs_original"] = error_of_scale(result, original)
        record["original_vs_onnxruntime"] = None if reference is None else error_of_scale(original, reference)
        if reference is not None and record["original_vs_onnxruntime"] is None:  # (TVM's import, not the pass)
            record["onnxruntime"] = (f"TVM's import computes outputs of shapes {[list(o.shape) for o in original]}, "
                                     f"onnxruntime {[list(r.shape) for r in reference]}")
    if all_zero(original if original is not None else reference):
        record["vacuous"] = "the original's outputs are all zeros on these inputs: the comparison shows nothing"
    record["float16"] = any(o.dtype == np.float16 for o in result)
    narrow = narrow_float(taso.report["main"].graph_before)  # as TASOPass's own check finds it
    if narrow is not None:
        record["computes_in"] = narrow.name
    record["total_s"] = round(time.perf_counter() - start, 1)
    return record


def check_symbolic(path: Path, target, time_limit: float, sizes=(1, 2, 3)) -> dict:
    """A dynamic export imported as TVM users do (from_onnx, its symbolic sizes kept: the CLI's prepare pins
    them), TASOPass with every rewrite kept, and the result against the original at each of `sizes` (the first
    symbol that size, the next one more, ...): both bound there, built, run on the same random inputs."""
    import onnx
    import tvm
    from tvm.relax.frontend.onnx import from_onnx

    from taso_relay.bridge import symbolic_sizes
    from taso_relay.bridge.execute import module_with, random_inputs, run_module
    from taso_relay.passes import TASOPass

    start = time.perf_counter()
    mod = from_onnx(onnx.load(str(path)), keep_params_in_input=False)
    taso = TASOPass(target=target, min_gain=0.0, verify_speed=False, time_limit=time_limit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rewritten = taso(mod)
    report = taso.report["main"]
    applied = [a.rule_id for a in report.search.applied] if report.search and report.status == "optimized" else []
    record = {"model": path.stem, "status": report.status, "rewrites": len(applied), "sized": report.sized,
              "rules": dict(sorted(Counter(applied).items())), "pass_s": round(time.perf_counter() - start, 1)}
    if report.status == "rejected":
        record["rejected"] = report.warnings[-1][:300]
    errors, outputs = {}, []
    # the parameters' own symbols (not one TVM derives from them, as a range's length), each its own size (a
    # swap shows); bound in their module (the PrimFuncs its call_tirs call)
    names = {d.name for p in mod["main"].params for d in getattr(p.ty.shape, "values", ())
             if isinstance(d, tvm.tirx.Var)}
    steps = symbolic_sizes.divisors(mod["main"])
    for k in sizes:
        sized = {n: k + i for i, n in enumerate(sorted(names))}
        try:
            bound = [module_with(m, "main", m["main"].bind_symbolic_vars(sized)) for m in (mod, rewritten)]
        except Exception:  # noqa: BLE001 - a size the model halves (a pixel unshuffle's H) must be even
            sized = {n: (k + i) * steps.get(n, 1) for i, n in enumerate(sorted(names))}
            bound = [module_with(m, "main", m["main"].bind_symbolic_vars(sized)) for m in (mod, rewritten)]
        arrays = random_inputs(bound[0]["main"].params, np.random.default_rng(k), bound[0]["main"])
        original = run_module(bound[0], arrays, target)
        errors[k] = error_of_scale(run_module(bound[1], arrays, target), original)
        outputs += original
    record["rewritten_vs_original"] = max(errors.values(), key=lambda e: float("inf") if e is None else e)
    record["at_sizes"] = errors
    if all_zero(outputs):
        record["vacuous"] = "the original's outputs are all zeros on these inputs: the comparison shows nothing"
    record["total_s"] = round(time.perf_counter() - start, 1)
    return record


def pinned_shapes(parser: argparse.ArgumentParser, args) -> dict[str, tuple[int, ...]]:
    """--input-shape's shapes; a malformed one, or a name no model's input has (a typo would pin nothing), is a
    usage error."""
    from taso_relay.onnx_io import InputError, parse_input_shapes

    try:
        shapes = parse_input_shapes(args.input_shape)
    except InputError as exc:
        parser.error(str(exc))
    if not shapes:
        return {}
    unknown = sorted(set(shapes).difference(*(model_inputs(path) for path in args.models if path.exists())))
    if unknown:
        parser.error(f"--input-shape names {', '.join(unknown)}, which no model given has as an input")
    return shapes


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+", type=Path)
    p.add_argument("--json", type=Path, default=None, help="also append the JSON lines to this file")
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--float16-tolerance", type=float, default=2e-2,
                   help="for float16 outputs (each rounded to 1e-3 of itself; TVM against onnxruntime on a float16 "
                        "ResNet-18: 6.7e-3)")
    p.add_argument("--bfloat16-tolerance", type=float, default=4e-2,
                   help="for a model that computes in bfloat16 (a rounding step is 7.8e-3 of the magnitude; TASOPass's "
                        "check allows ten; x @ a + x @ b against x @ (a + b): 5.3e-3)")
    p.add_argument("--time-limit", type=float, default=8.0)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--lowering", choices=("default", "tuning"), default="default",
                   help="the lowering the search prices kernels for: tuning (MetaSchedule's) also merges matmuls, "
                        "which the default CPU lowering runs slower (the comparison is built the default way)")
    p.add_argument("--layout", choices=("nhwc",), default=None,
                   help="also convert every conv of the result to this layout (the layout step's rules)")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME:D1,D2,...",
                   help="pin the shape of an input with dynamic dimensions (repeatable), e.g. input_ids:1,16, in "
                        "each model that has an input of that name")
    p.add_argument("--symbolic", action="store_true",
                   help="dynamic exports with their symbolic sizes kept (TASOPass's stand-in sizes), the result "
                        "checked at sizes 1, 2 and 3")
    args = p.parse_args(argv)
    shapes = pinned_shapes(p, args)
    import tvm

    target = tvm.target.Target({"kind": "llvm", "num-cores": args.cores})
    failed, imports_differ = 0, []
    for path in args.models:
        try:
            record = (check_symbolic(path, target, args.time_limit) if args.symbolic else
                      check(path, target, args.time_limit, args.layout, args.lowering, shapes_for(path, shapes)))
        except Exception as exc:  # noqa: BLE001 - one model's failure is its record, the others still run
            record = {"model": path.stem, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
        tolerance = tolerance_of(record, args)
        error = record.get("rewritten_vs_original", record.get("rewritten_vs_onnxruntime"))
        bad = "error" in record or "vacuous" in record or not agrees(error, tolerance)
        failed += bad
        versus = record.get("original_vs_onnxruntime")  # (TVM's import, not the pass: said, not failed)
        if str(record.get("onnxruntime", "")).startswith("TVM's import") or \
                versus is not None and not agrees(versus, tolerance):
            imports_differ.append(record["model"])
        line = json.dumps(record)
        print(line, flush=True)
        if args.json:
            with args.json.open("a") as fh:
                fh.write(line + "\n")
    print(f"{len(args.models) - failed} of {len(args.models)} models: the rewritten model computes what the "
          f"original does (within {args.tolerance:g} of the output's scale, float16 {args.float16_tolerance:g}, "
          f"bfloat16 {args.bfloat16_tolerance:g}; where TVM cannot build the original, what onnxruntime computes)",
          file=sys.stderr)
    if imports_differ:
        print(f"{len(imports_differ)} where TVM's import of the model (the original, before the pass) differs from "
              f"onnxruntime in shape or beyond the tolerance: {', '.join(imports_differ)}",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
