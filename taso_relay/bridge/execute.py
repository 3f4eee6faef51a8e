"""Compile and run Relax modules on numpy inputs: shared by the pass's check, the CLI and tests."""
from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Sequence

import numpy as np
import tvm
from tvm import relax

from ..graph import INT_HIGH


@contextlib.contextmanager
def stderr_silenced():
    """Send file descriptor 2 to /dev/null for the duration (C++ logging does not go through sys.stderr)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def default_target() -> tvm.target.Target:
    """The target in scope (`with target:`), else the host CPU."""
    current = tvm.target.Target.current(allow_none=True)
    return current if current is not None else tvm.target.Target({"kind": "llvm"})


def compile_module(mod: tvm.IRModule, target=None, pipeline="default"):
    """A VM executable for `mod` (default TVM lowering, no tuning)."""
    return tvm.compile(mod, target or default_target(), relax_pipeline=pipeline)


def flatten(value) -> list[np.ndarray]:
    """VM results (a tensor or nested tuples of them) as a flat list of numpy arrays."""
    if hasattr(value, "numpy"):
        return [value.numpy()]
    out: list[np.ndarray] = []
    for item in value:
        out.extend(flatten(item))
    return out


def device_of(target) -> "tvm.runtime.Device":
    """The device a target's code runs on (device 0 of its kind)."""
    return tvm.device(target.get_target_device_type(), 0)


def runs_here(target) -> bool:
    """Whether code built for `target` can run on this machine: a CPU target for this architecture
    (an aarch64 `mtriple` on an x86 host cannot), or a device of its kind that exists."""
    import platform

    if target.kind.name == "llvm":
        triple = str(target.attrs.get("mtriple", "") or "")
        arch = triple.split("-")[0] if triple else platform.machine()
        same = {"x86_64": ("x86_64", "amd64"), "aarch64": ("aarch64", "arm64")}
        return platform.machine().lower() in same.get(arch.lower(), (arch.lower(),))
    try:
        return bool(device_of(target).exist)
    except Exception:  # noqa: BLE001 - a kind this TVM build has no runtime for
        return False


def run_executable(ex, inputs: Sequence[np.ndarray], func: str = "main", device=None) -> list[np.ndarray]:
    device = device or tvm.cpu()
    vm = relax.VirtualMachine(ex, device)
    return flatten(vm[func](*[tvm.runtime.tensor(np.asarray(x, order="C"), device) for x in inputs]))


def module_with(mod, name: str, func) -> tvm.IRModule:
    """The module `func` runs in as `name`: `mod` where it holds `name` (a copy with `func` there, so calls and
    PrimFuncs it reads come along), else a module of `func` alone."""
    if mod is not None and any(g.name_hint == name for g in mod.get_global_vars()):
        if mod[name].same_as(func):
            return mod
        changed = mod.clone()
        changed[name] = func
        return changed
    return tvm.IRModule({name: func})


def run_module(mod: tvm.IRModule, inputs: Sequence[np.ndarray], target=None, func: str = "main") -> list[np.ndarray]:
    """Compile `mod` for `target` (default: in scope, else CPU), run `func` on `inputs`, outputs as numpy."""
    target = target or default_target()
    return run_executable(compile_module(mod, target), inputs, func, device_of(target))


def timed(fn, *args, **kwargs):
    """(result, seconds) of one call."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def random_inputs(params: Sequence, rng: np.random.Generator, func=None) -> list[np.ndarray]:
    """Random arrays for tensor parameters (e.g. func.params): floats in [-1, 1), small non-negative ints.

    func: the function the parameters belong to; an integer parameter it uses as indices into a
    table (`index_bounds`) stays below that table's extent: TVM's ONNX importer emits take in
    "fast" mode, which reads out of bounds (or crashes) where onnxruntime raises, and BERT's
    token-type table has 2 rows."""
    bounds = index_bounds(func) if func is not None else {}
    out = []
    for p in params:
        shape = tuple(int(d) for d in p.ty.shape.values)
        dtype = str(p.ty.dtype)
        if np.issubdtype(np.dtype(dtype), np.floating):
            out.append(rng.uniform(-1, 1, size=shape).astype(dtype))
        else:
            high = max(1, min(INT_HIGH, bounds.get(p.name, INT_HIGH)))
            out.append(rng.integers(0, high, size=shape).astype(dtype))
    return out


_PASS_THROUGH = ("relax.astype", "relax.reshape", "relax.expand_dims", "relax.squeeze", "relax.broadcast_to",
                 "relax.permute_dims", "relax.flatten")


def index_bounds(func) -> dict[str, int]:
    """Parameter name -> the smallest extent of a table it indexes (relax.take's axis), directly or
    through casts, reshapes and the importer's wrapping of negative indices."""
    if not isinstance(func, relax.Function) or not isinstance(func.body, relax.SeqExpr):
        return {}
    source = {p: p.name for p in func.params}  # var -> the parameter it passes through from
    bounds: dict[str, int] = {}
    for block in func.body.blocks:
        for binding in block.bindings:
            value = binding.value
            name = getattr(getattr(value, "op", None), "name", None)
            if not isinstance(value, relax.Call) or not value.args:
                continue
            if name in _PASS_THROUGH and value.args[0] in source:
                source[binding.var] = source[value.args[0]]
            elif name == "relax.where" and len(value.args) == 3 and value.args[2] in source:
                source[binding.var] = source[value.args[2]]  # where(i < 0, i + n, i): negative indices wrapped
            elif name == "relax.take" and len(value.args) > 1 and value.args[1] in source:
                table = value.args[0].ty
                axis = int(value.attrs.axis) if value.attrs.axis is not None else 0
                shape = getattr(table, "shape", None)
                extent = getattr(shape.values[axis], "value", None) if shape is not None and table.ndim > 0 else None
                if isinstance(extent, int):
                    param = source[value.args[1]]
                    bounds[param] = min(bounds.get(param, extent), extent)
    return bounds
