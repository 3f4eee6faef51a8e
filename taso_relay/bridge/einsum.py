"""A two-operand einsum read as transposes, reshapes and one (batched) matmul.

Attention is often written as einsum ("bhid,bhjd->bhij"): PyTorch's Relax frontend keeps it as
`relax.einsum` and TVM's ONNX importer as a call_tir of topi's einsum. Either was an opaque node, so the
search saw nothing of attention in such models (MaxViT: 44 of them). Every index of such an einsum is
a batch index (both operands and the output), a contracted one (both operands only) or a free index
of one operand (that operand and the output); the operands are then permuted to (batch, free,
contracted) and (batch, contracted, free), flattened to three axes and multiplied. Anything else (an
index summed in one operand only, a repeated index, broadcasting) is not read: `plan` returns None.
"""
from __future__ import annotations

from math import prod

Step = tuple  # (graph op, attrs, inputs): an input k < 2 is operand k, k >= 2 is step k - 2's output


def parse(equation: str, ranks: tuple[int, int]) -> tuple[str, str, str] | None:
    """(a, b, out) index strings, '...' spelled out with fresh letters; None if not two operands."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    ops = lhs.split(",")
    if len(ops) != 2:
        return None
    used = set(eq) - set(".,->")
    fresh = [c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in used]
    ell_ranks = [r - len(op.replace("...", "")) for op, r in zip(ops, ranks)]
    width = max([n for op, n in zip(ops, ell_ranks) if "..." in op] or [0])
    if width > len(fresh) or any(n < 0 for n in ell_ranks):
        return None
    ell = "".join(fresh[:width])
    spelled = []
    for op, n in zip(ops, ell_ranks):
        if "..." in op:
            op = op.replace("...", ell[width - n:])  # numpy aligns the ellipses' dimensions on the right
        spelled.append(op)
    if not arrow:  # implicit output: the ellipsis, then the indices used once, in alphabetical order
        once = sorted(c for c in set(lhs) - set(".,") if lhs.count(c) == 1)
        out = ell + "".join(once)
    elif "..." in out:
        out = out.replace("...", ell)
    elif width:
        return None  # the ellipsis's dimensions summed away: numpy refuses it, TVM cannot build it
    a, b = spelled
    if any(not s.isalpha() for s in (a, b)) or (out and not out.isalpha()):
        return None
    return a, b, out


def plan(equation: str, shape_a: tuple, shape_b: tuple) -> list[Step] | None:
    """Steps computing einsum(equation, A, B) with transpose, reshape and matmul; None if not read."""
    parsed = parse(equation, (len(shape_a), len(shape_b)))
    if parsed is None:
        return None
    a, b, out = parsed
    if len(a) != len(shape_a) or len(b) != len(shape_b):
        return None
    if len(set(a)) != len(a) or len(set(b)) != len(b) or len(set(out)) != len(out) or set(out) - set(a + b):
        return None
    size = dict(zip(a, shape_a))
    if any(size.get(c, d) != d for c, d in zip(b, shape_b)):
        return None  # a shared index of two sizes: broadcasting, not read
    size.update(zip(b, shape_b))
    batch = [c for c in out if c in a and c in b]
    contracted = [c for c in a if c in b and c not in out]
    free_a = [c for c in a if c not in b and c in out]
    free_b = [c for c in b if c not in a and c in out]
    if len(batch) + len(contracted) + len(free_a) != len(a) or len(batch) + len(contracted) + len(free_b) != len(b):
        return None  # an index summed in one operand only
    steps: list[Step] = []
    lead = tuple(size[c] for c in batch)

    def arrange(k: int, idx: str, order: list, shape: tuple) -> int:
        src = k
        perm = tuple(idx.index(c) for c in order)
        if perm != tuple(range(len(perm))):
            steps.append(("transpose", {"perm": perm}, (src,)))
            src = len(steps) + 1
        if tuple(size[c] for c in order) != shape:
            steps.append(("reshape", {"shape": shape}, (src,)))
            src = len(steps) + 1
        return src

    rows = prod(size[c] for c in free_a)
    inner = prod(size[c] for c in contracted)
    cols = prod(size[c] for c in free_b)
    left = arrange(0, a, batch + free_a + contracted, lead + (rows, inner))
    right = arrange(1, b, batch + contracted + free_b, lead + (inner, cols))
    steps.append(("matmul", {}, (left, right)))
    result = len(steps) + 1
    order = batch + free_a + free_b
    if lead + (rows, cols) != tuple(size[c] for c in order):
        steps.append(("reshape", {"shape": tuple(size[c] for c in order)}, (result,)))
        result = len(steps) + 1
    perm = tuple(order.index(c) for c in out)
    if perm != tuple(range(len(perm))):
        steps.append(("transpose", {"perm": perm}, (result,)))
    return steps
