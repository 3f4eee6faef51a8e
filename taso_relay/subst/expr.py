"""The small expression language of rules: attribute values and constraints.

Rules are data, so derived attributes (the split sizes after a concat) and
conditions (equal kernel sizes) are written as text, e.g.
``"=dim(w1, 0) + dim(w2, 0)"`` or ``"?groups == 1"``. Tensor names refer to
pattern inputs and nodes; ``?name`` refers to an attribute variable. Only a
whitelisted subset of Python syntax is accepted, and nothing is ``eval``-ed.
"""
from __future__ import annotations

import ast
import operator
import re
from functools import lru_cache
from typing import Any, Callable, Mapping

VAR_PREFIX = "?"
EXPR_PREFIX = "="
_VAR_RE = re.compile(r"\?([A-Za-z_][A-Za-z0-9_]*)")
_VAR_MANGLE = "V__"


class ExprError(ValueError):
    """A rule expression is malformed or refers to something unknown."""


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
           ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}


class Env:
    """What an expression can see: tensor shapes by name and variable bindings."""

    def __init__(self, shapes: Mapping[str, tuple], variables: Mapping[str, Any]):
        self.shapes = shapes
        self.variables = variables

    def shape(self, name: str) -> tuple:
        if name not in self.shapes:
            raise ExprError(f"unknown tensor '{name}'")
        return tuple(self.shapes[name])


def _functions(env: Env) -> dict[str, Callable]:
    return {
        "dim": lambda t, i: env.shape(t)[i],
        "rank": lambda t: len(env.shape(t)),
        "shape": lambda t: env.shape(t),
        "numel": lambda t: _prod(env.shape(t)),
        "sum": lambda xs: sum(xs),
        "len": len,
        "tuple": tuple,
        "min": min,
        "max": max,
    }


def _prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


@lru_cache(maxsize=4096)
def parse(text: str) -> ast.Expression:
    try:
        tree = ast.parse(_VAR_RE.sub(lambda m: _VAR_MANGLE + m.group(1), text), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"cannot parse expression '{text}': {exc.msg}") from None
    return tree


def variables_in(text: str) -> set[str]:
    return set(_VAR_RE.findall(text))


def tensors_in(text: str) -> set[str]:
    """Names used as tensor arguments of dim/rank/shape/numel."""
    names = set()
    for node in ast.walk(parse(text)):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
            names.add(node.args[0].id)
    return names


def evaluate(text: str, env: Env) -> Any:
    return _eval(parse(text).body, env, _functions(env))


def _eval(node, env, funcs):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id.startswith(_VAR_MANGLE):
            name = node.id[len(_VAR_MANGLE):]
            if name not in env.variables:
                raise ExprError(f"unbound variable '?{name}'")
            return env.variables[name]
        return node.id  # a tensor name, used as an argument of dim() and friends
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_eval(e, env, funcs) for e in node.elts)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, env, funcs), _eval(node.right, env, funcs))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, env, funcs)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _eval(node.operand, env, funcs)
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, env, funcs) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env, funcs)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, env, funcs)
            if type(op) not in _CMPOPS or not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Subscript):
        return _eval(node.value, env, funcs)[_eval(node.slice, env, funcs)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in funcs:
        return funcs[node.func.id](*(_eval(a, env, funcs) for a in node.args))
    raise ExprError(f"unsupported syntax in rule expression: {ast.dump(node)[:60]}")


def is_var(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(VAR_PREFIX) and _VAR_RE.fullmatch(value) is not None


def is_expr(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(EXPR_PREFIX)


def resolve(value: Any, env: Env) -> Any:
    """Turn an attribute template (literal, ?var, =expr, or a list of them) into a value."""
    if is_var(value):
        name = value[1:]
        if name not in env.variables:
            raise ExprError(f"unbound variable '{value}'")
        return env.variables[name]
    if is_expr(value):
        return evaluate(value[1:], env)
    if isinstance(value, (list, tuple)):
        return tuple(resolve(v, env) for v in value)
    return value
