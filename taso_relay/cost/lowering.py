"""The lowerings the cost models predict, and the helpers that compile with them.

Two lowerings, as TVM users compile models (and as bench/harness does):

"default" -- TVM's default Relax pipeline for the target,
    relax.get_default_pipeline(target): LegalizeOps, AnnotateTIROpPattern,
    FoldConstant, FuseOps, FuseTIR (no schedules on CPU), then tvm.compile.
    Batch norm stays one legalized kernel (it does not fuse into the conv before it).

"tuning" -- what relax.get_pipeline("static_shape_tuning", ...) runs:
    DecomposeOpsForInference, CanonicalizeBindings (batch norm -> arithmetic that
    fuses into the conv), LegalizeOps, AnnotateTIROpPattern, FoldConstant, FuseOps,
    FuseTIR, MetaScheduleApplyDatabase, then tvm.compile. With total_trials=0 and
    the tuned model's work_dir, that pipeline compiles a model with the schedules
    the tuned model found.

Note that plain `tvm.compile(mod, llvm_target)` alone does NOT fuse on CPU; use
`compile_module` (or one of the pipelines above) to get the kernels the cost
models predict.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
from collections import OrderedDict

import tvm
from tvm import relax

LOWERINGS = ("default", "tuning")
LOWERING_IDS = {"default": "default/v1", "tuning": "decompose+zero/v1"}  # in cache keys: bump on change
LOWERING_ID = LOWERING_IDS["default"]


def check_lowering(lowering: str) -> str:
    if lowering not in LOWERINGS:
        raise ValueError(f"unknown lowering '{lowering}' (expected one of {LOWERINGS})")
    return lowering


def as_target(target) -> tvm.target.Target:
    """A Target from a Target, a JSON-like dict, or None (a plain llvm CPU target)."""
    if target is None:
        return tvm.target.Target({"kind": "llvm"})
    if isinstance(target, tvm.target.Target):
        return target
    return tvm.target.Target(target)


def with_cores(target) -> tvm.target.Target:
    """`target`, and for this machine's CPU (llvm, no other mtriple) when it names no num-cores, with the
    cores this process may use: MetaSchedule refuses to tune for a CPU target without it ("physical core
    number must be defined"), and the host target a user writes ({"kind": "llvm"}, the default) has none."""
    target = as_target(target)
    if target.kind.name != "llvm" or int(target.attrs.get("num-cores", 0) or 0) > 0:
        return target
    triple = str(target.attrs.get("mtriple", "") or "")
    if triple and triple != str(tvm.target.Target({"kind": "llvm"}).attrs.get("mtriple", "")):
        return target  # another machine's CPU: its core count is the user's to say (MetaSchedule asks for it)
    import json

    from ..graph.interpreter import usable_cores

    config = {k: v for k, v in json.loads(str(target)).items() if v not in (None, "", [], {})}  # TVM's JSON form
    config["num-cores"] = usable_cores()
    return tvm.target.Target(config)


def target_key(target) -> str:
    """Canonical JSON text of a target (keys sorted): the cache's notion of 'same target'."""
    import json

    target = as_target(target)
    try:
        data = json.loads(str(target))
    except ValueError:
        data = _plain(target.export())
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _plain(obj):
    """TVM containers (Map, Array) and values as plain JSON-able Python."""
    if isinstance(obj, (str, bool, int, float)) or obj is None:
        return obj
    if hasattr(obj, "items"):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) or hasattr(obj, "__len__") and hasattr(obj, "__getitem__"):
        return [_plain(v) for v in obj]
    return str(obj)


def passes_before_folding(lowering: str = "default") -> list:
    """The lowering's passes up to where it folds constants (bench/corpus/check_folding.py folds after
    them both ways): batch norm decomposed for "tuning", then every operator legalized to call_tir."""
    first = [relax.transform.DecomposeOpsForInference(), relax.transform.CanonicalizeBindings()] \
        if check_lowering(lowering) == "tuning" else []
    return first + [relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern()]


def lowering_pipeline(target, database=None, lowering: str = "default") -> tvm.transform.Pass:
    """Relax passes up to fused TIR kernels; with a MetaSchedule database, its schedules applied."""
    from .fold_kernels import fold_kernels

    target = as_target(target)

    @tvm.transform.module_pass(opt_level=0, name="taso_relay.lowering")
    def _lower(mod, _ctx):
        with target:
            mod = tvm.transform.Sequential(passes_before_folding(lowering) + [
                fold_kernels,  # FoldConstant's work, one build per distinct kernel (fold_kernels.py)
                relax.transform.FoldConstant(),
                relax.transform.FuseOps(),
                relax.transform.FuseTIR(),
            ])(mod)
        return apply_database(mod, target, database)

    return _lower


def apply_database(lowered: tvm.IRModule, target, database=None) -> tvm.IRModule:
    """A lowered module with the schedules of a MetaSchedule database (None: as it is)."""
    if database is None:
        return lowered
    with as_target(target), database:
        return relax.transform.MetaScheduleApplyDatabase(enable_warning=False)(lowered)


LOWERINGS_KEPT = 4  # lowered modules a scope of reusing_lowerings holds (whole models: not many)
_REUSED: contextvars.ContextVar = contextvars.ContextVar("taso_relay_lowerings", default=None)


@contextlib.contextmanager
def reusing_lowerings():
    """Inside: `lower` lowers a module it has lowered before only once (by structural hash).

    Tuning lowers a model to find its kernels, and the build that follows lowered it again from the
    start: 17-34 s for full Inception-v3 on 2 cores, twice per module in a tuned speed check. The
    lowered modules are kept only until the outermost scope ends (they hold the model's weights)."""
    memo = _REUSED.get()
    token = _REUSED.set(OrderedDict()) if memo is None else None
    try:
        yield
    finally:
        if token is not None:
            _REUSED.reset(token)


def lower(mod: tvm.IRModule, target, database=None, lowering: str = "default") -> tvm.IRModule:
    """The module with its fused kernels formed (not yet finalised for the VM)."""
    memo = _REUSED.get()
    if memo is None:
        return lowering_pipeline(target, database, lowering)(mod)
    from tvm_ffi import structural_hash

    key = (structural_hash(mod), target_key(target), check_lowering(lowering))
    lowered = memo.get(key)
    if lowered is None:
        lowered = lowering_pipeline(target, None, lowering)(mod)
        while len(memo) >= LOWERINGS_KEPT:
            memo.popitem(last=False)
        memo[key] = lowered
    else:
        memo.move_to_end(key)
    return apply_database(lowered, target, database)


def compile_module(mod: tvm.IRModule, target, database=None, lowering: str = "default"):
    """Compile a Relax module with `lowering`; returns the VM executable.

    "default" runs relax.get_default_pipeline(target) and tvm.compile exactly as a user would;
    "tuning" the static_shape_tuning passes (schedules from `database`, if any), then tvm.compile.
    """
    target = as_target(target)
    if check_lowering(lowering) == "default" and database is None:
        with target:
            lowered = relax.get_default_pipeline(target)(mod)
        return tvm.compile(lowered, target, relax_pipeline=None)
    return tvm.compile(lower(mod, target, database, lowering), target)


def open_database(work_dir: str | os.PathLike):
    """The MetaSchedule JSON database in work_dir (the files static_shape_tuning uses)."""
    from tvm.s_tir import meta_schedule as ms

    os.makedirs(work_dir, exist_ok=True)
    return ms.database.JSONDatabase(work_dir=str(work_dir), module_equality="structural")


def count_kernels(mod: tvm.IRModule, func: str = "main") -> int:
    """Kernel launches in a lowered module's function: call_tir calls left after RewriteDataflowReshape."""
    mod = relax.transform.RewriteDataflowReshape()(mod)
    count = 0

    def visit(expr):
        nonlocal count
        if isinstance(expr, relax.Call) and getattr(expr.op, "name", None) == "relax.call_tir":
            count += 1
        elif isinstance(expr, relax.Call) and isinstance(expr.op, relax.GlobalVar):
            target = mod[expr.op]
            if isinstance(target, relax.Function):
                count += 1

    relax.analysis.post_order_visit(mod[func].body, visit)
    return count
