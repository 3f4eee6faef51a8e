"""The immutable graph form and a builder for it.

A `Graph` is a tuple of nodes in topological order (every input edge points
to an earlier node), the output edges, and two side tables that are not part
of its identity: weight values by name and opaque payloads by key. Two graphs
are equal when their canonical hashes are equal, whatever order their nodes
were built in.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

from .ops import get_op
from .types import GraphError, ShapeError, TensorType


class Ref(NamedTuple):
    """An edge: output `index` of node number `node`."""

    node: int
    index: int = 0


@dataclass(frozen=True, slots=True)
class Node:
    op: str
    attrs: tuple[tuple[str, Any], ...]
    inputs: tuple[Ref, ...]
    types: tuple[TensorType, ...]

    def attr(self, name: str) -> Any:
        for key, value in self.attrs:
            if key == name:
                return value
        raise KeyError(f"{self.op} has no attribute '{name}'")

    @property
    def attr_dict(self) -> dict[str, Any]:
        return dict(self.attrs)

    def __str__(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.attrs if k not in ("types",))
        return f"{self.op}({shown})"


def make_node(op: str, inputs: Sequence[Ref], input_types: Sequence[TensorType], attrs: Mapping[str, Any]) -> Node:
    """Canonicalise attributes, check arity and infer output types."""
    opdef = get_op(op)
    if opdef.arity is not None and len(inputs) != opdef.arity:
        raise ShapeError(f"{op}: expects {opdef.arity} inputs, got {len(inputs)}")
    given = dict(attrs)
    if opdef.canon is not None:
        filled = dict(opdef.normalize_attrs(given))
        try:
            # Check the spelling given first: canonicalisation wraps axes modulo the rank,
            # which would silently accept an out-of-range axis.
            opdef.infer(list(input_types), dict(filled))
            given = opdef.canon(list(input_types), filled)
        except (IndexError, ZeroDivisionError, TypeError) as exc:
            raise ShapeError(f"{op}: bad attributes {given}: {exc}") from None
    frozen = opdef.normalize_attrs(given)
    types = opdef.infer(list(input_types), dict(frozen))
    return Node(op, frozen, tuple(Ref(*r) for r in inputs), tuple(types))


def _digest(*parts: Any) -> str:
    return hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest()


@dataclass(frozen=True, eq=False)
class Graph:
    nodes: tuple[Node, ...]
    outputs: tuple[Ref, ...]
    values: Mapping[str, Any] = field(default_factory=dict)
    payloads: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        for i, node in enumerate(self.nodes):
            for ref in node.inputs:
                if not (0 <= ref.node < i and 0 <= ref.index < len(self.nodes[ref.node].types)):
                    raise GraphError(f"node {i} ({node.op}) has a bad or forward input edge {tuple(ref)}")
        for ref in self.outputs:
            if not (0 <= ref.node < len(self.nodes) and 0 <= ref.index < len(self.nodes[ref.node].types)):
                raise GraphError(f"bad output edge {tuple(ref)}")

    # ---- identity -----------------------------------------------------
    @property
    def node_hashes(self) -> tuple[str, ...]:
        """Merkle hash per node: operator, attributes and the hashes of its inputs."""
        cached = self.__dict__.get("_node_hashes")
        if cached is None:
            hashes: list[str] = []
            for node in self.nodes:
                hashes.append(_digest(node.op, node.attrs, tuple((hashes[r.node], r.index) for r in node.inputs)))
            cached = tuple(hashes)
            object.__setattr__(self, "_node_hashes", cached)
        return cached

    @property
    def hash(self) -> str:
        """Canonical hash: independent of node order, dependent on outputs' order."""
        cached = self.__dict__.get("_hash")
        if cached is None:
            hs = self.node_hashes
            cached = _digest(tuple((hs[r.node], r.index) for r in self.outputs), tuple(sorted(hs)))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __eq__(self, other) -> bool:
        return isinstance(other, Graph) and self.hash == other.hash

    def __hash__(self) -> int:
        return int(self.hash[:16], 16)

    # ---- queries --------------------------------------------------------
    def type_of(self, ref: Ref) -> TensorType:
        return self.nodes[ref.node].types[ref.index]

    @property
    def output_types(self) -> list[TensorType]:
        return [self.type_of(r) for r in self.outputs]

    def nodes_of(self, op: str) -> list[int]:
        return [i for i, n in enumerate(self.nodes) if n.op == op]

    @property
    def inputs(self) -> list[int]:
        return self.nodes_of("input")

    @property
    def input_names(self) -> list[str]:
        return [self.nodes[i].attr("name") for i in self.inputs]

    @property
    def users(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """users[i] lists (consumer node, operand position) for every use of node i."""
        cached = self.__dict__.get("_users")
        if cached is None:
            acc: list[list[tuple[int, int]]] = [[] for _ in self.nodes]
            for j, node in enumerate(self.nodes):
                for pos, ref in enumerate(node.inputs):
                    acc[ref.node].append((j, pos))
            cached = tuple(tuple(u) for u in acc)
            object.__setattr__(self, "_users", cached)
        return cached

    @property
    def readers(self) -> tuple[int, ...]:
        """readers[i]: how many reads node i's values have, the graph's outputs counted (a value nothing else
        reads may be rewritten away)."""
        cached = self.__dict__.get("_readers")
        if cached is None:
            counts = [len(u) for u in self.users]
            for r in self.outputs:
                counts[r.node] += 1
            cached = tuple(counts)
            object.__setattr__(self, "_readers", cached)
        return cached

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.op] = counts.get(n.op, 0) + 1
        return counts

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        return f"Graph({len(self.nodes)} nodes, outputs={list(map(tuple, self.outputs))}, hash={self.hash[:8]})"

    def pretty(self) -> str:
        lines = []
        for i, node in enumerate(self.nodes):
            args = ", ".join(f"%{r.node}" + (f".{r.index}" if r.index else "") for r in node.inputs)
            types = ", ".join(map(str, node.types))
            lines.append(f"%{i} = {node}({args}) : {types}")
        lines.append("return " + ", ".join(f"%{r.node}.{r.index}" for r in self.outputs))
        return "\n".join(lines)

    # ---- construction ---------------------------------------------------
    def rebuilt(self, nodes: Sequence[Node], outputs: Sequence[Ref]) -> "Graph":
        """A graph with other nodes but the same side tables; dead nodes dropped, order repaired."""
        return compact(nodes, outputs, self.values, self.payloads)


def compact(nodes: Sequence[Node], outputs: Sequence[Ref], values=None, payloads=None,
            keep_inputs: bool = True) -> Graph:
    """Topologically order the live nodes (and every graph input) and renumber edges."""
    nodes = list(nodes)
    live = set()
    stack = [r.node for r in outputs]
    if keep_inputs:
        stack += [i for i, n in enumerate(nodes) if n.op == "input"]
    while stack:
        i = stack.pop()
        if i in live:
            continue
        live.add(i)
        stack.extend(r.node for r in nodes[i].inputs)
    order = post_order(sorted(live), lambda i: nodes[i].inputs,
                       lambda i: GraphError(f"cycle through node {i} ({nodes[i].op})"))
    new_index = {old: new for new, old in enumerate(order)}
    new_nodes = []
    for old in order:
        n = nodes[old]
        new_nodes.append(Node(n.op, n.attrs, tuple(Ref(new_index[r.node], r.index) for r in n.inputs), n.types))
    new_outputs = tuple(Ref(new_index[r.node], r.index) for r in outputs)
    return Graph(tuple(new_nodes), new_outputs, dict(values or {}), dict(payloads or {}))


def post_order(roots: Iterable[int], operands: Callable[[int], Sequence[Ref]],
               on_cycle: Callable[[int], Exception]) -> list[int]:
    """Iterative depth-first post-order from `roots` (in their order, so an existing order is
    mostly kept); raises on_cycle(node) when a node depends on itself."""
    state: dict[int, int] = {}  # 1: on the stack, 2: placed
    order: list[int] = []
    for root in roots:
        if root in state:
            continue
        stack = [(root, False)]
        while stack:
            i, expanded = stack.pop()
            if expanded:
                state[i] = 2
                order.append(i)
                continue
            if state.get(i) == 2:
                continue
            state[i] = 1
            stack.append((i, True))
            for r in reversed(operands(i)):
                s = state.get(r.node)
                if s == 1:
                    raise on_cycle(r.node)
                if s is None:
                    stack.append((r.node, False))
    return order


class GraphBuilder:
    """Mutable construction of a Graph, checking shapes at every step."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.values: dict[str, Any] = {}
        self.payloads: dict[str, Any] = {}

    def type_of(self, ref: Ref) -> TensorType:
        return self.nodes[ref.node].types[ref.index]

    def add(self, op: str, inputs: Sequence[Ref] = (), **attrs) -> Node:
        inputs = [Ref(*r) for r in inputs]
        node = make_node(op, inputs, [self.type_of(r) for r in inputs], attrs)
        self.nodes.append(node)
        return node

    def op(self, op: str, *inputs: Ref, **attrs):
        """Add an operator; returns a Ref, or a tuple of Refs for multi-output operators."""
        node = self.add(op, inputs, **attrs)
        i = len(self.nodes) - 1
        if len(node.types) == 1 and op not in ("split", "opaque"):
            return Ref(i, 0)
        return tuple(Ref(i, k) for k in range(len(node.types)))

    def input(self, name: str, shape: Iterable[int], dtype: str = "float32") -> Ref:
        return self.op("input", name=name, shape=tuple(shape), dtype=dtype)

    def weight(self, name: str, shape: Iterable[int], dtype: str = "float32", value=None) -> Ref:
        if value is not None:
            self.values[name] = value
        return self.op("weight", name=name, shape=tuple(shape), dtype=dtype)

    def constant(self, kind: str, shape: Iterable[int], dtype: str = "float32") -> Ref:
        return self.op("constant", kind=kind, shape=tuple(shape), dtype=dtype)

    def opaque(self, inputs: Sequence[Ref], types: Sequence[TensorType], payload: Any, key: str,
               label: str = "") -> tuple[Ref, ...]:
        self.payloads[key] = payload
        spec = tuple((tuple(t.shape), t.dtype) for t in types)
        return self.op("opaque", *inputs, ref=key, types=spec, label=label)

    def build(self, outputs: Sequence[Ref]) -> Graph:
        return Graph(tuple(self.nodes), tuple(Ref(*r) for r in outputs), dict(self.values), dict(self.payloads))
