"""Compile and run Relax modules on numpy inputs: shared by the pass's check, the CLI and tests."""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np
import tvm
from tvm import relax


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


def run_executable(ex, inputs: Sequence[np.ndarray], func: str = "main", device=None) -> list[np.ndarray]:
    device = device or tvm.cpu()
    vm = relax.VirtualMachine(ex, device)
    return flatten(vm[func](*[tvm.runtime.tensor(np.asarray(x, order="C"), device) for x in inputs]))


def run_module(mod: tvm.IRModule, inputs: Sequence[np.ndarray], target=None, func: str = "main") -> list[np.ndarray]:
    """Compile `mod` for `target` (default: in scope, else CPU), run `func` on `inputs`, outputs as numpy."""
    target = target or default_target()
    return run_executable(compile_module(mod, target), inputs, func, device_of(target))


def timed(fn, *args, **kwargs):
    """(result, seconds) of one call."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def random_inputs(params: Sequence, rng: np.random.Generator) -> list[np.ndarray]:
    """Random arrays for tensor parameters (e.g. func.params): floats in [-1, 1), small non-negative ints."""
    out = []
    for p in params:
        shape = tuple(int(d) for d in p.ty.shape.values)
        dtype = str(p.ty.dtype)
        if np.issubdtype(np.dtype(dtype), np.floating):
            out.append(rng.uniform(-1, 1, size=shape).astype(dtype))
        else:
            out.append(rng.integers(0, 4, size=shape).astype(dtype))
    return out
