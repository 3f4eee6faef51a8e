"""TVM's FoldConstant for call_tir, with one kernel build per distinct kernel.

After LegalizeOps every weight-only computation (a decomposed batch norm's arithmetic, an NHWC
weight's transpose) is a call_tir of constants, which FoldConstant evaluates by building its
PrimFunc for "llvm" and running it. Its cache of builds never hits in TVM 0.27 (it stores each
build under the function with a global symbol added, and looks it up without), so full
Inception-v3 cost 565 builds per module, about 16 s of each tuning lowering, for 12 distinct
kernels. This evaluates the same calls the same way (the same PrimFuncs, built by the same
`tirx.build` for the same target, so the same numbers), building each distinct kernel once;
FoldConstant, run after it, folds what it leaves (shape values) and drops the unused bindings.
"""
from __future__ import annotations

import tvm
from tvm import relax
from tvm.ir.expr import GenericConst
from tvm.relax.expr_functor import PyExprMutator, mutator

EVAL_TARGET = "llvm"  # FoldConstant's own


@mutator
class _KernelFolder(PyExprMutator):
    def __init__(self, mod: tvm.IRModule, built: dict):
        super().__init__(mod)
        self.mod = mod
        self.built = built  # structural hash -> [(PrimFunc, runtime function or None)]

    def visit_var_(self, var):
        return self._constant_of(super().visit_var_(var))

    def visit_dataflow_var_(self, var):
        return self._constant_of(super().visit_dataflow_var_(var))

    def _constant_of(self, var):
        value = self.lookup_binding(var)
        return value if _tensor_constant(value) else var

    def visit_call_(self, call):
        call = super().visit_call_(call)
        folded = self._evaluate(call)
        return call if folded is None else folded

    def _evaluate(self, call):
        if not call.op.same_as(tvm.ir.Op.get("relax.call_tir")) or len(call.args) != 2 or len(call.ty_args) != 1:
            return None
        callee, args = call.args[0], call.args[1]
        if not isinstance(args, tvm.ir.expr.Tuple) or not all(_tensor_constant(a) for a in args.fields):
            return None
        ty = call.ty_args[0]
        if not isinstance(ty, relax.TensorType) or not isinstance(ty.shape, relax.ShapeExpr):
            return None
        shape = [int(v) if isinstance(v, tvm.tirx.IntImm) else None for v in ty.shape.values]
        func = self.mod.functions.get(callee) if isinstance(callee, tvm.ir.GlobalVar) else None
        if None in shape or not isinstance(func, tvm.tirx.PrimFunc):
            return None
        run = self._build(func)
        if run is None:
            return None
        out = tvm.runtime.empty(shape, ty.dtype, tvm.cpu())
        run(*[a.value for a in args.fields], out)
        return relax.const(out)

    def _build(self, func):
        import tvm_ffi

        bucket = self.built.setdefault(tvm_ffi.structural_hash(func), [])
        for other, run in bucket:
            if tvm_ffi.structural_equal(func, other):
                return run
        try:
            module = tvm.get_global_func("tirx.build")(func.with_attr("global_symbol", "tir_function"),
                                                      tvm.target.Target(EVAL_TARGET))
            run = module["tir_function"]
        except Exception:  # noqa: BLE001 - as FoldConstant: a kernel that does not build is left as a call
            run = None
        bucket.append((func, run))
        return run


def _tensor_constant(expr) -> bool:
    """A constant tensor (TVM also has constants of a data type, for its builtin calls)."""
    return isinstance(expr, GenericConst) and isinstance(expr.value, tvm.runtime.Tensor)


def _foldable(func) -> bool:
    """A Relax function FoldConstant would fold: not one meant for an external codegen, nor a primitive."""
    if not isinstance(func, relax.Function):
        return False
    keys = set(func.attrs.keys()) if func.attrs is not None else set()
    return not keys & {"Codegen", "Primitive"}


@tvm.transform.module_pass(opt_level=0, name="taso_relay.FoldKernels")
def fold_kernels(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
    """Every call_tir of constants with one tensor output and a static shape, evaluated."""
    built: dict = {}
    updates = {gvar: _KernelFolder(mod, built).visit_expr(func)
               for gvar, func in mod.functions.items() if _foldable(func)}
    if not updates:
        return mod
    mod = mod.clone()  # the caller's module stays as it was
    for gvar, func in updates.items():
        mod[gvar] = func
    return mod
