"""TASO's substitutions as Tensat writes them, read into pairs of graphs over TASO's tensor pool.

Tensat (MLSys 2021) runs TASO's generated rules as egg patterns, one `lhs=>rhs` per line; a rule
with two outputs is two consecutive lines of its multi-output file. A variable `?input_N` is the
tensor TASO's generator made with op id -N, so each rule is read here at the shapes TASO found it
on (POOL). Two spellings exist: the older (`(matmul A B)`, `(concat AXIS A B)`, transposes, scalar
multiplies, pools, enlarge and TASO's constants) and the newer (`(matmul ACT A B)`,
`(concat AXIS NDIM A B)`, splits). Numeric codes are TASO's: padding 0 SAME, 1 VALID; activation
0 none, 1 sigmoid, 2 relu, 3 tanh. A split's point is not written: it is where the concat the split
value came from joined its inputs (TASO tracks that through the ops between), found here the same way.

TASO's "avg" pool and its pooling constant are a plain window sum; this project's average pool and
averaging kernel both divide by the window, so a rule relating the two holds in either reading.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from taso_relay.graph import GraphBuilder
from taso_relay.graph.graph import Graph

ACTIVATION = {0: "none", 1: "sigmoid", 2: "relu", 3: "tanh"}
POOL = {  # ?input_N -> (kind, shape): TASO's generator pool (BATCHSIZE 2)
    **{n: ("input", (2, 4)) for n in (1, 2, 3)},
    **{n: ("weight", (4, 4)) for n in (4, 5, 6)},
    **{n: ("input", (2, 4, 5, 5)) for n in (7, 8, 9)},
    **{n: ("weight", (4, 4, 3, 3)) for n in (10, 11, 12)},
    **{n: ("weight", (4, 4, 1, 3)) for n in (13, 14, 15)},
    **{n: ("weight", (4, 4, 3, 1)) for n in (16, 17, 18)},
    19: ("weight", (4, 1, 3, 3)),
    20: ("weight", ()),
}
_VAR = re.compile(r"^\?input_(\d+)$")


class Unreadable(ValueError):
    """A rule this reader cannot turn into graphs (an unknown operator, a split with no point, a bad shape)."""


@dataclass(frozen=True)
class TensatRule:
    line: int  # first line of the rule in its file (1-based)
    text: str
    sides: tuple[tuple, tuple]  # (source terms, target terms): one term per output
    error: str = ""  # why the text does not parse (graphs() raises it)

    @property
    def outputs(self) -> int:
        return len(self.sides[0])


def parse_term(text: str):
    """An s-expression as nested tuples of strings; atoms stay strings."""
    tokens = text.replace("(", " ( ").replace(")", " ) ").split()
    pos = 0

    def read():
        nonlocal pos
        if pos >= len(tokens):
            raise Unreadable(f"unexpected end of '{text}'")
        tok = tokens[pos]
        pos += 1
        if tok == ")":
            raise Unreadable(f"unbalanced ')' in '{text}'")
        if tok != "(":
            return tok
        items = []
        while pos < len(tokens) and tokens[pos] != ")":
            items.append(read())
        if pos >= len(tokens):
            raise Unreadable(f"unbalanced '(' in '{text}'")
        pos += 1
        return tuple(items)

    term = read()
    if pos != len(tokens):
        raise Unreadable(f"trailing text in '{text}'")
    return term


def read_rules(text: str, multi: bool = False) -> list[TensatRule]:
    """The rules of one file; `multi`: every two lines are one two-output rule."""
    lines = [(k + 1, line.strip()) for k, line in enumerate(text.splitlines()) if line.strip()]
    step = 2 if multi else 1
    rules = []
    for i in range(0, len(lines), step):
        group = lines[i:i + step]
        sides, error = ([], []), ""
        try:
            if len(group) < step:
                raise Unreadable("a two-output rule's second line is missing (the file ends)")
            for n, line in group:
                if line.count("=>") != 1:
                    raise Unreadable(f"line {n}: expected one '=>'")
                lhs, rhs = line.split("=>")
                sides[0].append(parse_term(lhs))
                sides[1].append(parse_term(rhs))
        except Unreadable as exc:
            error = str(exc)
        rules.append(TensatRule(group[0][0], " ; ".join(g[1] for g in group), (tuple(sides[0]), tuple(sides[1])),
                                error))
    return rules


class _Builder:
    """One side of a rule as a Graph: a term met twice is one node (TASO's graphs have no duplicates)."""

    def __init__(self):
        self.b = GraphBuilder()
        self.refs: dict = {}
        self.inputs: dict[int, object] = {}

    def shape(self, ref) -> tuple:
        return tuple(self.b.type_of(ref).shape)

    def build(self, terms) -> Graph:
        outs = [self.term(t) for t in terms]
        return self.b.build(outs)

    def term(self, t):
        if t in self.refs:
            return self.refs[t]
        ref = self._make(t)
        self.refs[t] = ref
        return ref

    def _make(self, t):
        if isinstance(t, str):
            m = _VAR.match(t)
            if m:
                n = int(m.group(1))
                if n not in POOL:
                    raise Unreadable(f"no tensor ?input_{n} in TASO's pool")
                kind, shape = POOL[n]
                maker = self.b.input if kind == "input" else self.b.weight
                return maker(f"input_{n}", shape)
            if t == "Imatmul":
                return self.b.op("constant", kind="identity_matrix", shape=(4, 4))
            if t == "Iewmul":
                return self.b.op("constant", kind="ones", shape=(2, 4, 5, 5))
            raise Unreadable(f"unknown atom '{t}'")
        op, args = t[0], t[1:]
        reader = getattr(self, "_" + op, None)
        if reader is None:
            raise Unreadable(f"unknown operator '{op}'")
        return reader(*args)

    # ---- operators -----------------------------------------------------------------------
    def _ewadd(self, a, b):
        return self.b.op("add", self.term(a), self.term(b))

    def _ewmul(self, a, b):
        return self.b.op("mul", self.term(a), self.term(b))

    def _smul(self, x, s):
        return self.b.op("mul", self.term(x), self.term(s))

    def _relu(self, x):
        return self.b.op("relu", self.term(x))

    def _transpose(self, x, *perm_shuffle):
        if perm_shuffle:  # the newer (transpose X PERM SHUFFLE): its permutation codes are not read here
            raise Unreadable("a transpose with a permutation code")
        ref = self.term(x)
        return self.b.op("transpose", ref, perm=tuple(reversed(range(len(self.shape(ref))))))

    def _matmul(self, *args):
        act, a, b = (0, *args) if len(args) == 2 else args
        return self.b.op("matmul", self.term(a), self.term(b), activation=ACTIVATION[int(act)])

    def _conv2d(self, sh, sw, pad, act, x, w):
        xr, wr = self.term(x), self.term(w)
        o, i, kh, kw = self.shape(wr)
        padding = (kh // 2, kw // 2, kh // 2, kw // 2) if int(pad) == 0 else (0, 0, 0, 0)
        return self.b.op("conv2d", xr, wr, strides=(int(sh), int(sw)), padding=padding,
                         groups=self.shape(xr)[1] // i, activation=ACTIVATION[int(act)])

    def _pool(self, op, args):
        if isinstance(args[0], tuple) or _VAR.match(str(args[0])):  # newer: input first, then an activation
            x, kh, kw, sh, sw, pad, act = args
        else:
            (kh, kw, sh, sw, pad, *act), x = args[:-1], args[-1]
            act = act[0] if act else 0
        kh, kw = int(kh), int(kw)
        padding = (kh // 2, kw // 2, kh // 2, kw // 2) if int(pad) == 0 else (0, 0, 0, 0)
        extra = {"count_include_pad": True} if op == "avg_pool2d" else {}
        ref = self.b.op(op, self.term(x), kernel=(kh, kw), strides=(int(sh), int(sw)), padding=padding, **extra)
        return ref if ACTIVATION[int(act)] == "none" else self.b.op(ACTIVATION[int(act)], ref)

    def _poolavg(self, *args):
        return self._pool("avg_pool2d", args)

    def _poolmax(self, *args):
        return self._pool("max_pool2d", args)

    def _concat(self, axis, *args):
        a, b = args[-2:]  # the newer spelling has the inputs' rank before them
        return self.b.op("concat", self.term(a), self.term(b), axis=int(axis))

    def _enlarge(self, *args):
        if len(args) == 3:  # older: (enlarge KH KW W)
            kernel, w = (int(args[0]), int(args[1])), args[2]
        else:  # newer: (enlarge W REF): W enlarged to REF's kernel
            w, like = args
            kernel = self.shape(self.term(like))[2:]
        return self.b.op("enlarge", self.term(w), kernel=tuple(kernel))

    def _Iconv(self, kh, kw):
        return self.b.op("constant", kind="identity_conv", shape=(4, 4, int(kh), int(kw)))

    def _Cpool(self, kh, kw):
        return self.b.op("constant", kind="avg_kernel", shape=(4, 1, int(kh), int(kw)))

    def _split(self, axis, x):
        axis = int(axis)
        parts = self._parts(x, axis)
        if parts is None:
            raise Unreadable(f"no split point for axis {axis} of {x}")
        return self.b.op("split", self.term(x), axis=axis, sizes=parts)

    def _split_0(self, s):
        return self.term(s)[0]

    def _split_1(self, s):
        return self.term(s)[1]

    def _parts(self, t, axis: int):
        """The sizes along `axis` of the two tensors a concat joined into `t`, followed through the ops
        that keep that axis: None where no concat shows."""
        if isinstance(t, str):
            return None
        op, args = t[0], t[1:]
        if op == "concat" and int(args[0]) == axis:
            return tuple(self.shape(self.term(a))[axis] for a in args[-2:])
        if op == "matmul":
            a, b = args[-2:]
            return self._parts(b, axis) if axis == len(self.shape(self.term(b))) - 1 else self._parts(a, axis)
        if op == "conv2d":
            x, w = args[-2:]
            return self._parts(w, 0) if axis == 1 else self._parts(x, axis) if axis == 0 else None
        if op in ("ewadd", "ewmul"):
            return self._parts(args[0], axis) or self._parts(args[1], axis)
        if op in ("relu", "smul"):
            return self._parts(args[0], axis)
        if op in ("poolavg", "poolmax"):
            return self._parts(next(a for a in args if isinstance(a, tuple) or _VAR.match(str(a))), axis)
        return None


def graphs(rule: TensatRule) -> tuple[Graph, Graph]:
    """The rule's source and target at TASO's pool shapes; Unreadable if an operator or shape does not fit."""
    from taso_relay.graph.types import GraphError

    if rule.error:
        raise Unreadable(rule.error)
    try:
        return _Builder().build(rule.sides[0]), _Builder().build(rule.sides[1])
    except (GraphError, KeyError, IndexError, TypeError, ValueError) as exc:
        if isinstance(exc, Unreadable):
            raise
        raise Unreadable(f"{type(exc).__name__}: {exc}") from None
