"""Shape rules in Z3: what ``wt(op(...))`` implies about the operands and the result.

One function serves twice: ground, for every node of a rule being proved, and
under a quantifier (``shape_axioms``) for the terms that axiom instantiation
creates during a proof. Each fact mirrors the operator's `infer` function in
taso_relay/graph/ops/; tests/verifier/test_typing.py checks them against it on
concrete shapes.
"""
from __future__ import annotations

from functools import lru_cache

import z3

from . import vocab as V
from .vocab import dim, rank, sdim, shp, srank, supd, wt


def conv_out(size, k, s, lo, hi, d):
    return (size + lo + hi - d * (k - 1) - 1) / s + 1


def transposed_out(size, k, s, lo, hi, output_padding, d):
    return (size - 1) * s - lo - hi + d * (k - 1) + output_padding + 1


def subpixel_size(k, s, p):
    """graph/ops/subpixel.py's window, in Z3's integer division (floor for positive divisors)."""
    return (k - 1 - p) / s + (p + s - 1) / s + 1


def _clamp_index(i, d):
    j = z3.If(i < 0, i + d, i)
    return z3.If(j < 0, 0, z3.If(j > d, d, j))


def slice_len(d, lo, hi):
    """len(range(d)[lo:hi]): Python's slicing, which strided_slice follows (negative wrap, clamping)."""
    start, stop = _clamp_index(lo, d), _clamp_index(hi, d)
    return z3.If(stop > start, stop - start, 0)


def _dims_are(t, values):
    return [rank(t) == len(values)] + [dim(t, i) == v for i, v in enumerate(values)]


def facts(name: str, ints, args, out) -> list:
    """Facts implied by wt(out) where out = name(ints..., args...)."""
    f = [wt(a) for a in args]
    if name in V.UNARY or name in ("leaky_relu", "group_norm"):
        return f + [shp(out) == shp(args[0])]
    if name in V.BINARY:
        a, b = args
        return f + [z3.Implies(shp(a) == shp(b), shp(out) == shp(a)),
                    z3.Implies(rank(b) == 0, shp(out) == shp(a)), z3.Implies(rank(a) == 0, shp(out) == shp(b))]
    if name == "conv2d":
        sh, sw, pt, pl, pb, pr, dh, dw, g, act = ints
        x, w = args
        return f + [
            rank(x) == 4, rank(w) == 4, g >= 1, sh >= 1, sw >= 1, dh >= 1, dw >= 1,
            pt >= 0, pl >= 0, pb >= 0, pr >= 0, act >= 0, act <= 3,
            dim(x, 1) == dim(w, 1) * g,
        ] + _dims_are(out, [dim(x, 0), dim(w, 0),
                            conv_out(dim(x, 2), dim(w, 2), sh, pt, pb, dh),
                            conv_out(dim(x, 3), dim(w, 3), sw, pl, pr, dw)])
    if name == "conv2d_transpose":
        sh, sw, pt, pl, pb, pr, oph, opw, dh, dw, g = ints
        x, w = args
        return f + [
            rank(x) == 4, rank(w) == 4, g >= 1, sh >= 1, sw >= 1, dh >= 1, dw >= 1,
            oph >= 0, opw >= 0, dim(x, 1) == dim(w, 0),
        ] + _dims_are(out, [dim(x, 0), dim(w, 1) * g,
                            transposed_out(dim(x, 2), dim(w, 2), sh, pt, pb, oph, dh),
                            transposed_out(dim(x, 3), dim(w, 3), sw, pl, pr, opw, dw)])
    if name == "matmul":
        (act,) = ints
        a, b = args
        r = rank(a)
        i = z3.Int("i_mm")
        batch = z3.ForAll([i], z3.Implies(z3.And(i >= 0, i < r - 2, dim(a, i) == dim(b, i)),
                                          dim(out, i) == dim(a, i)),
                          patterns=[dim(out, i)])
        same_rank = z3.And(rank(out) == r, dim(out, r - 2) == dim(a, r - 2),
                           dim(out, r - 1) == dim(b, r - 1), dim(a, r - 1) == dim(b, r - 2), batch)
        rb = rank(b)
        j = z3.Int("j_mm")
        # a batched operand against a matrix: the batch comes from the batched side alone
        a_batched = z3.And(rank(out) == r, dim(out, r - 2) == dim(a, r - 2), dim(out, r - 1) == dim(b, 1),
                           dim(a, r - 1) == dim(b, 0),
                           z3.ForAll([j], z3.Implies(z3.And(j >= 0, j < r - 2), dim(out, j) == dim(a, j)),
                                     patterns=[dim(out, j)]))
        b_batched = z3.And(rank(out) == rb, dim(out, rb - 2) == dim(a, 0), dim(out, rb - 1) == dim(b, rb - 1),
                           dim(a, 1) == dim(b, rb - 2),
                           z3.ForAll([j], z3.Implies(z3.And(j >= 0, j < rb - 2), dim(out, j) == dim(b, j)),
                                     patterns=[dim(out, j)]))
        return f + [act >= 0, act <= 3, z3.Implies(z3.And(rank(a) == rank(b), r >= 2), same_rank),
                    z3.Implies(z3.And(r >= 3, rb == 2), a_batched),
                    z3.Implies(z3.And(r == 2, rb >= 3), b_batched)]
    if name == "concat":
        (ax,) = ints
        a, b = args
        return f + [ax >= 0, ax < rank(a), rank(a) == rank(b),
                    supd(shp(a), ax, 0) == supd(shp(b), ax, 0),
                    shp(out) == supd(shp(a), ax, dim(a, ax) + dim(b, ax))]
    if name == "slice":
        ax, lo, hi = ints
        (x,) = args
        return f + [ax >= 0, ax < rank(x), shp(out) == supd(shp(x), ax, slice_len(dim(x, ax), lo, hi))]
    if name.startswith("transpose"):
        (x,) = args
        r = len(ints)
        return f + [rank(x) == r, z3.Distinct(*ints) if r > 1 else z3.BoolVal(True)] + \
            [z3.And(p >= 0, p < r) for p in ints] + _dims_are(out, [dim(x, p) for p in ints])
    if name.startswith("reshape"):  # the same elements in another shape: only the new shape is a fact here
        return f + [v >= 1 for v in ints] + _dims_are(out, list(ints))
    if name.startswith(("pad", "mirror_pad")):  # the widths, then the value's or the mode's code
        (x,) = args
        widths = ints[:-1]
        r = len(widths) // 2
        return f + [rank(x) == r] + [w >= 0 for w in widths] + \
            _dims_are(out, [dim(x, i) + widths[2 * i] + widths[2 * i + 1] for i in range(r)])
    if name == "enlarge":
        kh, kw = ints
        (w,) = args
        return f + [rank(w) == 4, dim(w, 2) <= kh, dim(w, 3) <= kw,
                    (kh - dim(w, 2)) % 2 == 0, (kw - dim(w, 3)) % 2 == 0,
                    shp(out) == supd(supd(shp(w), 2, kh), 3, kw)] + \
            _dims_are(out, [dim(w, 0), dim(w, 1), kh, kw])
    if name == "subpixel_kernel":  # graph/ops/subpixel.py: the window per axis, from the furthest tap back
        sh, sw, ph, pw = ints
        (w,) = args
        return f + [rank(w) == 4, sh >= 1, sw >= 1, ph >= 0, pw >= 0, ph <= dim(w, 2) - 1, pw <= dim(w, 3) - 1] + \
            _dims_are(out, [dim(w, 1) * sh * sw, dim(w, 0), subpixel_size(dim(w, 2), sh, ph),
                            subpixel_size(dim(w, 3), sw, pw)])
    if name in ("max_pool2d", "avg_pool2d"):
        kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, ceil = ints[:11]
        (x,) = args
        shape = [dim(x, 0), dim(x, 1), conv_out(dim(x, 2), kh, sh, pt, pb, dh),
                 conv_out(dim(x, 3), kw, sw, pl, pr, dw)]
        return f + [rank(x) == 4, sh >= 1, sw >= 1, dh >= 1, dw >= 1, kh >= 1, kw >= 1,
                    pt >= 0, pl >= 0, pb >= 0, pr >= 0,
                    z3.Implies(ceil == 0, z3.And(*_dims_are(out, shape)))]
    if name == "channel_shuffle":  # no theory of its values: only its shape
        (x,) = args
        return f + [rank(x) == 4, ints[0] >= 1, shp(out) == shp(x)]
    if name == "depth_to_space":  # no theory of its values: only its shape
        bh, bw, _ = ints
        (x,) = args
        return f + [rank(x) == 4, bh >= 1, bw >= 1, dim(x, 1) % (bh * bw) == 0] + \
            _dims_are(out, [dim(x, 0), dim(x, 1) / (bh * bw), dim(x, 2) * bh, dim(x, 3) * bw])
    if name == "space_to_depth":  # its inverse
        bh, bw, _ = ints
        (x,) = args
        return f + [rank(x) == 4, bh >= 1, bw >= 1, dim(x, 2) % bh == 0, dim(x, 3) % bw == 0] + \
            _dims_are(out, [dim(x, 0), dim(x, 1) * bh * bw, dim(x, 2) / bh, dim(x, 3) / bw])
    if name == "resize2d":  # no theory of its values: only its shape
        (x,) = args
        return f + [rank(x) == 4, ints[0] >= 1, ints[1] >= 1] + \
            _dims_are(out, [dim(x, 0), dim(x, 1), ints[0], ints[1]])
    if name in ("identity_conv", "avg_kernel"):
        return _dims_are(out, list(ints)) + [v >= 1 for v in ints]
    if name == "identity_matrix":
        (n,) = ints
        return _dims_are(out, [n, n]) + [n >= 1]
    if name.startswith("ones"):
        return _dims_are(out, list(ints)) + [v >= 1 for v in ints]
    return f  # opaque and other uninterpreted operators: strictness only


def shape_axioms(names) -> list:
    """Quantified typing facts for the given operator functions (pattern: the op term)."""
    return [_shape_axiom(name) for name in sorted(names)]


@lru_cache(maxsize=None)
def _shape_axiom(name: str):
    # built once per process: building Z3 terms costs more than many proofs
    n_int, n_t = V.SIGNATURES[name] if name in V.SIGNATURES else (0, int(name.rsplit("/", 1)[1]))
    ints = [z3.Int(f"{name}_p{k}") for k in range(n_int)]
    args = [z3.Const(f"{name}_t{k}", V.T) for k in range(n_t)]
    term = V.app(name, ints, args)
    body = z3.Implies(wt(term), z3.And(*facts(name, ints, args, term)))
    return z3.ForAll(ints + args, body, patterns=[term], qid=f"typing:{name}")


def shape_algebra() -> list:
    """The shape sort's axioms (built once per process, see below)."""
    return list(_shape_algebra())


@lru_cache(maxsize=None)
def _shape_algebra() -> tuple:
    """Axioms of the shape sort: rank and dimensions under a functional update.

    The intended model is tuples of naturals with supd(s, a, v) = s with entry a
    replaced (s itself when a is out of range); test_typing checks each axiom
    on concrete tuples through `shape_algebra_concrete`.
    """
    s, ax, ax2, v, u, i = z3.Const("s", V.S), z3.Int("ax"), z3.Int("ax2"), z3.Int("v"), z3.Int("u"), z3.Int("i")
    up = supd(s, ax, v)
    inrange = z3.And(ax >= 0, ax < srank(s))
    return (
        z3.ForAll([s, ax, v], srank(up) == srank(s), patterns=[up]),
        z3.ForAll([s, ax, v, i], z3.Implies(inrange, sdim(up, i) == z3.If(i == ax, v, sdim(s, i))),
                  patterns=[sdim(up, i), z3.MultiPattern(up, sdim(s, i))]),
        z3.ForAll([s, ax, v], z3.Implies(inrange, sdim(up, ax) == v), patterns=[up]),
        z3.ForAll([s, ax, v, u], supd(up, ax, u) == supd(s, ax, u), patterns=[supd(up, ax, u)]),
        z3.ForAll([s, ax, v], z3.Implies(v == sdim(s, ax), up == s), patterns=[up]),
        z3.ForAll([s, ax, v, ax2, u], z3.Implies(ax != ax2, supd(up, ax2, u) == supd(supd(s, ax2, u), ax, v)),
                  patterns=[supd(up, ax2, u)]),
    )


def shape_algebra_concrete():
    """The same laws as Python predicates over tuples, for the concrete check."""
    def upd(s, a, v):
        return tuple(v if k == a else d for k, d in enumerate(s))

    def inr(s, a):
        return 0 <= a < len(s)

    return [
        lambda s, a, v, b, u, i: len(upd(s, a, v)) == len(s),
        lambda s, a, v, b, u, i: not inr(s, a) or not 0 <= i < len(s) or upd(s, a, v)[i] == (v if i == a else s[i]),
        lambda s, a, v, b, u, i: not inr(s, a) or upd(s, a, v)[a] == v,
        lambda s, a, v, b, u, i: upd(upd(s, a, v), a, u) == upd(s, a, u),
        lambda s, a, v, b, u, i: not inr(s, a) or v != s[a] or upd(s, a, v) == s,
        lambda s, a, v, b, u, i: a == b or upd(upd(s, a, v), b, u) == upd(upd(s, b, u), a, v),
    ]
