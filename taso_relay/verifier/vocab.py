"""The Z3 vocabulary: tensors, shapes and one uninterpreted function per operator.

Tensors are values of an uninterpreted sort ``T``. A tensor's shape is a value
of a second uninterpreted sort ``S`` (``shp(t)``) with a rank and dimensions
(``srank``, ``sdim``) and a functional update ``supd(s, axis, size)`` (the shape
with one dimension replaced), which is how "agree everywhere except on the
concat axis" is said without quantifying over axes.

``wt(t)`` says that ``t`` denotes a real, well-typed tensor. Operators are
strict: an ill-typed application denotes junk, so every axiom is guarded by
``wt`` of the side it rewrites (see axioms/base.py for why that is sound).

Integer parameters (strides, padding, axis, groups, activation, ...) are plain
Int arguments; activations are the codes in ``ACT_CODES``.
"""
from __future__ import annotations

import z3

T = z3.DeclareSort("T")
S = z3.DeclareSort("S")
I = z3.IntSort()
B = z3.BoolSort()

shp = z3.Function("shp", T, S)
srank = z3.Function("srank", S, I)
sdim = z3.Function("sdim", S, I, I)
supd = z3.Function("supd", S, I, I, S)
numel_s = z3.Function("numel", S, I)
wt = z3.Function("wt", T, B)

ACT_CODES = {"none": 0, "relu": 1, "sigmoid": 2, "tanh": 3}
ACT_NAMES = {v: k for k, v in ACT_CODES.items()}

# Strings other than activations (layouts, constant kinds) are interned to
# integers above this base so that "?v == 'relu'" style comparisons stay Int.
_STRINGS: dict[str, int] = {}
_STRING_BASE = 1000


def string_code(value: str) -> int:
    if value in ACT_CODES:
        return ACT_CODES[value]
    if value not in _STRINGS:
        _STRINGS[value] = _STRING_BASE + len(_STRINGS)
    return _STRINGS[value]


def dim(t, i):
    return sdim(shp(t), i)


def rank(t):
    return srank(shp(t))


# ---- operator functions ------------------------------------------------
# Each entry: name -> (number of Int parameters, number of tensor arguments).
UNARY = ("relu", "sigmoid", "tanh", "neg", "exp", "log", "sqrt", "rsqrt", "abs", "erf", "gelu",
         "gelu_tanh", "silu")
BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum")
CONV_PARAMS = ("sh", "sw", "pt", "pl", "pb", "pr", "dh", "dw", "groups", "act")
CONV_T_PARAMS = ("sh", "sw", "pt", "pl", "pb", "pr", "oph", "opw", "dh", "dw", "groups")
POOL_PARAMS = ("kh", "kw", "sh", "sw", "pt", "pl", "pb", "pr", "dh", "dw", "ceil")

SIGNATURES: dict[str, tuple[int, int]] = {
    **{u: (0, 1) for u in UNARY},
    **{b: (0, 2) for b in BINARY},
    "conv2d": (len(CONV_PARAMS), 2),
    "conv2d_transpose": (len(CONV_T_PARAMS), 2),  # NCHW data, IOHW kernel
    "matmul": (1, 2),
    "concat": (1, 2),
    "slice": (3, 1),  # axis, begin, end
    "enlarge": (2, 1),
    "subpixel_kernel": (4, 1),  # strides (h, w), then the transposed conv's padding (top, left)
    "max_pool2d": (len(POOL_PARAMS), 1),
    "avg_pool2d": (len(POOL_PARAMS) + 1, 1),  # + count_include_pad
    "resize2d": (5, 1),  # output H and W, then the codes of method, coordinate mode and rounding (NCHW)
    "channel_shuffle": (1, 1),  # groups (NCHW)
    "depth_to_space": (3, 1),  # block (h, w), the code of the mode (NCHW)
    "space_to_depth": (3, 1),  # the same
    "identity_conv": (4, 0),
    "avg_kernel": (4, 0),
    "identity_matrix": (1, 0),
    "batch_norm": (2, 5),  # axis, epsilon (a code: see encode.py); x, gamma, beta, mean, var
    "leaky_relu": (1, 1),  # the slope's code (encode.py), as an epsilon's
    "group_norm": (3, 3),  # groups, epsilon's code, the channel axis; x, gamma, beta
}
TRANSPOSE_RANKS = range(1, 7)
ONES_RANKS = range(0, 7)
PAD_RANKS = range(1, 7)
RESHAPE_RANKS = range(1, 7)
for _r in TRANSPOSE_RANKS:
    SIGNATURES[f"transpose{_r}"] = (_r, 1)
for _r in PAD_RANKS:
    SIGNATURES[f"pad{_r}"] = (2 * _r + 1, 1)  # (before, after) per axis, then the value's code (encode.py)
    SIGNATURES[f"mirror_pad{_r}"] = (2 * _r + 1, 1)  # (before, after) per axis, then the mode's code
for _r in ONES_RANKS:
    SIGNATURES[f"ones{_r}"] = (_r, 0)
for _r in RESHAPE_RANKS:
    SIGNATURES[f"reshape{_r}"] = (_r, 1)  # the new shape's dims

FUNCS: dict[str, z3.FuncDeclRef] = {}


def func(name: str) -> z3.FuncDeclRef:
    """The Z3 function of an operator (declared on first use)."""
    if name not in FUNCS:
        if name in SIGNATURES:
            n_int, n_t = SIGNATURES[name]
        elif name.startswith("opaque:"):
            n_int, n_t = 0, int(name.rsplit("/", 1)[1])
        else:
            raise KeyError(f"no Z3 function for '{name}'")
        FUNCS[name] = z3.Function(name, *([I] * n_int + [T] * n_t + [T]))
    return FUNCS[name]


def app(name: str, ints, tensors):
    return func(name)(*(list(ints) + list(tensors)))


def head_name(term) -> str:
    return term.decl().name()
