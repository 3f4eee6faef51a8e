"""A kernel: the nodes of one fused TVM function, and its workload key.

The workload key identifies what is timed, not where it sits: the kernel's
operators and attributes in order, the shapes and dtypes of the tensors it reads
(and which of them are weights, i.e. compile-time constants, and which are
activations), and which values leave it. Two kernels with equal keys cost the
same on a target, whatever graph they come from, so costs are memoised by it.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

from ..graph import Graph, Node, Ref, TensorType


@dataclass(frozen=True, eq=False)
class Kernel:
    graph: Graph
    nodes: tuple[int, ...]  # member nodes, topological order
    inputs: tuple[Ref, ...]  # tensors read from outside, in order of first use
    weights: tuple[bool, ...]  # per input: a weight (constant at compile time) or an activation
    outputs: tuple[Ref, ...]  # member values used outside the kernel or returned
    signature: tuple  # canonical, hashable: the memo key

    @cached_property
    def key(self) -> str:
        """Stable workload digest (the on-disk cache key)."""
        return hashlib.blake2b(repr(self.signature).encode(), digest_size=16).hexdigest()

    def __eq__(self, other) -> bool:
        return isinstance(other, Kernel) and self.signature == other.signature

    def __hash__(self) -> int:
        return hash(self.signature)

    @property
    def ops(self) -> list[str]:
        return [self.graph.nodes[i].op for i in self.nodes]

    @property
    def label(self) -> str:
        """Readable name in the style of TVM's fused functions, e.g. conv2d+add+relu."""
        return "+".join(self.ops)

    @property
    def input_types(self) -> list[TensorType]:
        return [self.graph.type_of(r) for r in self.inputs]

    @property
    def output_types(self) -> list[TensorType]:
        return [self.graph.type_of(r) for r in self.outputs]

    def describe(self) -> str:
        ins = ", ".join(("w" if w else "a") + str(list(t.shape)) for w, t in zip(self.weights, self.input_types))
        outs = ", ".join(str(list(t.shape)) for t in self.output_types)
        return f"{self.label}({ins}) -> {outs}"

    def subgraph(self, input_prefix: str = "a", weight_prefix: str = "w") -> Graph:
        """The kernel alone: activations become inputs a0.., weights become weights w0.. (no values)."""
        nodes: list[Node] = []
        where: dict[Ref, Ref] = {}
        na = nw = 0
        for ref, is_weight in zip(self.inputs, self.weights):
            t = self.graph.type_of(ref)
            if is_weight:
                name, nw = f"{weight_prefix}{nw}", nw + 1
            else:
                name, na = f"{input_prefix}{na}", na + 1
            op = "weight" if is_weight else "input"
            nodes.append(Node(op, (("dtype", t.dtype), ("name", name), ("shape", t.shape)), (), (t,)))
            where[ref] = Ref(len(nodes) - 1, 0)
        local: dict[int, int] = {}
        for i in self.nodes:
            node = self.graph.nodes[i]
            ins = tuple(Ref(local[r.node], r.index) if r.node in local else where[r] for r in node.inputs)
            nodes.append(Node(node.op, node.attrs, ins, node.types))
            local[i] = len(nodes) - 1
        outputs = tuple(Ref(local[r.node], r.index) for r in self.outputs)
        return Graph(tuple(nodes), outputs, {}, self.graph.payloads)


def make_kernel(graph: Graph, members: Sequence[int], weight_only: Sequence[bool], opaque=None) -> Kernel:
    """The kernel made of `members`; `opaque` (an OpaqueInfo) gives opaque calls a content key."""
    member_pos = {i: k for k, i in enumerate(members)}
    inputs: list[Ref] = []
    input_pos: dict[Ref, int] = {}
    body = []
    for i in members:
        node = graph.nodes[i]
        enc = []
        for r in node.inputs:
            k = member_pos.get(r.node)
            if k is not None:
                enc.append((k, r.index))
            else:
                pos = input_pos.get(r)
                if pos is None:
                    pos = input_pos[r] = len(inputs)
                    inputs.append(r)
                enc.append((-1, pos))
        attrs = node.attrs
        if node.op == "opaque" and opaque is not None:
            attrs = (("key", opaque.key(graph, i)), ("types", node.attr("types")))
        body.append((node.op, attrs, tuple(enc)))
    users = graph.users
    returned = set(graph.outputs)
    outputs = []
    for i in members:
        node = graph.nodes[i]
        for idx in range(len(node.types)):
            ref = Ref(i, idx)
            if ref in returned or any(c not in member_pos and graph.nodes[c].inputs[p].index == idx
                                      for c, p in users[i]):
                outputs.append(ref)
    weights = tuple(bool(weight_only[r.node]) for r in inputs)
    ext = tuple((t.shape, t.dtype, w) for t, w in zip((graph.type_of(r) for r in inputs), weights))
    outs = tuple((member_pos[r.node], r.index) for r in outputs)
    signature = (tuple(body), ext, outs)
    return Kernel(graph, tuple(members), tuple(inputs), weights, tuple(outputs), signature)
