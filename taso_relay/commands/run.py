"""`taso-relay run model.so --inputs in.npz`: run a compiled library on inputs from an .npz file.

Inputs are matched by the model's input names (from `model.so.json`, written
by `taso-relay compile`); without that file, arrays are taken in the .npz's
order. `--outputs out.npz` saves the results under the model's output names.
"""
from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import numpy as np

from . import common


def add_run(sub) -> None:
    p = sub.add_parser("run", help="run a library written by `taso-relay compile`",
                       description=common.description(__doc__))
    p.add_argument("library", type=Path, metavar="model.so", help="library written by taso-relay compile")
    p.add_argument("--inputs", type=Path, metavar="IN.npz",
                   help="input arrays by input name (default: random inputs of the recorded shapes)")
    p.add_argument("--outputs", type=Path, metavar="OUT.npz", help="write the outputs, by output name")
    p.add_argument("--print-time", action="store_true", help="time the model (TVM's time_evaluator)")
    p.add_argument("--repeat", type=int, default=10, metavar="N", help="timed runs with --print-time (default 10)")
    p.add_argument("--device", default=None, help="device kind (default: from the recorded target, else cpu)")
    p.add_argument("--seed", type=int, default=0, help="seed of random inputs")
    p.set_defaults(run=run_run)


def load_sidecar(library: Path) -> dict | None:
    from .compile import sidecar_path

    path = sidecar_path(library)
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise common.InputError(f"{path} is not a valid description of the library: {exc}") from None


def _note(text: str) -> None:
    """A conversion the user may not expect, said on stderr (stdout stays the result)."""
    print(f"taso-relay: note: {text}", file=sys.stderr)


def _narrow(value: np.ndarray, spec: dict) -> np.ndarray:
    """`value` as the model's dtype: a float rounded (said so), an integer only if every value fits."""
    want = np.dtype(spec["dtype"])
    if np.can_cast(value.dtype, want, casting="safe"):
        return value.astype(want)
    if want.kind in "iu":
        info = np.iinfo(want)
        if value.size and (value.min() < info.min or value.max() > info.max):
            raise common.InputError(f"input '{spec['name']}' is {value.dtype} with values outside the model's "
                                    f"{want} ({value.min()} to {value.max()})")
        _note(f"input '{spec['name']}' is {value.dtype}, converted to the model's {want}")
    else:
        _note(f"input '{spec['name']}' is {value.dtype}, rounded to the model's {want}")
    return value.astype(want)


def read_inputs(path: Path, specs: list[dict] | None) -> list[np.ndarray]:
    if not path.is_file():
        raise common.InputError(f"no such inputs file: {path}")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise common.InputError(f"{path} is not a readable .npz file: {common.first_line(exc)}") from None
    if specs is None:
        return list(arrays.values())
    if len(specs) == 1 and len(arrays) == 1:
        values = list(arrays.values())
        (key,) = arrays
        if key not in (specs[0]["name"], specs[0].get("param")):
            _note(f"the one array in {path.name}, '{key}', is taken as input '{specs[0]['name']}'")
    else:
        values = []
        for spec in specs:
            for key in (spec["name"], spec.get("param")):
                if key in arrays:
                    values.append(arrays[key])
                    break
            else:
                raise common.InputError(f"{path} has no array '{spec['name']}'; it has {', '.join(arrays) or 'none'} "
                                        f"(the model's inputs: {', '.join(s['name'] for s in specs)})")
    out = []
    for spec, value in zip(specs, values):
        want = tuple(spec["shape"])
        if tuple(value.shape) != want:
            raise common.InputError(f"input '{spec['name']}' has shape {list(value.shape)}, the model takes "
                                    f"{list(want)}")
        if spec.get("dtype") not in (None, "unknown") and str(value.dtype) != spec["dtype"]:
            if np.can_cast(value.dtype, spec["dtype"], casting="same_kind"):
                value = _narrow(value, spec)
            else:
                raise common.InputError(f"input '{spec['name']}' is {value.dtype}, the model takes {spec['dtype']}")
        bound = spec.get("index_below")
        if bound is not None and value.size and (value.min() < -bound or value.max() >= bound):
            # onnxruntime refuses such ids; TVM's build would read past the table
            raise common.InputError(f"input '{spec['name']}' indexes a table of {bound} rows but holds values "
                                    f"from {value.min()} to {value.max()}")
        out.append(value)
    return out


def _unique(names: list[str]) -> list[str]:
    """Output names as .npz keys: a model may list one tensor twice (torch.onnx does); the repeat gets _k."""
    seen: set[str] = set()
    out = []
    for k, name in enumerate(names):
        key = name if name not in seen else f"{name}_{k}"
        seen.add(key)
        out.append(key)
    return out


def random_inputs(specs: list[dict], seed: int) -> list[np.ndarray]:
    from ..onnx_io.export import random_onnx_inputs
    from ..onnx_io.prepare import Tensor

    tensors = [Tensor(s["name"], tuple(s["shape"]), s["dtype"]) for s in specs]
    bounds = {s["name"]: s["index_below"] for s in specs if "index_below" in s}
    feeds = random_onnx_inputs(tensors, seed, bounds)
    return [feeds[t.name] for t in tensors]


def run_run(args) -> int:
    import tvm
    from tvm import relax

    from ..bridge.execute import flatten

    lib_path = args.library
    if not lib_path.is_file():
        raise common.InputError(f"no such library: {lib_path}")
    if args.outputs:
        common.output_path(args.outputs)
    meta = load_sidecar(lib_path)
    specs = meta["inputs"] if meta else None
    kind = args.device or ((meta or {}).get("target", {}).get("kind") or "cpu")
    kind = "cpu" if kind in ("llvm", "c") else kind
    try:
        device = tvm.device(kind, 0)
    except Exception:  # noqa: BLE001
        raise common.InputError(f"unknown device '{kind}'") from None
    if not device.exist:
        raise common.InputError(f"device {kind}:0 is not present on this machine")
    if args.inputs:
        inputs = read_inputs(args.inputs, specs)
    elif specs is not None:
        inputs = random_inputs(specs, args.seed)
    else:
        raise common.InputError(f"--inputs is needed: {lib_path} has no {lib_path.name}.json describing its inputs")
    try:
        lib = tvm.runtime.load_module(str(lib_path))
        vm = relax.VirtualMachine(lib, device)
    except Exception as exc:  # noqa: BLE001
        raise common.InputError(f"cannot load {lib_path} as a TVM library: {common.first_line(exc)}") from None
    with common.steps_for(args, 1 + args.print_time) as steps:
        steps.step("running")
        tensors = [tvm.runtime.tensor(np.asarray(x, order="C"), device) for x in inputs]
        try:
            outputs = flatten(vm["main"](*tensors))
        except Exception as exc:  # noqa: BLE001 - wrong number or shape of inputs
            raise common.InputError(f"the library rejected the inputs: {common.first_line(exc)}") from None
        timing = None
        if args.print_time:
            steps.step(f"timing ({args.repeat} runs)")
            timer = vm.time_evaluator("main", device, number=1, repeat=max(1, args.repeat))
            res = timer(*tensors)
            timing = {"mean_ms": res.mean * 1e3, "median_ms": res.median * 1e3, "std_ms": res.std * 1e3,
                      "repeat": max(1, args.repeat)}
    names = _unique([o["name"] for o in meta["outputs"]] if meta and len(meta["outputs"]) == len(outputs) else
                    [f"output_{k}" for k in range(len(outputs))])
    if args.outputs:
        np.savez(args.outputs, **dict(zip(names, outputs)))
    result = {"library": str(lib_path), "device": kind,
              "inputs": "random" if not args.inputs else str(args.inputs),
              "outputs": [{"name": n, "shape": list(o.shape), "dtype": str(o.dtype)} for n, o in zip(names, outputs)],
              "written": str(args.outputs) if args.outputs else None, "time": timing}
    if args.json:
        common.print_json(result)
        return 0
    if not args.inputs:
        print(f"inputs   random (seed {args.seed})")
    for name, value in zip(names, outputs):
        print(f"output   {name} {value.dtype}{list(value.shape)}: {_preview(value)}")
    if args.outputs:
        print(f"wrote    {args.outputs}")
    if timing:
        print(f"time     {timing['median_ms']:.3f} ms median, {timing['mean_ms']:.3f} ms mean "
              f"(+- {timing['std_ms']:.3f}) over {timing['repeat']} runs on {kind}")
    return 0


def _preview(value: np.ndarray) -> str:
    flat = value.reshape(-1)
    shown = np.array2string(flat[:6], precision=4, separator=", ", max_line_width=200)
    return shown[:-1] + (", ...]" if flat.size > 6 else "]")
