"""A function with symbolic sizes, optimized at stand-in sizes and written back in its symbols.

The graph form, the rules' conditions and the cost model need every size as a number. A function whose
parameters carry symbolic sizes (a dynamic batch or sequence from `from_onnx` or `torch.export`) is bound at
stand-in values: distinct primes that divide no number the function writes, so that in the optimized
function a size is a multiple of a stand-in exactly when it came from that symbol (the batch 7 of a
(7, 512) reshape is N). `generalize` puts the symbols back: the original parameters, every explicit size
(a reshape's, a slice's bounds, call_tir's outputs) with its stand-in factors read as symbols (a slice's
7 - 1 is N - 1), or, for a size Relax folded once bound (a KV cache's past + new tokens, 5 + 7 = 12; a
reshape's (N - 1) * 2), as the size the original writes of that value (`compound_sizes`; the stand-ins are
picked so that no two such sizes, nor one and a number written, share a value). A function that does not
type-check at the primes and divides a symbol (a pixel unshuffle's H // 2) is bound again with that symbol a
prime times the divisor (`divisors`, the `steps` below), and every size checked is a multiple of it: elsewhere it
does not type-check. A rule whose conditions held
only at the stand-ins would rewrite wrongly elsewhere, and a size the optimizer made may be read as a symbol
by chance: so the caller runs the generalized function against the original at other sizes (`check_sizes`)
and keeps it only where they agree.
"""
from __future__ import annotations

import math
import re
from functools import reduce

import numpy as np
import tvm
from tvm import relax, tirx
from tvm.ir.expr import Constant
from tvm.ir.prim.expr import BinaryOpExpr
from tvm.relax.expr_functor import PyExprMutator, mutator
from tvm.sym.analyzer import Analyzer

from ..cost.progress import progress
from . import execute
from .ops_table import pin_example

_SIZES = (tirx.IntImm, BinaryOpExpr)  # a size written as a value (a slice's bounds)
FIRST_STAND_IN = 5  # the smallest prime tried: small enough to keep the stand-in model cheap to time
MAX_DIVISOR = 64  # a symbol divided by more (a length // 1000) keeps its prime: its stand-in model would be large


def symbols(func) -> list | None:
    """The symbolic sizes `func`'s parameters define, each a parameter's dimension of its own (`(n, 16)`, not
    only `(2 * n,)`), in the order they first appear; None where there are none, or where binding them by
    value would not pin every size (a parameter of unknown shape, two symbols of one name)."""
    if not isinstance(func, relax.Function) or relax.analysis.free_symbolic_vars(func):
        return None
    defined = list(relax.analysis.defined_symbolic_vars(func))
    if not defined:
        return None
    bare = []  # in the order the parameters' shapes name them
    for p in func.params:
        ty = p.ty
        if not isinstance(ty, relax.TensorType) or not isinstance(ty.shape, relax.ShapeExpr):
            return None
        bare += [d for d in ty.shape.values if isinstance(d, tirx.Var) and not any(d.same_as(b) for b in bare)]
    if len(bare) != len(defined) or len({v.name for v in bare}) != len(bare):
        return None
    return bare


def pin_hint(syms) -> str:
    """How to keep an optimized function for the sizes it runs at."""
    example = pin_example(reduce(lambda a, b: a * b, syms))
    return (f"Pinning the sizes it runs at keeps the optimized function for them: relax.transform.BindSymbolicVars("
            f"{example}) before the pass, or --input-shape on the command line")


def stand_ins(func, syms, steps: dict[str, int] | None = None) -> dict:
    """A distinct prime per symbol that divides no number `func` writes as a size or attribute (times the
    symbol's divisor in `steps`, where given: `divisors`); where one can, primes at which every size of the
    symbols is above 1 (a length halved four times is 1 at 11: a 1 says nothing of the symbol, and reads back
    as a number) and at which the sums and other compounds `func` writes (past + new tokens) read back
    (`compound_sizes`: no two share a value, none is a number written)."""
    written = _numbers_written(func)
    compounds = [e for e in _sizes_in(func) if _is_compound(e)]
    explicit = [e for e in explicit_sizes(func) if _is_compound(e)]
    steps = steps or {}
    values, start = {}, FIRST_STAND_IN
    for _ in range(12):  # (a few tries; the first is kept where none will do)
        tried, p = {}, start
        for v in syms:
            while not _is_prime(p) or any(n % p == 0 for n in written):
                p += 1
            tried[v] = p * steps.get(v.name, 1)
            p += 1
        values = values or tried
        table = compound_sizes(func, tried, written, compounds)
        if min(_at(compounds, tried), default=2) > 1 and all(table.get(n, 0) is not None
                                                              for n in _at(explicit, tried)):
            return tried
        start = tried[syms[0]] // steps.get(syms[0].name, 1) + 1
    return values


def divisors(func) -> dict[str, int]:
    """{symbol name: m} for the symbols `func`'s sizes divide by a number (a pixel unshuffle's or
    space-to-depth's H // 2, W // 2): the least common multiple of those numbers. Where the function does not
    type-check at the primes (its reshape of H into (H // 2, 2)), it may at multiples of m: the stand-ins and
    every size checked are then. Only where it must be: a function that runs at odd sizes too (a center crop at
    H // 2) is checked at them."""
    found: dict[str, int] = {}

    def visit(e):
        if isinstance(e, tirx.FloorDiv) and isinstance(e.a, tirx.Var) \
                and isinstance(e.b, tirx.IntImm) and e.b.value > 1:
            found[e.a.name] = math.lcm(found.get(e.a.name, 1), int(e.b.value))
        if isinstance(e, BinaryOpExpr):
            visit(e.a)
            visit(e.b)

    for size in _sizes_in(func):
        visit(size)
    return {name: m for name, m in found.items() if m <= MAX_DIVISOR}


def _sizes_in(func) -> list:
    """Every size `func`'s values' types and shapes hold (numbers, symbols and expressions of them), and the
    sizes it passes as values (a slice's bounds); whole sizes, not the terms inside them."""
    found: list = []

    def visit(e):
        ty = getattr(e, "ty", None)
        if isinstance(ty, relax.TensorType) and isinstance(ty.shape, relax.ShapeExpr):
            found.extend(ty.shape.values)
        if isinstance(e, relax.ShapeExpr):
            found.extend(e.values)
        elif isinstance(e, relax.Call):
            for a in e.args:
                fields = a.fields if isinstance(a, relax.Tuple) else [a]
                found.extend(f for f in fields if isinstance(f, _SIZES))

    for p in func.params:
        visit(p)
    relax.analysis.post_order_visit(func.body, visit)
    return found


def _numbers_written(func) -> set[int]:
    """Every static size in `func`'s values' types and shapes, the numbers inside its size expressions, and
    every number in its calls' attributes."""
    found: set[int] = set()

    def ints(values):
        found.update(int(d.value) for d in values if isinstance(d, tirx.IntImm))

    def visit(e):
        ty = getattr(e, "ty", None)
        if isinstance(ty, relax.TensorType) and isinstance(ty.shape, relax.ShapeExpr):
            ints(ty.shape.values)
        if isinstance(e, relax.ShapeExpr):
            ints(e.values)
        elif isinstance(e, tirx.IntImm):  # a size written as a value (a slice's bounds), or a term of one
            ints([e])
        elif isinstance(e, relax.Call) and e.attrs is not None:
            found.update(attribute_ints(e.attrs))

    for p in func.params:
        visit(p)
    relax.analysis.post_order_visit(func.body, visit)
    return {n for n in found if n > 1}


def _is_compound(size) -> bool:
    """A size that is an expression of symbols (s10 + s27, n * 512), not a number or a bare symbol."""
    return not isinstance(size, (tirx.IntImm, tirx.Var)) and bool(tirx.analysis.undefined_vars(size))


def _at(sizes, values: dict) -> list[int]:
    """The sizes' values with the symbols at `values` (those that come to a number)."""
    analyzer = Analyzer()
    for var, k in values.items():
        analyzer.bind(var, int(k))
    found = (analyzer.simplify(e) for e in sizes)
    return [int(v.value) for v in found if isinstance(v, tirx.IntImm)]


def compound_sizes(func, values: dict, written: set | None = None, compounds: list | None = None) -> dict:
    """The sizes `func` writes as expressions of its symbols that the stand-ins' factors do not spell (s10 + s27
    at 5 and 7 is 12, not a multiple of either; (n - 1) * 2), by their value at the stand-ins `values`; None
    for a value two that differ share, or one `func` also writes as a number (it could be either). `written`
    and `compounds`: its numbers and compound sizes, where the caller has them (stand_ins, per try)."""
    written = _numbers_written(func) if written is None else written
    compounds = [e for e in _sizes_in(func) if _is_compound(e)] if compounds is None else compounds
    by_prime, analyzer, found = {int(k): v for v, k in values.items()}, Analyzer(), {}
    for e, n in zip(compounds, _at(compounds, values)):
        if n <= 1 or analyzer.can_prove_equal(_spelled(n, by_prime), e):
            continue  # (n * 512 at n = 7 is 3584, which 7's factor spells)
        if n in written or (n in found and (found[n] is None or not analyzer.can_prove_equal(found[n], e))):
            found[n] = None
        else:
            found.setdefault(n, e)
    return found


def _spelled(n: int, by_prime: dict):
    """`n` as the product of its stand-in factors' symbols and what is left (a number where it has none)."""
    factors = []
    for p, var in by_prime.items():
        while n % p == 0:
            n //= p
            factors.append(var)
    if not factors:
        return tirx.IntImm("int64", n)
    expr = reduce(lambda a, b: a * b, factors[1:], factors[0])
    return expr if n == 1 else expr * n


_INT = re.compile(r"(?<![\w.+-])\d+(?![\w.])")  # 2 in axis=2 or [2, 4], not the digits of 1e-05, 0.1 or float32


_AXES = re.compile(r"\bax(?:is|es)=(?:\([^)]*\)|\[[^\]]*\]|-?\d+)")  # axis=5, axes=(0, 1, 4, 2, 5, 3)


def attribute_ints(attrs) -> list[int]:
    """The integers a call's attributes hold, from their printed form (TVM's Attrs list no fields here)."""
    return [int(n) for n in _INT.findall(str(attrs))]


def _is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))


def bind(func, values: dict):
    """`func` with its symbols bound to the values (tir.Var -> int)."""
    return func.bind_symbolic_vars({v: int(k) for v, k in values.items()})


def explicit_sizes(func) -> list:
    """Every size `func` writes itself, in order: shapes given as values (a reshape's, a full's), sizes given
    as arguments (a slice's bounds) and the output types of calls that name theirs (call_tir)."""
    found: list = []

    def visit(e):  # calls only: the types Relax infers for values are its own, not sizes the function writes
        if isinstance(e, relax.Call):
            for a in e.args:
                if isinstance(a, relax.ShapeExpr):
                    found.extend(a.values)
                elif isinstance(a, _SIZES):
                    found.append(a)
                elif isinstance(a, relax.Tuple):
                    found.extend(f for f in a.fields if isinstance(f, _SIZES))
            for t in e.ty_args:
                if isinstance(t, relax.TensorType) and isinstance(t.shape, relax.ShapeExpr):
                    found.extend(t.shape.values)

    relax.analysis.post_order_visit(func.body, visit)
    return found


def bound_at(func, values: dict, steps: dict[str, int] | None = None):
    """(`func` bound at the stand-ins `values`, None), or (None, why it cannot be optimized there): a size it
    writes that binding folds to a number the stand-ins do not account for (a reshape's (n - 1) * 2 is 12;
    anywhere, also in a branch the checks after the search may not run), or one that does not type-check
    there. Binding, then generalizing, must give every size back. `steps`: the divisors the stand-ins are
    multiples of (stand_ins)."""
    try:
        bound = bind(func, values)
        back = generalize(bound, func, values, steps)
    except NotGeneral as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - Relax refuses the function bound at the stand-ins
        return None, f"bound at the stand-ins it does not type-check ({str(exc).splitlines()[0][:160]})"
    given, read = explicit_sizes(func), explicit_sizes(back)
    if len(given) != len(read):
        return None, "bound at the stand-ins it writes another number of sizes"
    for a, b in zip(given, read):
        if not stepped_analyzer(steps, a - b).can_prove_equal(a, b):
            return None, f"bound at the stand-ins its size {_shown(a)} is written {_shown(b)}"
    return bound, None


def _shown(size) -> str:
    return re.sub(r"T\.int64\((\d+)\)", r"\1", str(size))


class NotGeneral(Exception):
    """The optimized function writes a stand-in where it cannot be read back as its symbol."""


def generalize(optimized, original, values: dict, steps: dict[str, int] | None = None):
    """`optimized` (a function of `original` bound at `values`) with `original`'s parameters and its sizes
    written in the symbols again; `steps`: the divisors the stand-ins are multiples of (stand_ins)."""
    if len(optimized.params) != len(original.params):
        raise NotGeneral("the optimized function has other parameters")
    for shape in _constant_shapes(optimized):
        if any(d > 1 and d % int(p) == 0 for d in shape for p in values.values()):
            raise NotGeneral(f"a constant of shape {shape} holds a stand-in size (a weight broadcast over a "
                             "symbolic size, computed ahead)")
    rewriter = _Generalizer(values, compound_sizes(original, values), steps or {})
    for bound, param in zip(optimized.params, original.params):
        rewriter.set_var_remap(bound, param)
    try:
        body = rewriter.visit_expr(optimized.body)
        return relax.Function(original.params, body, None, optimized.is_pure, optimized.attrs, optimized.span)
    except NotGeneral:
        raise
    except Exception as exc:  # noqa: BLE001 - Relax's shape inference refuses a size read back as a symbol
        if rewriter.refused is not None:  # (raised in a visit, which TVM's mutator wraps in its own error)
            raise rewriter.refused from None
        raise NotGeneral(f"does not type-check ({str(exc).splitlines()[0][:160]})") from None


def _constant_shapes(func) -> set[tuple[int, ...]]:
    """The shapes of `func`'s tensor constants (its weights, and what was computed from them ahead)."""
    found: set = set()

    def visit(e):
        ty = getattr(e, "ty", None) if isinstance(e, Constant) else None
        if isinstance(ty, relax.TensorType) and isinstance(ty.shape, relax.ShapeExpr):
            found.add(tuple(int(d.value) for d in ty.shape.values if isinstance(d, tirx.IntImm)))

    relax.analysis.post_order_visit(func.body, visit)
    return found


@mutator
class _Generalizer(PyExprMutator):
    """Writes the sizes a function gives itself in the symbols; every binding is emitted again, so Relax infers
    the symbolic types of the values in between."""

    def __init__(self, values: dict, compounds: dict, steps: dict[str, int]):
        super().__init__()
        self.by_prime = {int(k): v for v, k in values.items()}
        self.steps = steps  # divisors: the symbols' values are multiples of these
        self.compounds = compounds  # compound_sizes: value at the stand-ins -> the original's expression
        self.refused: NotGeneral | None = None  # why a visit refused (TVM's mutator re-raises it as its own)

    def size(self, value):
        """An int size as the original's compound size of that value (s10 + s27), or as the product of its
        stand-in factors' symbols and what is left."""
        if not isinstance(value, tirx.IntImm) or value.value <= 1:
            return value
        n = int(value.value)
        if self.compounds.get(n) is not None:
            return self.compounds[n]
        spelled = _spelled(n, self.by_prime)
        return value if isinstance(spelled, tirx.IntImm) else spelled

    def type_of(self, ty):
        if isinstance(ty, relax.TensorType) and isinstance(ty.shape, relax.ShapeExpr):
            return relax.TensorType([self.prim(d) for d in ty.shape.values], ty.dtype, ty.vdevice)
        if isinstance(ty, relax.TupleType):
            return relax.TupleType([self.type_of(f) for f in ty.fields])
        return ty

    def visit_shape_expr_(self, op):
        return relax.ShapeExpr([self.prim(d) for d in op.values])

    def visit_call_(self, op):
        try:
            if op.attrs is not None and self._holds_stand_in(op.attrs):
                raise NotGeneral(f"an attribute of {op.op} holds a stand-in size: {op.attrs}")
            args = [self.arg(a) for a in op.args]
            if op.op.same_as(_RESHAPE):
                _same_size(args[0], args[1], self.steps)
        except NotGeneral as exc:
            self.refused = exc
            raise
        return relax.Call(op.op, args, op.attrs, [self.type_of(t) for t in op.ty_args], op.span)

    def prim(self, e):
        """A size expression with its stand-in numbers read as symbols (7 - 1, a slice's end at N - 1)."""
        if isinstance(e, tirx.IntImm):
            return self.size(e)
        if isinstance(e, BinaryOpExpr):  # Add, Sub, Mul, FloorDiv, Min, Max, ...
            return type(e)(self.prim(e.a), self.prim(e.b))
        return e

    def arg(self, a):
        if isinstance(a, _SIZES):
            return self.prim(a)
        if isinstance(a, relax.Tuple) and any(isinstance(f, _SIZES) for f in a.fields):
            return relax.Tuple([self.arg(f) for f in a.fields])
        return self.visit_expr(a)

    def _holds_stand_in(self, attrs) -> bool:
        """Whether a number in the attributes may be a stand-in size; their axes are not sizes (a rank-6
        transpose's axis 5, a pixel shuffle's, is no stand-in 5)."""
        sizes = _AXES.sub("", str(attrs))
        return any(any(n % p == 0 for p in self.by_prime) or self.compounds.get(n) is not None
                   for n in map(int, _INT.findall(sizes)) if n > 1)


_RESHAPE = tvm.ir.Op.get("relax.reshape")


def stepped_analyzer(steps: dict[str, int] | None, expr) -> Analyzer:
    """An analyzer that knows each symbol of `expr` in `steps` (divisors) is a multiple of its divisor: H is
    2 * H' where the function halves H, so (H // 2) * 2 is H."""
    analyzer = Analyzer()
    for v in tirx.analysis.undefined_vars(expr):
        if (steps or {}).get(v.name, 1) > 1:
            analyzer.bind(v, tirx.Var(v.name, "int64") * tirx.IntImm("int64", steps[v.name]))
    return analyzer


def _same_size(data, shape, steps: dict[str, int] | None = None) -> None:
    """NotGeneral unless a reshape's new shape, read back, provably holds as many elements as its data: a size 1
    at the stand-ins (a length halved four times) says nothing of the symbol, and Relax does not check it. A
    symbol in `steps` is a multiple of its divisor (H = (H // 2) * 2 where the function halves H)."""
    ty, values = data.ty, getattr(shape, "values", None)
    if not isinstance(ty, relax.TensorType) or not isinstance(ty.shape, relax.ShapeExpr) or values is None:
        return
    product = lambda sizes: reduce(lambda a, b: a * b, sizes, tirx.IntImm("int64", 1))  # noqa: E731
    before, after = product(ty.shape.values), product(values)
    # sizes are at least 1 and far below int64's end: a slice's min/max of n is n - 1, its end at INT64_MAX is n
    bounds = [c for v in tirx.analysis.undefined_vars(before * after)
              for c in (v >= 1, v < tirx.IntImm("int64", 2 ** 40))]
    analyzer = stepped_analyzer(steps, before * after)
    with analyzer.constraint_scope(tirx.all(*bounds) if bounds else tirx.const(True)):
        same = analyzer.can_prove_equal(before, after)
    if not same:  # products of sums TVM's simplifier does not multiply out: (2 * W - 1) * 2 against 4 * W - 2
        expanded = [_polynomial(e) for e in (before, after)]
        same = None not in expanded and expanded[0] == expanded[1]
    if not same:
        raise NotGeneral(f"a reshape of {_shown(ty.shape)} to {_shown(shape)}: its sizes, read back in the symbols, "
                         "need not hold as many elements")


def _polynomial(e) -> dict | None:
    """A size expression of sums, differences and products of symbols and integers multiplied out: {monomial (the
    symbols' names, sorted, repeated by power): coefficient}, zero terms dropped; None for anything else
    (floor division, min, max), which the analyzer alone must prove."""
    if isinstance(e, tirx.IntImm):
        return {(): int(e.value)} if e.value else {}
    if isinstance(e, tirx.Var):
        return {(e.name,): 1}
    if not isinstance(e, (tirx.Add, tirx.Sub, tirx.Mul)):
        return None
    a, b = _polynomial(e.a), _polynomial(e.b)
    if a is None or b is None:
        return None
    out: dict = {}
    if isinstance(e, tirx.Mul):
        for (ma, ca), (mb, cb) in ((x, y) for x in a.items() for y in b.items()):
            key = tuple(sorted(ma + mb))
            out[key] = out.get(key, 0) + ca * cb
    else:
        sign = 1 if isinstance(e, tirx.Add) else -1
        out = dict(a)
        for m, c in b.items():
            out[m] = out.get(m, 0) + sign * c
    return {m: c for m, c in out.items() if c}


def check_sizes(values: dict, steps: dict[str, int] | None = None) -> list[dict]:
    """The other sizes the generalized function is run at: every symbol 1, then 2, 3, ... (one each, so two
    symbols swapped show). Any size but the stand-in shows a number written where a symbol belongs; small
    ones keep the runs cheap (a batch of 2p + 1 images costs that many). Then, for a function that runs at
    neither (an image through unpadded convs needs some height), sizes just above the stand-ins. With `steps`
    (stand-ins at multiples of a divisor, `divisors`) the same again in steps of it (2, 4, 6, ... for an H a pixel
    unshuffle halves), after the plain ones: those the original runs at are checked first."""
    sizes = []
    for m in ({v: 1 for v in values},) + (({v: steps.get(v.name, 1) for v in values},) if steps else ()):
        sizes += [{v: m[v] for v in values}, {v: m[v] * (2 + i) for i, v in enumerate(values)},
                  {v: int(p) // m[v] * m[v] + m[v] * (1 + i) for i, (v, p) in enumerate(values.items())}]
    return sizes


def checked_elsewhere(general, original, mod, name: str, values: dict, target, close, seed: int,
                      steps: dict[str, int] | None = None) -> list[str]:
    """The sizes (`check_sizes`, in `steps`) at which `general` compiled and ran computes what `original` does, on
    the same random inputs; raises NotGeneral where it differs or does not run. Sizes the original cannot run at
    are passed over, but one must be checked."""
    if target is not None and not execute.runs_here(target):
        target = None  # a cross-compiling target: run on this host's CPU (the sizes, not the kernels, are checked)
    rng, checked, skipped = np.random.default_rng(seed), [], []
    sizes_tried = check_sizes(values, steps)
    for sizes in progress(sizes_tried, total=len(sizes_tried), desc="symbolic sizes: runs at other sizes",
                          unit="size"):
        if len(checked) == 2:
            break
        shown = shown_sizes(sizes)
        try:
            want_f = bind(original, sizes)
        except Exception:  # noqa: BLE001 - the original's own sizes do not type-check there: not a check
            skipped.append(shown)
            continue
        try:
            got_f = bind(general, sizes)
        except Exception as exc:  # noqa: BLE001 - a size written as a number where the original derives it
            raise NotGeneral(f"at {shown} its sizes do not type-check ({str(exc).splitlines()[0][:160]})") from None
        with execute.stderr_silenced():
            try:
                inputs = execute.random_inputs(want_f.params, rng, want_f)
                want = execute.run_module(execute.module_with(mod, name, want_f), inputs, target, func=name)
            except Exception:  # noqa: BLE001 - the original needs other sizes (a size above 1): not a check
                skipped.append(shown)
                continue
            try:
                got = execute.run_module(execute.module_with(mod, name, got_f), inputs, target, func=name)
            except Exception as exc:  # noqa: BLE001
                raise NotGeneral(f"at {shown} it does not build or run ({type(exc).__name__}: "
                                 f"{str(exc).splitlines()[0][:160]})") from None
        if len(want) != len(got) or not all(a.shape == b.shape and close(a, b) for a, b in zip(want, got)):
            raise NotGeneral(f"at {shown} it computes other values than the original")
        checked.append(shown)
    if not checked:
        raise NotGeneral(f"the original runs at none of the other sizes tried ({'; '.join(skipped)})")
    return checked


def shown_sizes(values: dict) -> str:
    return ", ".join(f"{v.name}={int(k)}" for v, k in values.items())
