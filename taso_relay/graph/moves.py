"""A chain of transposes and reshapes read as one transpose of its input's axes, and written back shorter.

Moving data is exact whatever the values: each element of a chain's input lands in one place of its output.
Following the input's axes through the chain (splitting one where a reshape cuts it) gives that map as a
reshape of the input into finer axes, one transpose of them, and a reshape to the output; where the
transpose keeps the order the chain is one reshape. The layout step leaves such chains where an NHWC value
meets a reshape written for NCHW (an attention block's reshape to tokens, a detection head's output
reshapes, a flatten after global pooling). Each chain written shorter is first checked on the positions of
every element (`same_moves`), so no chain is replaced by one that moves anything elsewhere.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .folding import weight_only
from .graph import Graph, Node, Ref, make_node

MOVES = ("transpose", "reshape", "squeeze", "expand_dims")
Step = tuple[str, dict]  # an operator of MOVES and its attributes
MAX_CHAIN = 8  # moves followed back from a chain's end
MAX_CHECKED = 1 << 23  # elements: a chain of a larger input is left as it is rather than replaced unchecked
NCHW, NHWC = (0, 3, 1, 2), (0, 2, 3, 1)


def _steps_of(nodes: Sequence[Node]) -> list[Step]:
    """The chain's nodes as steps; squeeze and expand_dims are reshapes to their outputs."""
    return [("transpose", {"perm": tuple(n.attr("perm"))}) if n.op == "transpose"
            else ("reshape", {"shape": n.types[0].shape}) for n in nodes]


def axes_map(shape: Sequence[int], steps: Sequence[Step]) -> Optional[tuple[list[int], list[list[int]]]]:
    """The chain as (axes, groups): `shape` split row-major into the axis sizes `axes`; the output's dims,
    each the list of those axes (by position in `axes`) it is made of, outermost first. None where a reshape
    cuts an axis unevenly ((6, 4) reshaped to (4, 6): the 6 would be cut at 4)."""
    sizes: list[int] = [d for d in shape if d != 1]  # axis id -> size; ids are stable, positions are `order`
    order = list(range(len(sizes)))  # the input's axes in row-major order
    ids = iter(range(len(sizes)))
    dims = [[next(ids)] if d != 1 else [] for d in shape]
    for op, attrs in steps:
        if op == "transpose":
            dims = [dims[p] for p in attrs["perm"]]
            continue
        flat, dims = [a for dim in dims for a in dim], []
        for target in attrs["shape"]:
            dim, size = [], 1
            while size < target:
                a = flat.pop(0)
                if size * sizes[a] > target:  # the reshape cuts axis a: split it, outer part first
                    if target % size or sizes[a] % (target // size):
                        return None
                    outer, inner = target // size, sizes[a] // (target // size)
                    sizes[a] = outer
                    sizes.append(inner)
                    order.insert(order.index(a) + 1, len(sizes) - 1)
                    flat.insert(0, len(sizes) - 1)
                dim.append(a)
                size *= sizes[a]
            if size != target:
                return None
            dims.append(dim)
        if flat:
            return None
    position = {a: k for k, a in enumerate(order)}
    return [sizes[a] for a in order], [[position[a] for a in dim] for dim in dims]


def shorter_forms(shape: Sequence[int], out: Sequence[int], steps: Sequence[Step]) -> list[list[Step]]:
    """Chains of at most reshape, transpose, reshape that move data as `steps` do from `shape` to `out`,
    fewest transposes and nodes first. Empty where the axes cannot be followed."""
    mapped = axes_map(shape, steps)
    if mapped is None:
        return []
    axes, groups = mapped
    moved = [a for dim in groups for a in dim]  # the axes in the output's row-major order
    if moved == sorted(moved):
        return [[("reshape", {"shape": tuple(out)})] if tuple(out) != tuple(shape) else []]
    forms = [f for f in (_reshape_transpose(shape, out, groups), _transpose_reshape(shape, out, axes, groups))
             if f is not None]
    # the general form: axes next to each other on both sides merged, transposed, then reshaped
    merged: list[list[int]] = []
    for a in moved:
        if merged and merged[-1][-1] + 1 == a:
            merged[-1].append(a)
        else:
            merged.append([a])
    runs = sorted(merged)
    split = tuple(int(np.prod([axes[a] for a in run])) for run in runs)
    perm = tuple(runs.index(run) for run in merged)
    general = ([] if split == tuple(shape) else [("reshape", {"shape": split})]) + [("transpose", {"perm": perm})]
    general += [] if tuple(split[p] for p in perm) == tuple(out) else [("reshape", {"shape": tuple(out)})]
    unique = [f for k, f in enumerate(forms + [general]) if f not in (forms + [general])[:k]]
    return sorted(unique, key=lambda f: (_transposes(f), len(f)))


def _reshape_transpose(shape, out, groups) -> Optional[list[Step]]:
    """Reshape, then transpose to `out`: where each output dim is axes next to each other in the input."""
    if not _consecutive(groups):
        return None
    ranked = _ranked(groups)
    split = tuple(out[k] for k in ranked)
    perm = tuple(ranked.index(k) for k in range(len(groups)))
    return ([] if split == tuple(shape) else [("reshape", {"shape": split})]) + [("transpose", {"perm": perm})]


def _transpose_reshape(shape, out, axes, groups) -> Optional[list[Step]]:
    """Transpose, then reshape to `out`: where each input dim's axes stay next to each other in the output."""
    where = {a: k for k, a in enumerate(a for dim in groups for a in dim)}
    spans, start = [], 0  # each input dim's axes, placed where the output has them
    for d in shape:
        count = 0 if d == 1 else _count(axes, start, d)
        spans.append([where[a] for a in range(start, start + count)])
        start += count
    if not _consecutive(spans):
        return None
    perm = tuple(_ranked(spans))
    transposed = tuple(shape[p] for p in perm)
    return [("transpose", {"perm": perm})] + ([] if transposed == tuple(out) else [("reshape", {"shape": tuple(out)})])


def _consecutive(lists) -> bool:
    return all(xs == list(range(xs[0], xs[0] + len(xs))) for xs in lists if xs)


def _ranked(lists) -> list[int]:
    """The lists' indices ordered by their first elements; an empty one (a dim of size 1) stays after the one
    before it."""
    key, last = [], -1.0
    for xs in lists:
        last = xs[0] if xs else last + 1e-3
        key.append(last)
    return sorted(range(len(lists)), key=lambda k: key[k])


def _count(axes, start, size) -> int:
    """How many of `axes` from `start` on multiply to `size` (an input dim split into them)."""
    k, n = start, 1
    while n < size:
        n *= axes[k]
        k += 1
    return k - start


def _transposes(steps: Sequence[Step]) -> int:
    return sum(op == "transpose" for op, _ in steps)


def moved(shape: Sequence[int], steps: Sequence[Step]) -> np.ndarray:
    """Where each output element of the chain comes from: the chain applied to the positions of `shape`."""
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)  # MAX_CHECKED: 32 MiB at most
    for op, attrs in steps:
        x = np.transpose(x, attrs["perm"]) if op == "transpose" else np.reshape(x, attrs["shape"])
    return x


def same_moves(shape: Sequence[int], a: Sequence[Step], b: Sequence[Step]) -> bool:
    """Whether chains `a` and `b` send every element of a `shape` tensor to the same place."""
    x, y = moved(shape, a), moved(shape, b)
    return x.shape == y.shape and bool(np.array_equal(x, y))


def _score(steps: Sequence[Step], layout: bool) -> tuple:
    """Fewer transposes, then fewer nodes; for the layout step then a lone NHWC-to-NCHW transpose last (which
    its rules carry on down) or NCHW-to-NHWC first (which cancels a transpose before it) over other forms."""
    placed = (len(steps) and _transposes(steps) == 1 and
              ((steps[-1][0] == "transpose" and tuple(steps[-1][1]["perm"]) == NCHW)
               or (steps[0][0] == "transpose" and tuple(steps[0][1]["perm"]) == NHWC)))
    return (_transposes(steps), len(steps), 0 if placed or not layout else 1)


def collapse_moves(graph: Graph, layout: bool = False, carried: frozenset = frozenset()) -> tuple[Graph, list[str]]:
    """`graph` with each chain of moves that a shorter chain does alike (`_score`) replaced by it; each
    replacement described (`describe`). `layout`: for the layout step, whose rules carry a transpose to NCHW
    down through the `carried` operators (`_scored_forms`).

    A chain ends at a move not read by exactly one other move; it starts as far back as moves go (MAX_CHAIN),
    and the nodes that die are those after the last one something else reads too. Chains of weights are
    left to FoldConstant."""
    readers = graph.readers
    folded = weight_only(graph)
    replaced: dict[int, tuple[Ref, list[Step]]] = {}
    for end, node in enumerate(graph.nodes):
        if node.op in MOVES and not folded[end] and not (readers[end] == 1 and graph.users[end]
                                                         and graph.nodes[graph.users[end][0][0]].op in MOVES):
            best = _best_collapse(graph, end, readers, layout, carried)
            if best is not None:
                replaced[end] = best
    if not replaced:
        return graph, []
    nodes, final = list(graph.nodes), {}
    for end, (ref, steps) in replaced.items():
        for op, attrs in steps:  # appended after the graph's nodes; rebuilt() puts them in order
            nodes.append(make_node(op, [ref], [nodes[ref.node].types[ref.index]], attrs))
            ref = Ref(len(nodes) - 1, 0)
        final[end] = ref

    def resolved(ref: Ref) -> Ref:
        while ref.node in final:  # a chain's input may end another chain
            ref = final[ref.node]
        return ref

    nodes = [Node(n.op, n.attrs, tuple(map(resolved, n.inputs)), n.types)
             if any(r.node in final for r in n.inputs) else n for n in nodes]
    said = [describe(graph, end, source, steps) for end, (source, steps) in replaced.items()]
    return graph.rebuilt(nodes, [resolved(r) for r in graph.outputs]), said


def describe(graph: Graph, end: int, source: Ref, steps: Sequence[Step]) -> str:
    """A replacement as the report shows it: the moves from `source` to `end`, and what replaced them."""
    chain, i = [], end
    while True:
        chain.insert(0, f"{graph.nodes[i].op}%{i}")
        if graph.nodes[i].inputs[0] == source:
            break
        i = graph.nodes[i].inputs[0].node
    written = " -> ".join(f"{op}{list(a.get('perm', a.get('shape')))}" for op, a in steps) or "nothing"
    return f"{' -> '.join(chain)}:{graph.nodes[end].types[0]} of {graph.type_of(source)} => {written}"


def _best_collapse(graph: Graph, end: int, readers: Sequence[int], layout: bool,
                   carried: frozenset) -> Optional[tuple[Ref, list[Step]]]:
    """The chain's input and the shorter chain that replaces the moves ending at `end`, if one scores better
    than the moves it would remove; of several starts, the one that gains most."""
    chain = [end]
    while len(chain) < MAX_CHAIN and graph.nodes[graph.nodes[chain[0]].inputs[0].node].op in MOVES:
        chain.insert(0, graph.nodes[chain[0]].inputs[0].node)
    out = graph.nodes[end].types[0].shape
    best, most = None, (0, 0, 0)
    meets = bool(carried) and _meets_nhwc(graph, end, carried)  # (the chain's end is the same for every start)
    for start in range(len(chain)):  # down to the last move alone: a transpose of size-1 axes is a reshape
        segment = [graph.nodes[i] for i in chain[start:]]
        source = segment[0].inputs[0]
        shape = graph.type_of(source).shape
        if int(np.prod(shape)) > MAX_CHECKED:
            continue
        shared = [k for k, i in enumerate(chain[start:-1]) if readers[i] > 1]
        old = _score(_steps_of(segment[shared[-1] + 1:] if shared else segment), layout)
        steps = _steps_of(segment)
        for form, new in _scored_forms(shape, out, steps, layout, meets):
            gain = tuple(o - n for o, n in zip(old, new))
            if gain > most and form != steps and same_moves(shape, steps, form):
                best, most = (source, form), gain
    return best


def _meets_nhwc(graph: Graph, end: int, carried: frozenset, depth: int = 8) -> bool:
    """Whether the value `end` computes reaches a transpose to NHWC (a converted conv's input) through `carried`
    operators only (those the layout rules carry a transpose through)."""
    seen, frontier = set(), [end]
    for _ in range(depth):
        frontier = [u for i in frontier for u, _ in graph.users[i] if u not in seen]
        seen.update(frontier)
        if any(graph.nodes[u].op == "transpose" and tuple(graph.nodes[u].attr("perm")) == NHWC for u in frontier):
            return True
        frontier = [u for u in frontier if graph.nodes[u].op in carried]
    return False


def _scored_forms(shape, out, steps, layout, meets: bool = False) -> list[tuple[list[Step], tuple]]:
    """The shorter forms of `steps` with their scores; in the layout step, where the chain reads an NHWC value as
    NCHW first and its result meets NHWC again (`meets`: MobileViT's unfolding of a conv's output into patches
    that 1x1 convs read), also the forms that move the data to the output read in NHWC and end with the
    transpose to NCHW, which the layout rules carry on down to cancel: that transpose counts as the one the
    chain started with, moved."""
    forms = [(f, _score(f, layout)) for f in shorter_forms(shape, out, steps)]
    if meets and len(out) == 4 and len(steps) > 1 and steps[0] == ("transpose", {"perm": NCHW}):
        nhwc_out = tuple(out[p] for p in NHWC)
        forms += [(f + [("transpose", {"perm": NCHW})], (_transposes(f), len(f), 0))
                  for f in shorter_forms(shape, nhwc_out, list(steps) + [("transpose", {"perm": NHWC})])
                  if f[:1] != steps[:1]]  # (a chain written so would be offered this again: once is enough)
    return forms
