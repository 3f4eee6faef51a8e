"""Applying a match: the target replaces the source, or the rewrite is rejected with a reason.

Replacement adds the target's nodes that something reads, redirects every use of each
mapped source output (graph outputs included) to the corresponding target output,
and drops what became dead: the matched nodes, and upstream nodes that only
they used. Graph inputs stay even when unused, so the signature never changes.

A rewrite is rejected (`RewriteRejected`, with the reason) when an unmapped
intermediate of the match is used outside it, or when the result would have a
cycle -- e.g. merging two matmuls where one's operand is computed from the
other's output. The result carries the index map from the old graph to the
new one and the set of nodes whose neighbourhood changed, which is what
incremental matching and costing need.

The work is proportional to the graph's size only in its cheap parts (one
pass that renumbers edges): dead nodes are found from the match upwards, the
target is inserted in place when every operand precedes every use (the
common case; a full topological sort, which also finds cycles, otherwise),
and node hashes upstream of the rewrite are reused from the old graph.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..graph import Graph, Node, Ref
from ..graph.graph import _digest, post_order
from ..graph.types import GraphError
from .index import GraphIndex, index_of, seed_index
from .match import Match, check_context


class RewriteRejected(GraphError):
    """A match that may not be applied; str(exc) says why."""


@dataclass(frozen=True, eq=False)
class Rewrite:
    graph: Graph
    matches: tuple[Match, ...]  # applied together (one, unless apply_many)
    old_to_new: tuple[int, ...]  # node i of the old graph is node old_to_new[i] here, or -1 (removed)
    added: frozenset[int]  # the targets' nodes
    dirty: frozenset[int]  # added nodes and surviving nodes whose operands were redirected
    origins: tuple[tuple[int, int, int], ...] = ()  # (added node, position in matches, node of that target)

    @property
    def match(self) -> Match:
        return self.matches[0]


def apply(graph: Graph, match: Match, *, check: bool = True) -> Rewrite:
    """Replace `match` in `graph` by the rule's target. Raises RewriteRejected.

    check=False skips the context checks (escaping intermediates, weight-only
    inputs) for a caller that has just made them; an intermediate still in use
    and cycles are refused regardless.
    """
    return apply_many(graph, [match], check=check)


def apply_many(graph: Graph, matches, *, check: bool = True) -> Rewrite:
    """Apply several matches of `graph` at once, in one pass over the graph.

    The matches must not share nodes, and none may bind a value another one
    replaces (matches a few edges apart are fine); RewriteRejected otherwise.
    """
    matches = tuple(matches)
    if check:
        for match in matches:
            reason = check_context(match, graph)
            if reason is not None:
                raise RewriteRejected(reason)
    nodes = graph.nodes
    n = len(nodes)
    users = index_of(graph).users
    seen: set[int] = set()
    for match in matches:
        if not seen.isdisjoint(match.nodes):
            raise RewriteRejected(f"matches of rules {matches[0].rule.id} and {match.rule.id} overlap")
        seen.update(match.nodes)

    # Every match's target gets ids n + offset + j; its operands are graph refs or such ids.
    redirect: dict[Ref, Ref] = {}
    target_ops: list[tuple[Ref, ...]] = []
    target_nodes: list[Node] = []
    groups: list[tuple[Match, list[int]]] = []  # each match with the ids of its live target nodes
    offsets: list[int] = []
    for match in matches:
        target = match.target
        k, offset = target.n_inputs, n + len(target_nodes)
        offsets.append(offset)

        def tref(r: Ref, match=match, k=k, offset=offset) -> Ref:
            return match.inputs[r.node] if r.node < k else Ref(offset + r.node - k, r.index)

        outs = [tref(t) for t in target.outputs]
        redirect.update(zip(match.source_outputs, outs))
        target_ops.extend(tuple(tref(r) for r in t.inputs) for t in target.nodes)
        target_nodes.extend(target.nodes)
        needed = [t for src, t in zip(match.source_outputs, outs) if _read_outside(graph, users, match, src)]
        groups.append((match, _live_targets(n, target_ops, needed)))
    returned = [r for r in redirect.values() if r.node < n]  # target outputs that are match inputs
    dead = _dead_after(graph, users, matches, target_ops, returned)

    operands: dict[int, tuple[Ref, ...]] = {}  # nodes whose operands change
    insert_at: list[tuple[int, list[int]]] = []  # (old position, target ids to place just before it)
    in_place = True
    for match, live in groups:
        first_user = n
        for src in match.source_outputs:
            for user, _pos in users[src.node]:
                if user not in dead:
                    if user not in operands:
                        operands[user] = tuple(redirect.get(r, r) for r in nodes[user].inputs)
                    first_user = min(first_user, user)
        for gid in live:
            operands[gid] = target_ops[gid - n]
        last_operand = max((r.node for gid in live for r in target_ops[gid - n] if r.node < n), default=-1)
        in_place = in_place and last_operand < first_user
        insert_at.append((first_user, live))
    outputs = tuple(redirect.get(r, r) for r in graph.outputs)
    _check_nothing_lost(graph, users, matches, dead, operands, outputs)

    if in_place:  # every target fits before its first use: no reordering, no cycle possible
        order: list[int] = []
        insert_at.sort(key=lambda item: item[0])
        prev = 0
        for pos, live in insert_at:
            order.extend(j for j in range(prev, pos) if j not in dead)
            order.extend(live)
            prev = pos
        order.extend(j for j in range(prev, n) if j not in dead)
    else:
        order = _toposort([j for j in range(n) if j not in dead] + [g for _m, live in groups for g in live],
                          lambda gid: operands[gid] if gid in operands else nodes[gid].inputs, matches[0])

    new_index = {gid: i for i, gid in enumerate(order)}
    new_nodes: list[Node] = []
    for gid in order:
        if gid >= n:
            t = target_nodes[gid - n]
            new_nodes.append(Node(t.op, t.attrs, tuple(Ref(new_index[r.node], r.index) for r in operands[gid]),
                                  t.types))
            continue
        node = nodes[gid]
        refs = operands.get(gid)
        if refs is None and gid == new_index[gid] and all(new_index[r.node] == r.node for r in node.inputs):
            new_nodes.append(node)
        else:
            refs = node.inputs if refs is None else refs
            new_nodes.append(Node(node.op, node.attrs, tuple(Ref(new_index[r.node], r.index) for r in refs),
                                  node.types))
    new_outputs = tuple(Ref(new_index[r.node], r.index) for r in outputs)
    result = Graph(tuple(new_nodes), new_outputs, graph.values, graph.payloads)
    if result.output_types != graph.output_types:  # the matcher's type check makes this unreachable
        raise RewriteRejected("the rewrite would change the types of the graph's outputs")
    _seed_hashes(graph, result, order, operands, n)
    old_to_new = tuple(new_index.get(i, -1) for i in range(n))
    changed = {new_index[g] for g in operands}
    seed_index(result, GraphIndex.derived(index_of(graph), result, old_to_new, changed))
    origins = tuple((new_index[g], pos, g - offset) for pos, ((_m, live), offset) in enumerate(zip(groups, offsets))
                    for g in live)
    added = frozenset(o[0] for o in origins)
    dirty = added | {new_index[g] for g in operands if g < n}
    return Rewrite(result, matches, old_to_new, added, frozenset(dirty), origins)


def creates_cycle(graph: Graph, match: Match) -> bool:
    """Whether applying `match` would create a cycle: some value the target reads is computed
    from a value the match replaces (through nodes outside the match). Cheap: only nodes between
    the replaced values and the read ones in topological order are visited. Exact but for a match
    input read only by target nodes the applier drops as unread: it may predict a cycle there."""
    inputs = {r.node for r in match.inputs}
    start = min(r.node for r in match.source_outputs)
    last = max(inputs, default=-1)
    if last < start:
        return False
    matched = match.node_set
    users = index_of(graph).users
    stack = [r.node for r in match.source_outputs]
    seen = set(stack)
    while stack:
        v = stack.pop()
        for u, _pos in users[v]:
            if u in matched or u in seen or u > last:
                continue
            if u in inputs:
                return True
            seen.add(u)
            stack.append(u)
    return False


def _check_nothing_lost(graph: Graph, users, matches, dead, operands, outputs) -> None:
    """Refuse a rewrite after which a removed node would still be used (an unmapped intermediate)."""
    nodes = graph.nodes
    for match in matches:
        for g in match.nodes:
            for user, _pos in users[g]:
                if user not in dead and user not in operands:
                    raise RewriteRejected(f"{nodes[g].op} %{g} of the match is still used by {nodes[user].op} "
                                          f"%{user} after the rewrite (rule {match.rule.id} does not map it)")
    for gid, refs in list(operands.items()) + [(-1, outputs)]:
        for r in refs:
            if r.node in dead:
                who = "a graph output" if gid < 0 else f"{nodes[gid].op} %{gid}" if gid < len(nodes) else "a target"
                raise RewriteRejected(f"{nodes[r.node].op} %{r.node} of the match is still used by {who} "
                                      f"after the rewrite (its rule does not map it)")


def _read_outside(graph: Graph, users, match: Match, src: Ref) -> bool:
    """Whether a value the match replaces is read by a node outside it or is a graph output: a rule may
    map a value that only its own nodes read (a transpose other consumers may share), and then the
    target's node for it would be dead."""
    inside = match.nodes
    return src in graph.outputs or any(
        user not in inside and graph.nodes[user].inputs[pos] == src for user, pos in users[src.node])


def _live_targets(n: int, target_ops, outputs) -> list[int]:
    """Ids of the target nodes some target output needs (a target may carry an unused intermediate)."""
    live: set[int] = set()
    stack = [r.node for r in outputs if r.node >= n]
    while stack:
        gid = stack.pop()
        if gid not in live:
            live.add(gid)
            stack.extend(r.node for r in target_ops[gid - n] if r.node >= n)
    return sorted(live)


def _dead_after(graph: Graph, users, matches, target_ops, returned=()) -> set[int]:
    """The matched nodes and the upstream nodes only they use (inputs and outputs always stay, and so
    does a match input a target returns as it is, e.g. x of transpose(transpose(x)) => x)."""
    nodes = graph.nodes
    n = len(nodes)
    dead = {g for m in matches for g in m.nodes}
    keep = {r.node for refs in target_ops for r in refs if r.node < n}
    keep.update(r.node for r in returned)
    keep.update(r.node for r in graph.outputs if r.node not in dead)
    stack = [r.node for m in matches for g in m.nodes for r in nodes[g].inputs]
    while stack:
        d = stack.pop()
        if d in dead or d in keep or nodes[d].op == "input":
            continue
        if all(u in dead for u, _pos in users[d]):
            dead.add(d)
            stack.extend(r.node for r in nodes[d].inputs)
    return dead


def _toposort(ids: list[int], ops_of, match: Match) -> list[int]:
    """Depth-first post-order from the old order (so it is mostly kept); rejects a cycle."""
    return post_order(ids, ops_of, lambda _node: RewriteRejected(
        f"applying rule {match.rule.id} would create a cycle: an operand of the match depends on one of its outputs"))


def _seed_hashes(old: Graph, new: Graph, order: list[int], operands, n: int) -> None:
    """Give `new` its Merkle node hashes, reusing the old ones upstream of the rewrite.

    Mirrors Graph.node_hashes exactly (tests compare the two); skipped when the
    old graph's hashes were never computed.
    """
    old_hashes = old.__dict__.get("_node_hashes")
    if old_hashes is None:
        return
    same = [False] * len(order)
    hashes: list[str] = []
    for i, gid in enumerate(order):
        node = new.nodes[i]
        if gid < n and gid not in operands and all(same[r.node] for r in node.inputs):
            same[i] = True
            hashes.append(old_hashes[gid])
        else:
            hashes.append(_digest(node.op, node.attrs, tuple((hashes[r.node], r.index) for r in node.inputs)))
    object.__setattr__(new, "_node_hashes", tuple(hashes))


def apply_all(graph: Graph, matches, *, check: bool = True) -> Graph:
    """Apply several non-overlapping matches found in `graph`, one after another (skipping rejected ones)."""
    taken: set[int] = set()
    current = graph
    old_to_new = list(range(len(graph.nodes)))
    for m in matches:
        if not taken.isdisjoint(m.nodes):
            continue
        moved = m.remapped(old_to_new)
        if moved is None:
            continue
        try:
            rw = apply(current, moved, check=check)
        except RewriteRejected:
            continue
        taken.update(m.nodes)
        old_to_new = [rw.old_to_new[i] if i >= 0 else -1 for i in old_to_new]
        current = rw.graph
    return current


__all__ = ["Rewrite", "RewriteRejected", "apply", "apply_all", "apply_many", "creates_cycle"]
