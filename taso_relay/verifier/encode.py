"""Rule patterns and rule expressions as Z3 terms.

A pattern input becomes a constant of sort T, an attribute variable ``?v`` an
Int constant (or a tuple of them, shaped like its value in the rule's example),
and an ``=expr`` attribute or a constraint the Z3 term of that expression over
the symbolic shapes (``dim(t, i)`` is ``sdim(shp(t), i)``). The same encoder
serves rules (ground constants: the proof is for all values of them) and
axioms (the constants become the bound variables of a ForAll).

Graph operators map onto the functions of vocab.py: ``split`` becomes one
``slice`` per output, an n-ary ``concat`` a left fold of binary ones, a
unit-stride ``strided_slice`` one ``slice`` per axis; operators the verifier
has no theory for become uninterpreted functions keyed by their (literal)
attributes, so they are still handled by congruence.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Mapping

import z3

from ..graph import get_op
from ..graph.ops.linear import DATA_TO_NCHW, KERNEL_TO_OIHW
from ..graph.ops.registry import REQUIRED
from ..subst import expr as X
from ..subst.rule import Rule, split_ref
from . import typing as TY
from . import vocab as V


class Unsupported(Exception):
    """The rule uses something the encoder cannot express (the verdict is UNKNOWN)."""


@dataclass(frozen=True)
class ShapeVal:
    """The value of ``shape(t)`` in an expression."""

    term: Any


def is_z3(v) -> bool:
    return isinstance(v, z3.ExprRef)


def as_int(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        return V.string_code(v)
    if is_z3(v):
        return z3.If(v, 1, 0) if z3.is_bool(v) else v
    raise Unsupported(f"expected an integer, got {v!r}")


def as_bool(v):
    if isinstance(v, bool):
        return z3.BoolVal(v)
    if is_z3(v) and z3.is_bool(v):
        return v
    if isinstance(v, int) or is_z3(v):
        return as_int(v) != 0
    raise Unsupported(f"expected a condition, got {v!r}")


def _py(v) -> bool:
    return not is_z3(v) and not isinstance(v, ShapeVal)


def _deep_py(v) -> bool:
    if isinstance(v, tuple):
        return all(_deep_py(e) for e in v)
    return _py(v)


def sym_eq(a, b):
    """Equality of expression values (tensor shapes, tuples, strings, integers)."""
    if isinstance(a, ShapeVal) and isinstance(b, ShapeVal):
        return V.shp(a.term) == V.shp(b.term)
    if isinstance(b, ShapeVal):
        a, b = b, a
    if isinstance(a, ShapeVal):
        if not isinstance(b, tuple):
            raise Unsupported("shape compared with a non-tuple")
        return z3.And(V.rank(a.term) == len(b), *[V.dim(a.term, i) == as_int(x) for i, x in enumerate(b)])
    if isinstance(a, tuple) or isinstance(b, tuple):
        if not (isinstance(a, tuple) and isinstance(b, tuple)):
            return False
        if len(a) != len(b):
            return False
        parts = [sym_eq(x, y) for x, y in zip(a, b)]
        if all(isinstance(p, bool) for p in parts):
            return all(parts)
        return z3.And(*[as_bool(p) for p in parts])
    if _py(a) and _py(b) and not (isinstance(a, str) ^ isinstance(b, str)):
        return a == b
    return as_int(a) == as_int(b)


def sym_index(seq, idx):
    if isinstance(seq, ShapeVal):
        return dim_of(seq.term, idx)
    if not isinstance(seq, tuple):
        raise Unsupported(f"cannot index {seq!r}")
    if _py(idx):
        return seq[idx]
    out = as_int(seq[-1])
    for k in range(len(seq) - 2, -1, -1):
        out = z3.If(idx == k, as_int(seq[k]), out)
    return out


def dim_of(t, i):
    if isinstance(i, int) and i < 0:
        return V.dim(t, V.rank(t) + i)
    return V.dim(t, as_int(i))


def _arith(op, a, b):
    if isinstance(a, tuple) or isinstance(b, tuple):
        if isinstance(op, ast.Add) and isinstance(a, tuple) and isinstance(b, tuple):
            return a + b
        if isinstance(op, ast.Mult) and _py(b) and isinstance(a, tuple):
            return a * b
        raise Unsupported("unsupported tuple arithmetic")
    if _py(a) and _py(b):
        return X._BINOPS[type(op)](a, b)
    a, b = as_int(a), as_int(b)
    if isinstance(op, ast.Add):
        return a + b
    if isinstance(op, ast.Sub):
        return a - b
    if isinstance(op, ast.Mult):
        return a * b
    if isinstance(op, ast.FloorDiv):
        return a / b  # Z3 integer division: floor for positive divisors
    if isinstance(op, ast.Mod):
        return a % b
    raise Unsupported(f"operator {type(op).__name__}")


def _compare(op, a, b):
    if isinstance(op, ast.Eq):
        return sym_eq(a, b)
    if isinstance(op, ast.NotEq):
        e = sym_eq(a, b)
        return (not e) if isinstance(e, bool) else z3.Not(e)
    if _py(a) and _py(b) and not isinstance(a, tuple):
        return X._CMPOPS[type(op)](a, b)
    a, b = as_int(a), as_int(b)
    return {ast.Lt: a < b, ast.LtE: a <= b, ast.Gt: a > b, ast.GtE: a >= b}[type(op)]


class ExprTranslator:
    """Evaluates the rule expression language into Z3 terms (or Python values where constant)."""

    def __init__(self, tensors: Mapping[str, Any], variables: Mapping[str, Any]):
        self.tensors = tensors
        self.variables = variables

    def tensor(self, name):
        if not isinstance(name, str) or name not in self.tensors:
            raise Unsupported(f"unknown tensor {name!r} in expression")
        return self.tensors[name]

    def __call__(self, text: str):
        try:
            return self.node(X.parse(text).body)
        except X.ExprError as exc:
            raise Unsupported(str(exc)) from None

    def node(self, n):
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            if n.id.startswith(X._VAR_MANGLE):
                name = n.id[len(X._VAR_MANGLE):]
                if name not in self.variables:
                    raise Unsupported(f"unbound variable ?{name}")
                return self.variables[name]
            return n.id
        if isinstance(n, (ast.Tuple, ast.List)):
            return tuple(self.node(e) for e in n.elts)
        if isinstance(n, ast.BinOp) and type(n.op) in X._BINOPS:
            return _arith(n.op, self.node(n.left), self.node(n.right))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            v = self.node(n.operand)
            return -v if _py(v) else -as_int(v)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            v = self.node(n.operand)
            return (not v) if _py(v) else z3.Not(as_bool(v))
        if isinstance(n, ast.BoolOp):
            vals = [self.node(v) for v in n.values]
            if all(_py(v) for v in vals):
                return all(vals) if isinstance(n.op, ast.And) else any(vals)
            vals = [as_bool(v) for v in vals]
            return z3.And(*vals) if isinstance(n.op, ast.And) else z3.Or(*vals)
        if isinstance(n, ast.Compare):
            left = self.node(n.left)
            parts = []
            for op, comp in zip(n.ops, n.comparators):
                right = self.node(comp)
                parts.append(_compare(op, left, right))
                left = right
            if all(isinstance(p, bool) for p in parts):
                return all(parts)
            return z3.And(*[as_bool(p) for p in parts])
        if isinstance(n, ast.Subscript):
            return sym_index(self.node(n.value), self.node(n.slice))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            return self.call(n.func.id, [self.node(a) for a in n.args])
        raise Unsupported(f"unsupported syntax in expression: {ast.dump(n)[:60]}")

    def call(self, fn, args):
        if fn == "dim":
            return dim_of(self.tensor(args[0]), args[1])
        if fn == "rank":
            return V.rank(self.tensor(args[0]))
        if fn == "shape":
            return ShapeVal(self.tensor(args[0]))
        if fn == "numel":
            return V.numel_s(V.shp(self.tensor(args[0])))
        if fn == "len":
            (v,) = args
            if isinstance(v, ShapeVal):
                return V.rank(v.term)
            return len(v)
        if fn == "tuple":
            return tuple(args[0])
        if fn == "sum":
            (xs,) = args
            if _deep_py(xs):
                return sum(xs)
            return z3.Sum(*[as_int(x) for x in xs]) if xs else 0
        if fn in ("min", "max"):
            xs = args[0] if len(args) == 1 else args
            if _deep_py(xs):
                return min(xs) if fn == "min" else max(xs)
            out = as_int(xs[0])
            for x in xs[1:]:
                x = as_int(x)
                out = z3.If(x < out, x, out) if fn == "min" else z3.If(x > out, x, out)
            return out
        raise Unsupported(f"unknown function {fn}()")


# ---- variables ---------------------------------------------------------
def _var_sample(rule: Rule, name: str, example_vars: Mapping[str, Any]):
    if name in example_vars:
        return example_vars[name]
    for node in rule.source + rule.target:
        for key, value in node.attrs.items():
            if value == "?" + name:
                default = get_op(node.op).attrs.get(key)
                if isinstance(default, (tuple, list, str, bool, int)):
                    if isinstance(default, tuple) and not default:
                        raise Unsupported(f"variable ?{name}: length unknown (no example value)")
                    return default
    return 0


def make_var(name: str, sample, prefix: str = ""):
    """A symbolic value shaped like `sample`: Int, or a tuple of them."""
    if isinstance(sample, (tuple, list)):
        return tuple(make_var(f"{name}_{k}", s, prefix) for k, s in enumerate(sample))
    return z3.Int(prefix + name)


def var_domain(value, sample) -> list:
    if isinstance(value, tuple):
        return [f for v, s in zip(value, sample) for f in var_domain(v, s)]
    if isinstance(sample, bool):
        return [value >= 0, value <= 1]
    return []


# ---- operators -----------------------------------------------------------
IDENTITY4 = (0, 1, 2, 3)


@dataclass
class Built:
    outputs: list
    facts: list = field(default_factory=list)  # typing facts (implied by wt of the outputs)
    extra: list = field(default_factory=list)  # facts the encoding adds (split sizes partition)
    funcs: set = field(default_factory=set)


def _apply(built: Built, name, ints, args):
    ints = [z3.IntVal(v) if isinstance(v, int) else v for v in map(as_int, ints)]
    term = V.app(name, ints, args)
    built.facts.extend(TY.facts(name, ints, args, term))
    built.funcs.add(name)
    return term


def _tuple(value, n, what):
    if not isinstance(value, tuple) or len(value) != n:
        raise Unsupported(f"{what}: expected {n} values, got {value!r}")
    return value


def _axis(ax, t):
    if isinstance(ax, int) and ax < 0:
        return V.rank(t) + ax
    return as_int(ax)


def encode_op(op: str, attrs: Mapping[str, Any], args: list) -> Built:
    """Z3 terms for one pattern node; attrs are already resolved expression values."""
    b = Built([])
    defaults = dict(get_op(op).attrs)
    a = {**{k: v for k, v in defaults.items() if v is not REQUIRED}, **attrs}
    if op in V.UNARY or op in V.BINARY:
        b.outputs = [_apply(b, op, [], args)]
    elif op == "conv2d" and a["data_layout"] in DATA_TO_NCHW and a["kernel_layout"] in KERNEL_TO_OIHW:
        b.outputs = [_conv2d(b, a, args)]
    elif op == "conv2d_transpose" and (a["data_layout"], a["kernel_layout"]) == ("NCHW", "IOHW"):
        ints = [*_tuple(a["strides"], 2, "strides"), *_tuple(a["padding"], 4, "padding"),
                *_tuple(a["output_padding"], 2, "output_padding"), *_tuple(a["dilation"], 2, "dilation"), a["groups"]]
        b.outputs = [_apply(b, "conv2d_transpose", ints, args)]
    elif op == "matmul":
        b.outputs = [_apply(b, "matmul", [a["activation"]], args)]
    elif op == "concat":
        if not args:
            raise Unsupported("concat of nothing")
        acc = args[0]
        ax = _axis(a["axis"], acc)
        for nxt in args[1:]:
            acc = _apply(b, "concat", [ax], [acc, nxt])
        if len(args) == 1:
            b.extra.append(z3.And(ax >= 0, ax < V.rank(acc)))
        b.outputs = [acc]
    elif op == "split":
        (x,) = args
        ax = _axis(a["axis"], x)
        sizes = a["sizes"]
        if not isinstance(sizes, tuple) or not sizes:
            raise Unsupported(f"split sizes {sizes!r}")
        lo = 0
        for s in sizes:
            hi = lo + as_int(s) if not (_py(s) and isinstance(lo, int)) else lo + s
            b.outputs.append(_apply(b, "slice", [ax, lo, hi], [x]))
            b.extra.append(as_int(s) >= 1)
            lo = hi
        b.extra.append(as_int(lo) == V.dim(x, ax))
    elif op == "strided_slice" and isinstance(a["axes"], tuple) and a["axes"] \
            and isinstance(a["strides"], tuple) and all(_py(s) and s == 1 for s in a["strides"]):
        out = args[0]  # unit strides: one single-axis slice per axis, in order
        for k, ax in enumerate(a["axes"]):
            out = _apply(b, "slice", [_axis(ax, out), a["begin"][k], a["end"][k]], [out])
        b.outputs = [out]
    elif op == "transpose":
        perm = a["perm"]
        if not isinstance(perm, tuple) or len(perm) not in V.TRANSPOSE_RANKS:
            raise Unsupported(f"transpose perm {perm!r}")
        b.outputs = [_apply(b, f"transpose{len(perm)}", list(perm), args)]
    elif op == "reshape" and isinstance(a["shape"], tuple) and len(a["shape"]) in V.RESHAPE_RANKS:
        b.outputs = [_apply(b, f"reshape{len(a['shape'])}", list(a["shape"]), args)]
    elif op == "pad" and isinstance(a["pad_width"], tuple) and len(a["pad_width"]) // 2 in V.PAD_RANKS \
            and len(a["pad_width"]) % 2 == 0:
        b.outputs = [_apply(b, f"pad{len(a['pad_width']) // 2}", [*a["pad_width"], _literal_code("value", a["value"])],
                            args)]
    elif op == "mirror_pad" and isinstance(a["pad_width"], tuple) and len(a["pad_width"]) // 2 in V.PAD_RANKS \
            and len(a["pad_width"]) % 2 == 0:
        b.outputs = [_apply(b, f"mirror_pad{len(a['pad_width']) // 2}", [*a["pad_width"], as_int(a["mode"])], args)]
    elif op == "group_norm":
        ints = [a["groups"], _literal_code("epsilon", a["epsilon"]), _axis(a["axis"], args[0])]
        b.outputs = [_apply(b, "group_norm", ints, args)]
    elif op == "leaky_relu":
        b.outputs = [_apply(b, "leaky_relu", [_literal_code("alpha", a["alpha"])], args)]
    elif op == "enlarge":
        b.outputs = [_apply(b, "enlarge", list(_tuple(a["kernel"], 2, "kernel")), args)]
    elif op == "subpixel_kernel":
        ints = [*_tuple(a["strides"], 2, "strides"), *_tuple(a["padding"], 2, "padding")]
        b.outputs = [_apply(b, "subpixel_kernel", ints, args)]
    elif op in ("max_pool2d", "avg_pool2d") and a["layout"] in DATA_TO_NCHW:
        ints = [*_tuple(a["kernel"], 2, "kernel"), *_tuple(a["strides"], 2, "strides"),
                *_tuple(a["padding"], 4, "padding"), *_tuple(a["dilation"], 2, "dilation"), a["ceil_mode"]]
        if op == "avg_pool2d":
            ints.append(a["count_include_pad"])
        b.outputs = [_in_nchw(b, a["layout"], lambda x: _apply(b, op, ints, [x]), args[0])]
    elif op == "channel_shuffle" and a["layout"] in DATA_TO_NCHW:
        b.outputs = [_in_nchw(b, a["layout"], lambda x: _apply(b, op, [a["groups"]], [x]), args[0])]
    elif op in ("depth_to_space", "space_to_depth") and a["layout"] in DATA_TO_NCHW:
        ints = [*_tuple(a["block"], 2, "block"), as_int(a["mode"])]
        b.outputs = [_in_nchw(b, a["layout"], lambda x: _apply(b, op, ints, [x]), args[0])]
    elif op == "resize2d" and a["layout"] in DATA_TO_NCHW:
        ints = [*_tuple(a["size"], 2, "size"), *(as_int(a[k]) for k in ("method", "coordinates", "rounding"))]
        b.outputs = [_in_nchw(b, a["layout"], lambda x: _apply(b, op, ints, [x]), args[0])]
    elif op == "constant":
        kind, shape = a["kind"], a["shape"]
        if isinstance(shape, ShapeVal) and kind in ("identity_conv", "avg_kernel"):
            b.extra.append(V.rank(shape.term) == 4)
            shape = tuple(V.dim(shape.term, i) for i in range(4))
        if not isinstance(shape, tuple) or not isinstance(kind, str):
            raise Unsupported(f"constant {kind!r} of shape {shape!r}")
        if kind in ("identity_conv", "avg_kernel"):
            b.outputs = [_apply(b, kind, list(_tuple(shape, 4, kind)), [])]
        elif kind == "identity_matrix":
            _tuple(shape, 2, kind)
            b.extra.append(as_int(shape[0]) == as_int(shape[1]))
            b.outputs = [_apply(b, kind, [shape[0]], [])]
        elif kind == "ones" and len(shape) in V.ONES_RANKS:
            b.outputs = [_apply(b, f"ones{len(shape)}", list(shape), [])]
        else:
            raise Unsupported(f"constant kind {kind!r}")
    elif op == "batch_norm":
        b.outputs = [_batch_norm(b, a, args)]
    else:
        b.outputs = _opaque(b, op, attrs, args)
    return b


def _in_nchw(b: Built, layout: str, compute, x):
    """compute (an NCHW operator of the theory) applied to x of `layout`: between transposes,
    which is how the graph form's reference computes other layouts (graph/ops/linear.py, pool.py)."""
    data = DATA_TO_NCHW[layout]
    if data == IDENTITY4:
        return compute(x)
    out = compute(_apply(b, "transpose4", list(data), [x]))
    return _apply(b, "transpose4", [data.index(i) for i in range(4)], [out])


def _conv2d(b: Built, a, args):
    """The theory's conv2d is NCHW data with OIHW kernels; other layouts go through transposes."""
    x, w = args
    kernel = KERNEL_TO_OIHW[a["kernel_layout"]]
    if kernel != IDENTITY4:
        w = _apply(b, "transpose4", list(kernel), [w])
    ints = [*_tuple(a["strides"], 2, "strides"), *_tuple(a["padding"], 4, "padding"),
            *_tuple(a["dilation"], 2, "dilation"), a["groups"], a["activation"]]
    return _in_nchw(b, a["data_layout"], lambda xd: _apply(b, "conv2d", ints, [xd, w]), x)


def _batch_norm(b: Built, a, args):
    """Inference batch norm with its shape rule as ground facts (typing.py has none for it).

    The epsilon is an opaque parameter: a rule variable stays an Int, a literal
    float is interned like a string, so equal epsilons give equal terms."""
    x = args[0]
    ax = _axis(a["axis"], x)
    out = _apply(b, "batch_norm", [ax, _literal_code("epsilon", a["epsilon"])], args)
    b.facts += [ax >= 0, ax < V.rank(x), V.shp(out) == V.shp(x)]
    b.facts += [z3.And(V.rank(p) == 1, V.dim(p, 0) == V.dim(x, ax)) for p in args[1:]]
    return out


def _literal_code(what: str, value):
    """A float parameter the theory treats as opaque (an epsilon, a pad value): a rule variable stays an
    Int, a literal is interned like a string, so equal literals give equal terms."""
    return V.string_code(f"{what}:{float(value)!r}") if isinstance(value, (int, float)) else as_int(value)


def _opaque(b: Built, op, attrs, args):
    """An operator without a theory: an uninterpreted function per literal attribute set."""
    if not all(_deep_py(v) for v in attrs.values()):
        raise Unsupported(f"{op} with symbolic attributes has no Z3 theory")
    n_out = 1
    if op in ("split", "opaque"):
        raise Unsupported(f"{op} here has no Z3 theory")
    key = f"opaque:{op}:{sorted(attrs.items())!r}/{len(args)}"
    term = V.func(key)(*args)
    b.facts.extend(TY.facts(key, [], args, term))
    b.funcs.add(key)
    return [term] * n_out


# ---- sides and rules -------------------------------------------------------
@dataclass
class SideEncoding:
    refs: dict
    outputs: list
    facts: list
    extra: list
    terms: list
    funcs: set


class RuleEncoder:
    def __init__(self, rule: Rule, prefix: str = "", example_vars: Mapping[str, Any] | None = None):
        self.rule = rule
        self.prefix = prefix
        ex = dict(rule.example.get("vars", {})) if example_vars is None else dict(example_vars)
        self.inputs = {pin.name: z3.Const(prefix + pin.name, V.T) for pin in rule.inputs}
        self.samples = {name: _var_sample(rule, name, ex) for name in sorted(rule.variables)}
        self.vars = {name: make_var(name, s, prefix) for name, s in self.samples.items()}
        self.domain = [f for name in self.vars for f in var_domain(self.vars[name], self.samples[name])]

    def resolve(self, value, tr: ExprTranslator):
        if X.is_var(value):
            return self.vars[value[1:]]
        if X.is_expr(value):
            return tr(value[1:])
        if isinstance(value, (list, tuple)):
            return tuple(self.resolve(v, tr) for v in value)
        return value

    def side(self, which: str) -> SideEncoding:
        refs = dict(self.inputs)
        tensors = dict(self.inputs)
        enc = SideEncoding(refs, [], [], [], [], set())
        tr = ExprTranslator(tensors, self.vars)
        for node in self.rule.side(which):
            attrs = {k: self.resolve(v, tr) for k, v in node.attrs.items()}
            args = [self.lookup(refs, r) for r in node.inputs]
            built = encode_op(node.op, attrs, args)
            enc.facts += built.facts
            enc.extra += built.extra
            enc.funcs |= built.funcs
            enc.terms += built.outputs
            refs[node.id] = built.outputs[0]
            tensors[node.id] = built.outputs[0]
            for k, t in enumerate(built.outputs):
                refs[f"{node.id}:{k}"] = t
        enc.outputs = [self.lookup(refs, r) for r in self.rule.side_outputs(which)]
        return enc

    @staticmethod
    def lookup(refs, ref):
        if ref in refs:
            return refs[ref]
        name, index = split_ref(ref)
        key = f"{name}:{index}"
        if key not in refs:
            raise Unsupported(f"unknown reference {ref}")
        return refs[key]

    def constraints(self, source: SideEncoding | None = None) -> list:
        tensors = dict(self.inputs)
        if source is not None:
            tensors.update({k: v for k, v in source.refs.items() if ":" not in k})
        tr = ExprTranslator(tensors, self.vars)
        out = []
        for c in self.rule.constraints:
            v = tr(c)
            out.append(as_bool(v))
        return out
