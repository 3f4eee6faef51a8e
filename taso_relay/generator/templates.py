"""Operator templates: one graph-form operator with its enumeration-time attributes.

A template knows when it applies to tensors of the pool (TASO's restrictions
live here), the attributes it gives the graph node, how split information
flows through it (split only cuts where a concat joined), and how to compute
it modulo a prime. Templates are numbered in a fixed order; a graph found by
the enumeration is a list of (template number, input tensor numbers).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..graph.ops.sources import constant_value
from . import fingerprint as fpm
from .config import Settings


@dataclass(frozen=True)
class Template:
    tid: int
    family: str
    op: str                  # graph-form operator name
    arity: int
    commutative: bool
    attrs: Callable          # (input shapes) -> attribute dict for the graph node
    check: Callable          # (input tensors) -> bool; shapes, kinds, split info
    infer: Callable          # (input tensors) -> list of (shape, split) per output
    mod: Callable            # (input arrays, attrs, prime) -> list of arrays
    label: str = ""

    def __str__(self) -> str:
        return self.label or self.family


def _tree_size(tree):
    return tree if isinstance(tree, int) else _tree_size(tree[0]) + _tree_size(tree[1])


def _merge_split(a, b):
    return tuple(sa if sa == sb else None for sa, sb in zip(a.split, b.split))


def _same_split(a):
    return a.split


def _dims(settings: Settings):
    """Batch, channels, spatial sizes and the 2-D weight size from the pool roles."""
    act4 = next((r.shape for r in settings.roles if len(r.shape) == 4 and r.kind == "any"), (2, 4, 5, 6))
    act2 = next((r.shape for r in settings.roles if len(r.shape) == 2 and r.kind == "any"), (2, 4))
    w2 = next((r.shape for r in settings.roles if len(r.shape) == 2 and r.kind == "weight"), (4, 4))
    return act4, act2, w2


def build_templates(settings: Settings) -> list[Template]:
    act4, act2, w2 = _dims(settings)
    batch = act2[0]
    fams = set(settings.ops)
    out: list[Template] = []

    def add(family, op, arity, commutative, attrs, check, infer, mod, label=""):
        if family in fams:
            out.append(Template(len(out), family, op, arity, commutative, attrs, check, infer, mod, label))

    # matmul: 2-D, right operand is not batch-leading (TASO: weight.dim[0] != BATCHSIZE), no a@a.
    add("matmul", "matmul", 2, False, lambda s: {},
        lambda a, b: len(a.shape) == 2 and len(b.shape) == 2 and a.shape[1] == b.shape[0]
        and b.shape[0] != batch and a.dval != b.dval,
        lambda a, b: [((a.shape[0], b.shape[1]), (a.split[0], b.split[1]))],
        lambda v, at, p: [np.matmul(v[0], v[1]) % p])
    for fam in ("add", "mul"):
        add(fam, fam, 2, True, lambda s: {},
            lambda a, b: len(a.shape) >= 1 and a.shape == b.shape,
            lambda a, b: [(a.shape, _merge_split(a, b))],
            (lambda v, at, p: [(v[0] + v[1]) % p]) if fam == "add" else (lambda v, at, p: [(v[0] * v[1]) % p]))
    add("smul", "mul", 2, False, lambda s: {},
        lambda a, b: len(a.shape) >= 1 and b.shape == (),
        lambda a, b: [(a.shape, a.split)],
        lambda v, at, p: [(v[0] * v[1]) % p], "scalar_mul")
    add("relu", "relu", 1, False, lambda s: {}, lambda a: True,
        lambda a: [(a.shape, a.split)], lambda v, at, p: [fpm.relu(v[0], p)])
    add("transpose", "transpose", 1, False, lambda s: {"perm": (1, 0)}, lambda a: len(a.shape) == 2,
        lambda a: [((a.shape[1], a.shape[0]), (a.split[1], a.split[0]))],
        lambda v, at, p: [np.ascontiguousarray(v[0].T)])

    kernels = set(tuple(k) for k in settings.conv_kernels)

    def conv_check(x, w):
        if len(x.shape) != 4 or len(w.shape) != 4 or x.input_weight:
            return False
        c, (o, i, kh, kw) = x.shape[1], w.shape
        if (kh, kw) not in kernels or c % i:
            return False
        return o % (c // i) == 0

    def conv_attrs(activation):
        def attrs(shapes):
            (_, c, _, _), (_, i, kh, kw) = shapes
            return {"padding": (kh // 2, kw // 2, kh // 2, kw // 2), "groups": c // i, "activation": activation}
        return attrs

    def conv_mod(relu):
        def mod(v, at, p):
            y = fpm.conv2d(v[0], v[1], at["groups"], at["padding"], p)
            return [fpm.relu(y, p) if relu else y]
        return mod

    for fam, act in (("conv", "none"), ("conv_relu", "relu")):
        add(fam, "conv2d", 2, False, conv_attrs(act), conv_check,
            lambda x, w: [((x.shape[0], w.shape[0], x.shape[2], x.shape[3]),
                           (x.split[0], w.split[0], x.split[2], x.split[3]))],
            conv_mod(act == "relu"), "conv2d" + ("[relu]" if act == "relu" else ""))

    for rank, axes in ((2, (0, 1)), (4, tuple(settings.concat_axes_4d))):
        for axis in axes:
            add("concat", "concat", 2, False, (lambda ax: lambda s: {"axis": ax})(axis),
                (lambda ax, rk: lambda a, b: len(a.shape) == rk == len(b.shape) and all(
                    a.shape[d] == b.shape[d] for d in range(rk) if d != ax))(axis, rank),
                (lambda ax: lambda a, b: [(
                    tuple(a.shape[d] + b.shape[d] if d == ax else a.shape[d] for d in range(len(a.shape))),
                    tuple((a.split[d] if a.split[d] is not None else a.shape[d],
                           b.split[d] if b.split[d] is not None else b.shape[d]) if d == ax
                          else (a.split[d] if a.split[d] == b.split[d] else None)
                          for d in range(len(a.shape))))])(axis),
                (lambda ax: lambda v, at, p: [np.concatenate(v, axis=ax)])(axis), f"concat{rank}d_{axis}")
    for rank, axes in ((2, (0, 1)), (4, tuple(settings.concat_axes_4d))):
        for axis in axes:
            def split_infer(a, ax=axis):
                left, right = a.split[ax]
                outs = []
                for part in (left, right):
                    shape = list(a.shape)
                    shape[ax] = _tree_size(part)
                    sp = list(a.split)
                    sp[ax] = part if isinstance(part, tuple) else None
                    outs.append((tuple(shape), tuple(sp)))
                return outs

            add("split", "split", 1, False,
                None,  # sizes depend on split info: filled by the enumeration from infer()
                (lambda ax, rk: lambda a: len(a.shape) == rk and isinstance(a.split[ax], tuple))(axis, rank),
                split_infer,
                (lambda ax: lambda v, at, p: [np.ascontiguousarray(q) for q in
                                              np.split(v[0], [at["sizes"][0]], axis=ax)])(axis),
                f"split{rank}d_{axis}")
    eh, ew = settings.enlarge_to
    add("enlarge", "enlarge", 1, False, lambda s: {"kernel": (eh, ew)},
        lambda a: a.pool >= 0 and len(a.shape) == 4 and a.shape[2] <= eh and a.shape[3] <= ew
        and (eh - a.shape[2]) % 2 == 0 and (ew - a.shape[3]) % 2 == 0 and (a.shape[2], a.shape[3]) != (eh, ew),
        lambda a: [((a.shape[0], a.shape[1], eh, ew), (a.split[0], a.split[1], None, None))],
        lambda v, at, p: [np.pad(v[0], ((0, 0), (0, 0), ((eh - v[0].shape[2]) // 2,) * 2,
                                         ((ew - v[0].shape[3]) // 2,) * 2))])
    ph, pw = settings.pool_kernel
    pad = (ph // 2, pw // 2, ph // 2, pw // 2)
    for fam, op, extra in (("max_pool", "max_pool2d", {}), ("avg_pool", "avg_pool2d", {"count_include_pad": True})):
        add(fam, op, 1, False, (lambda ex: lambda s: {"kernel": (ph, pw), "padding": pad, **ex})(extra),
            lambda a: len(a.shape) == 4 and not a.weight,
            lambda a: [(a.shape, a.split)],
            (lambda o: lambda v, at, p: [fpm.pool2d(o, v[0], (ph, pw), pad, p)])(op))
    n, c, h, w = act4
    consts = (("const_iconv", "identity_conv", (c, c, 3, 3)), ("const_imat", "identity_matrix", tuple(w2)),
              ("const_ones", "ones", tuple(act4)), ("const_avgk", "avg_kernel", (c, 1, ph, pw)))
    for fam, kind, shape in consts:
        add(fam, "constant", 0, False, (lambda k, s_: lambda s: {"kind": k, "shape": s_})(kind, shape),
            lambda: True, (lambda s_: lambda: [(s_, (None,) * len(s_))])(shape),
            (lambda k, s_: lambda v, at, p: [constant_value(k, s_, "float32", p)])(kind, shape), kind)
    return out


def node_attrs(t: Template, in_shapes, out_shapes) -> dict:
    """The graph node's attributes for one application of `t`."""
    if t.op == "split":
        axis = int(t.label.rsplit("_", 1)[1])
        return {"axis": axis, "sizes": tuple(s[axis] for s in out_shapes)}
    return dict(t.attrs(in_shapes))
