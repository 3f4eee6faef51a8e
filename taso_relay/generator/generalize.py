"""Turn a verified concrete pair into a Rule that holds at any shape.

The pair was found at the pool's tiny sizes. Here every dimension becomes a
term (symshape.py); operator shape rules make terms equal (a matmul's inner
sizes, a concat's other axes, ...). Attributes become templates over those
terms: a conv's padding is "=(dim(w1, 2) // 2, ...)", split sizes are the
concat input sizes, strides and pooling windows become variables shared by
every strided operator of the rule. Equalities the target needs but the
source does not imply become the rule's constraints.

A generalisation is only kept if it checks out: both sides are instantiated
at the example and at random other sizes (and strides 2, other windows,
odd kernel sizes; then one even kernel size) and compared in float64. If
the most general form fails, less general ones are tried: strides fixed at
1, then windows fixed, then every size coincidence of the example made a
constraint. A pair none of which checks out is dropped.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import replace

from ..graph.types import GraphError
from ..subst import expr as sexpr
from ..subst.rule import PatternInput, PatternNode, Rule
from ..subst.rule_io import rule_to_dict
from .enumerate import Engine
from .pairing import Pair, graphs_agree
from .symshape import Inconsistent, Sizes

LEVELS = (
    {"name": "general", "strides": True, "windows": True, "kernels": False, "coincide": False},
    {"name": "stride-1", "strides": False, "windows": True, "kernels": False, "coincide": False},
    {"name": "fixed-windows", "strides": False, "windows": False, "kernels": False, "coincide": False},
    {"name": "fixed-kernels", "strides": False, "windows": False, "kernels": True, "coincide": False},
    {"name": "coincident-sizes", "strides": False, "windows": False, "kernels": True, "coincide": True},
)


_ATOM = re.compile(r"^(dim\(\w+, \d+\)|\?\w+\[\d+\]|\d+)$")


def _p(text: str) -> str:
    """Parenthesise a sub-expression unless it is atomic (a dim(), a ?var[i] or a number)."""
    return text if _ATOM.match(text) else f"({text})"


def _same_pad(e):
    return f"({_p(e[0])} // 2, {_p(e[1])} // 2, {_p(e[0])} // 2, {_p(e[1])} // 2)"


class Ungeneralizable(ValueError):
    pass


def _producer(g, tensor):
    for k, op in enumerate(g.ops):
        if op.first <= tensor < op.first + len(op.shapes):
            return k, tensor - op.first
    return None, None


def _traverse(g, outputs):
    """Operators in post-order from the outputs (operands in slot order), and pool inputs first seen."""
    order, inputs, done = [], [], set()

    def visit(tensor):
        if tensor < g.P:
            if tensor not in inputs:
                inputs.append(tensor)
            return
        k, _ = _producer(g, tensor)
        if k in done:
            return
        for i in g.ops[k].inputs:
            visit(i)
        done.add(k)
        order.append(k)

    for o in outputs:
        visit(o)
    return order, inputs


def _role_key(eng: Engine, g, tensor):
    if tensor < g.P:
        return (0, eng.role_of[tensor])
    k, j = _producer(g, tensor)
    op = g.ops[k]
    return (1, op.tid, j, tuple(_role_key(eng, g, i) for i in op.inputs))


class _Ctx:
    """What one side's operators share: variables, the stride and window classes, assumptions."""

    def __init__(self, sz: Sizes, level: dict):
        self.sz, self.level = sz, level
        self.counts: dict[str, int] = {}
        self.stride = None       # (term, term) of the first source strided operator
        self.window = None       # (term, term) of the first source pooling window
        self.assumptions: list = []
        self.elementwise: list = []  # (size, size) of the source's element-wise operands, axis by axis
        self.vars: dict[str, tuple] = {}   # var name -> tuple of atom terms

    def new_var(self, prefix: str, values, tag: str = "") -> tuple[str, tuple]:
        self.counts[prefix] = self.counts.get(prefix, 0) + 1
        name = f"{prefix}{self.counts[prefix]}"
        atoms = tuple(self.sz.var(name, k, v, tag) for k, v in enumerate(values))
        self.vars[name] = atoms
        return name, atoms

    def assume(self, a, b, source: bool):
        if source:
            self.assumptions.append((a, b))
        else:
            self.sz.union(a, b)


def _apply(ctx: _Ctx, op, ins: list, source: bool, label: str):
    """Symbolic output dims of one operator, and its attribute templates (term lists to render)."""
    sz, lv = ctx.sz, ctx.level
    at = dict(op.attrs)
    name = op.op
    tm: dict = {}  # attr -> ("lit", value) | ("var", name) | ("exprs", [terms], formatter)

    def strided(h, w):
        if not lv["strides"]:
            return h, w
        if source:
            vname, atoms = ctx.new_var("s", (1, 1), "stride")
            if ctx.stride is None:
                ctx.stride = atoms
            else:
                ctx.assume(atoms[0], ctx.stride[0], True)
                ctx.assume(atoms[1], ctx.stride[1], True)
            tm["strides"] = ("var", vname)
        else:
            if ctx.stride is None:
                return h, w
            atoms = (sz.free(f"{label}.s0", 1, "stride"), sz.free(f"{label}.s1", 1, "stride"))
            sz.union(atoms[0], ctx.stride[0])
            sz.union(atoms[1], ctx.stride[1])
            tm["strides"] = ("exprs", list(atoms), None)
        return sz.cout(h, atoms[0]), sz.cout(w, atoms[1])

    if name == "conv2d":
        x, w = ins
        g = at["groups"]
        if g == 1:
            sz.union(x[1], w[1])
        else:
            i_ex = sz.terms[w[1]].value
            sz.union(w[1], sz.lit(i_ex))
            if sz.terms[w[0]].value == sz.terms[x[1]].value:
                ctx.assume(w[0], x[1], source)
            tm["groups"] = ("exprs", [x[1]], (lambda e: e[0]) if i_ex == 1 else (lambda e, i=i_ex: f"{_p(e[0])} // {i}"))
        tm["padding"] = ("exprs", [w[2], w[3]], _same_pad)
        if at["activation"] != "none":
            tm["activation"] = ("lit", at["activation"])
        h, wd = strided(x[2], x[3])
        return [[x[0], w[0], h, wd]], tm
    if name in ("max_pool2d", "avg_pool2d"):
        (x,) = ins
        kh, kw = at["kernel"]
        if lv["windows"]:
            if source:
                vname, k = ctx.new_var("k", (kh, kw), "kernel")
                if ctx.window is None:
                    ctx.window = k
                else:
                    ctx.assume(k[0], ctx.window[0], True)
                    ctx.assume(k[1], ctx.window[1], True)
                tm["kernel"] = ("var", vname)
            else:
                k = (sz.free(f"{label}.k0", kh, "kernel"), sz.free(f"{label}.k1", kw, "kernel"))
                if ctx.window is not None:
                    sz.union(k[0], ctx.window[0])
                    sz.union(k[1], ctx.window[1])
                tm["kernel"] = ("exprs", list(k), None)
        else:
            k = (sz.lit(kh), sz.lit(kw))
            tm["kernel"] = ("lit", (kh, kw))
        tm["padding"] = ("exprs", list(k), _same_pad)
        if name == "avg_pool2d":
            tm["count_include_pad"] = ("lit", at["count_include_pad"])
        h, wd = strided(x[2], x[3])
        return [[x[0], x[1], h, wd]], tm
    if name == "matmul":
        a, b = ins
        sz.union(a[1], b[0])
        return [[a[0], b[1]]], tm
    if name in ("add", "mul"):
        a, b = ins
        if len(b) == 0 and len(a) > 0:  # scalar multiply
            return [list(a)], tm
        # Element-wise operands broadcast: equal shapes are an assumption of the source
        # (a constraint of the rule), never implied, or a rule found at equal shapes
        # would match operands that broadcast, where it can be wrong.
        for u, v in zip(a, b):
            ctx.assume(u, v, source)
            if source:
                ctx.elementwise.append((u, v))
        # the output's size terms: a concat's sum where either operand has one (a later split needs it)
        return [[v if _has_sum(sz, v) and not _has_sum(sz, u) else u for u, v in zip(a, b)]], tm
    if name == "relu":
        return [list(ins[0])], tm
    if name == "transpose":
        tm["perm"] = ("lit", at["perm"])
        a = ins[0]
        return [[a[p] for p in at["perm"]]], tm
    if name == "concat":
        a, b = ins
        axis = at["axis"]
        for d in range(len(a)):
            if d != axis:
                sz.union(a[d], b[d])
        if axis:
            tm["axis"] = ("lit", axis)
        out = list(a)
        out[axis] = sz.add(a[axis], b[axis])
        return [out], tm
    if name == "split":
        (a,) = ins
        axis, sizes = at["axis"], at["sizes"]
        sz.close()
        for j in sz.members(a[axis]):
            t = sz.terms[j]
            if t.kind == "add" and (sz.terms[t.a].value, sz.terms[t.b].value) == tuple(sizes):
                parts = (t.a, t.b)
                break
        else:
            raise Ungeneralizable("split sizes are not the sizes of a concat")
        if axis:
            tm["axis"] = ("lit", axis)
        tm["sizes"] = ("exprs", list(parts), None)
        outs = []
        for part in parts:
            o = list(a)
            o[axis] = part
            outs.append(o)
        return outs, tm
    if name == "enlarge":
        (w,) = ins
        kh, kw = at["kernel"]
        if source:
            vname, k = ctx.new_var("e", (kh, kw), "kernel")
            tm["kernel"] = ("var", vname)
        else:
            k = (sz.free(f"{label}.e0", kh, "kernel"), sz.free(f"{label}.e1", kw, "kernel"))
            tm["kernel"] = ("exprs", list(k), None)
        return [[w[0], w[1], k[0], k[1]]], tm
    if name == "constant":
        kind, shape = at["kind"], tuple(at["shape"])
        kernel_dims = (2, 3) if kind in ("identity_conv", "avg_kernel") else ()
        if source:
            vname, dims = ctx.new_var("c", shape)
            tm["shape"] = ("var", vname)
        else:
            dims = tuple(sz.free(f"{label}.c{k}", v, "kernel" if k in kernel_dims else "") for k, v in enumerate(shape))
            tm["shape"] = ("exprs", list(dims), None)
        if kind == "identity_matrix":
            sz.union(dims[0], dims[1])
        if kind == "avg_kernel" and ctx.window is not None and lv["windows"]:
            ctx.assume(dims[2], ctx.window[0], source)
            ctx.assume(dims[3], ctx.window[1], source)
        tm["kind"] = ("lit", kind)
        return [list(dims)], tm
    raise Ungeneralizable(f"no shape rule for {name}")


def _has_sum(sz: Sizes, term: int) -> bool:
    return any(sz.terms[j].kind == "add" for j in sz.members(term))


def _render_attrs(sz: Sizes, tm: dict, concrete: dict) -> dict:
    out = {}
    for key, spec in tm.items():
        if spec[0] == "lit":
            out[key] = spec[1]
        elif spec[0] == "var":
            out[key] = "?" + spec[1]
        else:
            terms, fmt = spec[1], spec[2]
            texts = [sz.render(t) for t in terms]
            if fmt is None:
                texts = [t if t is not None else str(sz.terms[j].value) for t, j in zip(texts, terms)]
                out[key] = _tuple_template(texts)
            elif all(t is None or t.lstrip("-").isdigit() for t in texts):
                out[key] = concrete[key]  # fixed sizes: the attribute is the example's
            else:
                texts = [t if t is not None else str(sz.terms[j].value) for t, j in zip(texts, terms)]
                out[key] = "=" + fmt(texts)
    return out


def _tuple_template(texts: list[str]):
    """'?v' when the parts are exactly ?v[0], ?v[1], ...; a literal tuple when all are numbers."""
    names = {t.split("[", 1)[0] for t in texts if t.startswith("?")}
    if len(names) == 1 and texts == [f"{next(iter(names))}[{k}]" for k in range(len(texts))]:
        return next(iter(names))
    if all(t.lstrip("-").isdigit() for t in texts):
        return tuple(int(t) for t in texts)
    return "=(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")"


def _side(eng, g, outputs, order, names, ctx, source, prefix):
    """Pattern nodes of one side; returns nodes, refs by tensor, and per-node templates."""
    sz = ctx.sz
    dims: dict[int, list] = {}
    for t, name in names.items():
        dims[t] = [sz.dim(list(names).index(t), name, a, v, "kernel" if (
            len(eng.pool[t].shape) == 4 and a >= 2 and eng.pool[t].weight) else "")
            for a, v in enumerate(eng.pool[t].shape)]
    refs = dict(names)
    specs = []
    for n, k in enumerate(order, 1):
        op = g.ops[k]
        nid = f"{prefix}{n}"
        outs, tm = _apply(ctx, op, [dims[i] for i in op.inputs], source, nid)
        for j, d in enumerate(outs):
            dims[op.first + j] = d
            refs[op.first + j] = f"{nid}:{j}" if len(op.shapes) > 1 else nid
        specs.append((nid, op, tm))
    return refs, specs, dims


def generalize(eng: Engine, pair: Pair, reverse: bool = False, seed: int = 0) -> tuple[Rule | None, str]:
    """The most general rule for source -> target that checks out; (None, reason) if none."""
    src, tgt = (pair.g2, pair.g1) if reverse else (pair.g1, pair.g2)
    mapping = [(b, a) for a, b in pair.mapping] if reverse else list(pair.mapping)
    mapping.sort(key=lambda m: _role_key(eng, src, m[0]))
    s_order, s_inputs = _traverse(src, [a for a, _ in mapping])
    t_order, t_inputs = _traverse(tgt, [b for _, b in mapping])
    if set(t_inputs) - set(s_inputs):
        return None, "target reads inputs the source does not"
    names: dict[int, str] = {}
    counters: dict[str, int] = {}
    for t in s_inputs:
        role = eng.s.roles[eng.role_of[t]]
        prefix = "x" if role.kind != "weight" else ("s" if not role.shape else "w")
        counters[prefix] = counters.get(prefix, 0) + 1
        names[t] = f"{prefix}{counters[prefix]}"
    last = "no level tried"
    tried = set()
    for level in LEVELS:
        try:
            rule = _build(eng, src, tgt, mapping, s_order, t_order, names, level)
        except (Ungeneralizable, Inconsistent, sexpr.ExprError, GraphError, ValueError) as exc:
            last = f"{level['name']}: {exc}"
            continue
        form = json.dumps(canonical_form(rule), sort_keys=True)
        if form in tried:
            continue
        tried.add(form)
        ok, why = _check(rule, level, seed)
        if ok:
            return rule, level["name"]
        last = f"{level['name']}: {why}"
    return None, last


def _build(eng, src, tgt, mapping, s_order, t_order, names, level):
    sz = Sizes()
    ctx = _Ctx(sz, level)
    s_refs, s_specs, s_dims = _side(eng, src, None, s_order, names, ctx, True, "n")
    sz.close()
    implied = sz.copy()
    for a, b in ctx.assumptions:
        sz.union(a, b)
    if level["kernels"]:
        for j, t in enumerate(list(sz.terms)):
            if t.tag == "kernel" and t.kind in ("in", "var"):
                sz.union(j, sz.lit(t.value))
    if level["coincide"]:
        atoms = [j for j, t in enumerate(sz.terms) if t.kind == "in"]
        for j in atoms:
            for k in atoms:
                if j < k and sz.terms[j].value == sz.terms[k].value:
                    sz.union(j, k)
    t_refs, t_specs, t_dims = _side(eng, tgt, None, t_order, names, ctx, False, "m")
    sz.close()
    # constraints: equalities the target needs that the source does not imply
    imp = implied.copy()
    for t in sz.terms[len(imp.terms):]:
        imp._term(t, key=("extra", len(imp.terms)))
    imp.close()
    constraints = []
    # Equal operand shapes of each source element-wise operator, in the operands' own size
    # terms: a class's representative may hold only because some add does not broadcast.
    for u, v in ctx.elementwise:
        lu, lv = sz.render_own(u), sz.render_own(v)
        if lu is None or lv is None:
            raise Ungeneralizable("an element-wise operand size is not expressible")
        if lu != lv:
            constraints.append(f"{lv} == {lu}")
        imp.union(u, v)
    imp.close()
    for r, members in sorted(sz.classes().items()):
        rep = sz.rep(r)
        if rep is None:
            continue
        for m in members:
            if m == rep or sz.terms[m].kind == "free":
                continue
            lhs, rhs = imp.render_term(m, ("in", "lit", "var", "add", "cout")), imp.render_term(rep, ("in", "lit", "var", "add", "cout"))
            if lhs is None or rhs is None or imp.find(m) == imp.find(rep):
                continue
            constraints.append(f"{lhs} == {rhs}")
            imp.union(m, rep)
            imp.close()
    inputs = tuple(PatternInput(n, "weight" if eng.pool[t].weight else "any") for t, n in names.items())
    source = tuple(PatternNode(nid, op.op, tuple(s_refs[i] for i in op.inputs), _render_attrs(implied, tm, dict(op.attrs)))
                   for nid, op, tm in s_specs)
    target = tuple(PatternNode(nid, op.op, tuple(t_refs[i] for i in op.inputs), _render_attrs(sz, tm, dict(op.attrs)))
                   for nid, op, tm in t_specs)
    outputs = tuple((s_refs[a], t_refs[b]) for a, b in mapping)
    example = {"inputs": {n: tuple(eng.pool[t].shape) for t, n in names.items()},
               "vars": {v: tuple(sz.terms[a].value for a in atoms) for v, atoms in ctx.vars.items()}}
    # The pool fixes every input's rank; the rule was only checked at those ranks
    # (matmul associativity fails for a 1-D middle operand, a "scalar" may be a vector).
    constraints = _whole_shapes(constraints, {n: len(eng.pool[t].shape) for t, n in names.items()})
    constraints += [f"rank({n}) == {len(eng.pool[t].shape)}" for t, n in names.items()]
    rule = Rule("pending", inputs, source, target, outputs, tuple(sorted(set(constraints))), example,
                {}, {"status": "UNVERIFIED"}, {})
    object.__setattr__(rule, "_sizes", (sz, names, ctx.vars))  # for sampling in _check
    return rule


def _whole_shapes(constraints: list[str], ranks: dict[str, int]) -> list[str]:
    """`dim(a, i) == dim(b, i)` for every axis of two inputs of one rank is `shape(a) == shape(b)`."""
    have = set(constraints)
    out = list(constraints)
    names = sorted(ranks)
    for a in names:
        for b in names:
            r = ranks[a]
            if a == b or ranks[b] != r or r == 0:
                continue
            eqs = [f"dim({a}, {i}) == dim({b}, {i})" for i in range(r)]
            if all(e in have for e in eqs):
                out = [c for c in out if c not in eqs] + [f"shape({a}) == shape({b})"]
                have -= set(eqs)
    return out


def _instance(rule, shapes, variables, seeds=(21,)) -> str:
    ok, why = rule.constraints_hold(shapes, variables)
    if not ok:
        return "skip"
    try:
        ga = rule.example_graph("source", shapes, variables)
    except (GraphError, sexpr.ExprError, ValueError, IndexError, TypeError, ZeroDivisionError):
        return "skip"
    try:
        gb = rule.example_graph("target", shapes, variables)
    except (GraphError, sexpr.ExprError, ValueError, IndexError, TypeError, ZeroDivisionError):
        return "skip"  # the rule does not apply there: safe
    return "ok" if graphs_agree(ga, gb, seeds) else "bad"


def _check(rule: Rule, level: dict, seed: int) -> tuple[bool, str]:
    sz, names, vars_ = rule._sizes
    ex = rule.example
    if _instance(rule, ex["inputs"], ex["vars"]) != "ok":
        return False, "does not hold at the example"
    rng = random.Random(seed)
    good, strided, tries = 0, not any(v.startswith("s") for v in vars_), 0
    while (good < 2 or not strided) and tries < 40:
        tries += 1
        val = sz.sample(rng)
        if val is None:
            continue
        shapes, variables = _assign(sz, rule, vars_, val)
        res = _instance(rule, shapes, variables)
        if res == "bad":
            return False, f"fails at {shapes} {variables}"
        if res == "ok":
            good += 1
            strided = strided or any(v.startswith("s") and any(x != 1 for x in variables[v]) for v in variables)
    if good < 2:
        return False, "too few valid instances"
    if any(t.tag == "kernel" for t in sz.terms):
        res = "skip"
        for _ in range(20):
            val = sz.sample(rng, parity="even")
            if val is None:
                continue
            shapes, variables = _assign(sz, rule, vars_, val)
            res = _instance(rule, shapes, variables)
            if res != "skip":
                break
        if res != "ok":  # wrong at an even kernel, or never seen to hold at one
            _add_parity(rule, sz)
    return True, ""


def _assign(sz, rule, vars_, val):
    shapes = {}
    for pin in rule.inputs:
        dims = [j for j, t in enumerate(sz.terms) if t.kind == "in" and t.a[1] == pin.name]
        dims.sort(key=lambda j: sz.terms[j].a[2])
        shapes[pin.name] = tuple(val[sz.find(j)] for j in dims)
    variables = {v: tuple(val[sz.find(a)] for a in atoms) for v, atoms in vars_.items()}
    return shapes, variables


def _add_parity(rule: Rule, sz: Sizes) -> None:
    """Kernel sizes were only checked odd: say so in the constraints."""
    extra = []
    for r, members in sorted(sz.classes().items()):
        if any(sz.terms[m].tag == "kernel" for m in members) and not any(sz.terms[m].kind == "lit" for m in members):
            text = sz.render(r)
            if text is not None:
                extra.append(f"{_p(text)} % 2 == 1")
    object.__setattr__(rule, "constraints", tuple(sorted(set(rule.constraints) | set(extra))))


# ---- identity --------------------------------------------------------------------------------

def canonical_form(rule: Rule) -> dict:
    d = rule_to_dict(rule)
    return {k: d[k] for k in ("inputs", "source", "target", "outputs", "constraints")}


def with_id(rule: Rule, provenance: dict) -> Rule:
    form = json.dumps(canonical_form(rule), sort_keys=True, separators=(",", ":"))
    digest = hashlib.blake2b(form.encode(), digest_size=4).hexdigest()
    size = max(len(rule.source), len(rule.target))
    return replace(rule, id=f"t{size}-{digest}", provenance=provenance)
