"""Element-wise operators: unary activations and broadcasting binary arithmetic."""
from __future__ import annotations

import math

import numpy as np

from . import modular
from .registry import REQUIRED, OpDef, Pattern, fail, register


def broadcast_shape(op, types):
    try:
        shape = np.broadcast_shapes(*(t.shape for t in types))
    except ValueError:
        raise fail(op, "shapes do not broadcast", types) from None
    dtypes = {t.dtype for t in types}
    if len(dtypes) != 1:
        raise fail(op, f"mixed dtypes {sorted(dtypes)}", types)
    return [types[0].__class__(shape, types[0].dtype)]


def _unary_infer(name):
    return lambda types, attrs: [types[0]]


def _binary_infer(name):
    return lambda types, attrs: broadcast_shape(name, types)


def _erf(x):
    try:
        from scipy.special import erf  # noqa: WPS433 (optional, faster)
        return erf(x).astype(x.dtype)
    except ImportError:
        return np.vectorize(math.erf, otypes=[x.dtype])(x)


def _gelu(x):
    return (0.5 * x * (1.0 + _erf(x / np.sqrt(2.0).astype(x.dtype)))).astype(x.dtype)


def _gelu_tanh(x):
    c = np.sqrt(2.0 / np.pi).astype(x.dtype)
    return (0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x ** 3)))).astype(x.dtype)


def _sigmoid(x):
    return (1.0 / (1.0 + np.exp(-x))).astype(x.dtype)


UNARY = {
    "relu": (lambda x: np.maximum(x, 0).astype(x.dtype), modular.relu, Pattern.ELEMWISE),
    "sigmoid": (_sigmoid, modular.sigmoid, Pattern.ELEMWISE),
    "tanh": (np.tanh, modular.tanh, Pattern.ELEMWISE),
    "gelu": (_gelu, None, Pattern.ELEMWISE),
    "gelu_tanh": (_gelu_tanh, None, Pattern.ELEMWISE),
    "erf": (_erf, None, Pattern.ELEMWISE),
    "exp": (np.exp, None, Pattern.ELEMWISE),
    "log": (np.log, None, Pattern.ELEMWISE),
    "sqrt": (np.sqrt, None, Pattern.ELEMWISE),
    "rsqrt": (lambda x: (1.0 / np.sqrt(x)).astype(x.dtype), None, Pattern.ELEMWISE),
    "neg": (np.negative, lambda x, p: (-x) % p, Pattern.ELEMWISE),
    "abs": (np.abs, None, Pattern.ELEMWISE),
    "silu": (lambda x: (x * _sigmoid(x)).astype(x.dtype), None, Pattern.ELEMWISE),
}

BINARY = {
    "add": (np.add, lambda a, b, p: (a + b) % p, True),
    "sub": (np.subtract, lambda a, b, p: (a - b) % p, False),
    "mul": (np.multiply, lambda a, b, p: (a * b) % p, True),
    "div": (np.divide, None, False),
    "pow": (np.power, None, False),
    "maximum": (np.maximum, None, True),
    "minimum": (np.minimum, None, True),
}


def _register_unary(name, fn, mod_fn, pattern):
    register(OpDef(
        name=name, arity=1, attrs={}, infer=_unary_infer(name),
        ref=lambda xs, attrs: [np.asarray(fn(xs[0])).astype(xs[0].dtype)],
        modular=(lambda xs, attrs, p: [mod_fn(xs[0], p)]) if mod_fn else None,
        pattern=pattern, tags=frozenset({"elementwise", "unary"}),
    ))


def _register_binary(name, fn, mod_fn, commutative):
    register(OpDef(
        name=name, arity=2, attrs={}, infer=_binary_infer(name),
        ref=lambda xs, attrs: [np.asarray(fn(xs[0], xs[1])).astype(xs[0].dtype)],
        modular=(lambda xs, attrs, p: [mod_fn(xs[0], xs[1], p)]) if mod_fn else None,
        pattern=Pattern.BROADCAST, commutative=commutative,
        tags=frozenset({"elementwise", "binary"}),
    ))


for _name, (_fn, _mod, _pat) in UNARY.items():
    _register_unary(_name, _fn, _mod, _pat)
for _name, (_fn, _mod, _comm) in BINARY.items():
    _register_binary(_name, _fn, _mod, _comm)


def _clip_ref(xs, attrs):
    # as TVM computes it (topi.clip: the upper bound first); the bridge only imports min <= max
    x = xs[0]
    return [np.maximum(np.minimum(x, attrs["max"]), attrs["min"]).astype(x.dtype)]


register(OpDef(
    name="clip", arity=1, attrs={"min": REQUIRED, "max": REQUIRED}, infer=lambda types, attrs: [types[0]],
    ref=_clip_ref, pattern=Pattern.ELEMWISE, tags=frozenset({"elementwise", "unary"}),
    doc="x limited to [min, max]: what TVM's ONNX importer makes of HardSigmoid and HardSwish",
))


def _leaky_relu_ref(xs, attrs):
    x = xs[0]  # as topi computes it: x where x > 0, else x times alpha in x's dtype
    return [np.where(x > 0, x, x * np.asarray(attrs["alpha"], dtype=x.dtype)).astype(x.dtype)]


register(OpDef(
    name="leaky_relu", arity=1, attrs={"alpha": REQUIRED}, infer=lambda types, attrs: [types[0]],
    ref=_leaky_relu_ref, pattern=Pattern.ELEMWISE, tags=frozenset({"elementwise", "unary"}),
))


def _where_infer(types, attrs):
    if types[0].dtype != "bool":
        raise fail("where", f"condition of dtype {types[0].dtype}, not bool", types)
    shape = broadcast_shape("where", [types[0].__class__(t.shape, types[1].dtype) for t in types])[0].shape
    if types[1].dtype != types[2].dtype:
        raise fail("where", f"mixed dtypes {types[1].dtype} and {types[2].dtype}", types)
    return [types[0].__class__(shape, types[1].dtype)]


# The guards TVM's ONNX importer puts on Clip's constant bounds (where(isnan(b), inf, b)): modelled so
# that they fold into constants like other weight-only computations.
register(OpDef(
    name="isnan", arity=1, attrs={}, infer=lambda types, attrs: [types[0].__class__(types[0].shape, "bool")],
    ref=lambda xs, attrs: [np.isnan(xs[0])], pattern=Pattern.ELEMWISE, tags=frozenset({"elementwise", "unary"}),
))
register(OpDef(
    name="where", arity=3, attrs={}, infer=_where_infer,
    ref=lambda xs, attrs: [np.where(xs[0], xs[1], xs[2]).astype(xs[1].dtype)], pattern=Pattern.BROADCAST,
    tags=frozenset({"elementwise"}),
))


def _cast_infer(types, attrs):
    return [types[0].__class__(types[0].shape, attrs["dtype"])]


register(OpDef(
    name="cast", arity=1, attrs={"dtype": "float32"}, infer=_cast_infer,
    ref=lambda xs, attrs: [xs[0].astype(attrs["dtype"])],
    pattern=Pattern.ELEMWISE, tags=frozenset({"elementwise", "unary"}),
))
