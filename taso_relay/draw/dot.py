"""DOT text of the rewritten regions of a graph, before and after.

A node belongs to a region when the other graph has no node computing the
same thing from the same inputs (forward Merkle hash: operator, attributes,
the hashes of its inputs; a weight by its shape and value, not its name) nor
a node consumed the same way up to the outputs (backward hash), so what is
drawn is the rewrite itself, not everything downstream of it. One ring of unchanged neighbours is
drawn around each region for context. `render` turns the DOT into SVG with
graphviz's `dot` when it is installed; otherwise the DOT file is written.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import numpy as np

from ..graph import Graph

MAX_NODES = 300  # per side; a larger region is cut (and the drawing says so)
SHOWN_ATTRS = ("strides", "padding", "groups", "activation", "axis", "axes", "sizes", "perm", "shape", "kernel",
               "label", "kind", "name")


def _node_key(graph: Graph, i: int) -> tuple:
    """What a node is, apart from its edges: a weight by shape and value, an opaque call by its label."""
    node = graph.nodes[i]
    if node.op == "weight":
        value = graph.values.get(node.attr("name"))
        digest = (hashlib.blake2b(np.ascontiguousarray(value).tobytes(), digest_size=8).hexdigest()
                  if value is not None else node.attr("name"))
        return ("weight", node.types, digest)
    if node.op == "opaque":
        return ("opaque", node.attr("label"), node.types)
    return (node.op, node.attrs)


def _digest(key) -> str:
    return hashlib.blake2b(repr(key).encode(), digest_size=12).hexdigest()


def structural_hashes(graph: Graph) -> list[str]:
    """Forward Merkle hashes: a node and everything it depends on."""
    hashes: list[str] = []
    for i, node in enumerate(graph.nodes):
        hashes.append(_digest(_node_key(graph, i) + tuple((hashes[r.node], r.index) for r in node.inputs)))
    return hashes


def consumer_hashes(graph: Graph) -> list[str]:
    """Backward Merkle hashes: a node and everything that consumes it, up to the graph's outputs."""
    outputs: dict[int, list] = {}
    for k, ref in enumerate(graph.outputs):
        outputs.setdefault(ref.node, []).append(("out", k, ref.index))
    hashes: list[str] = [""] * len(graph.nodes)
    for i in reversed(range(len(graph.nodes))):
        users = sorted((hashes[j], pos, graph.nodes[j].inputs[pos].index) for j, pos in graph.users[i])
        hashes[i] = _digest(_node_key(graph, i) + tuple(users) + tuple(outputs.get(i, ())))
    return hashes


def changed_nodes(before: Graph, after: Graph) -> tuple[set[int], set[int]]:
    """Indices of the nodes of each graph that have no counterpart in the other.

    A node has a counterpart when the same computation feeds it (forward hash) or the same
    computation consumes it (backward hash): what is left is the rewritten region, not
    everything downstream of it.
    """
    fb, fa = structural_hashes(before), structural_hashes(after)
    bb, ba = consumer_hashes(before), consumer_hashes(after)
    old = {i for i in range(len(before.nodes)) if fb[i] not in set(fa) and bb[i] not in set(ba)}
    new = {i for i in range(len(after.nodes)) if fa[i] not in set(fb) and ba[i] not in set(bb)}
    return old, new


def _ring(graph: Graph, nodes: set[int]) -> set[int]:
    ring = set()
    for i in nodes:
        ring.update(r.node for r in graph.nodes[i].inputs)
        ring.update(j for j, _ in graph.users[i])
    return ring - nodes


def _label(graph: Graph, i: int) -> str:
    node = graph.nodes[i]
    attrs = node.attr_dict
    head = node.op
    if node.op == "opaque":
        head = f"opaque {attrs.get('label', '')}".strip()
    parts = [head]
    for key in SHOWN_ATTRS:
        if key in attrs and node.op != "opaque" and attrs[key] not in ((), "none", "", None):
            if key in ("name",) and node.op not in ("input", "weight"):
                continue
            parts.append(f"{key}={_short(attrs[key])}")
    parts.append(" ".join(f"{t.dtype}{list(t.shape)}" for t in node.types))
    return "\\n".join(_escape(p) for p in parts)


def _short(value) -> str:
    text = str(list(value) if isinstance(value, tuple) else value)
    return text if len(text) <= 32 else text[:29] + "..."


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _cluster(graph: Graph, side: str, changed: set[int], lines: list[str]) -> int:
    context = _ring(graph, changed)
    shown = sorted(changed | context)
    cut = len(shown) > MAX_NODES
    shown = shown[:MAX_NODES]
    keep = set(shown)
    color = "#f4a261" if side == "before" else "#2a9d8f"
    lines.append(f'  subgraph cluster_{side} {{')
    lines.append(f'    label="{side} ({len(changed)} nodes changed{", cut" if cut else ""})"; fontname="Helvetica";')
    for i in shown:
        style = (f'style="filled,rounded", fillcolor="{color}"' if i in changed
                 else 'style="dashed,rounded", color="gray50", fontcolor="gray30"')
        lines.append(f'    {side}_{i} [label="{_label(graph, i)}", shape=box, {style}];')
    for i in shown:
        for r in graph.nodes[i].inputs:
            if r.node in keep:
                tail = f' [label="{r.index}"]' if len(graph.nodes[r.node].types) > 1 else ""
                lines.append(f"    {side}_{r.node} -> {side}_{i}{tail};")
    for k, ref in enumerate(graph.outputs):
        if ref.node in keep:
            lines.append(f'    {side}_out{k} [label="output {k}", shape=plaintext];')
            lines.append(f"    {side}_{ref.node} -> {side}_out{k};")
    lines.append("  }")
    return len(shown)


def regions_dot(before: Graph, after: Graph, title: str = "") -> tuple[str, int]:
    """(DOT text, number of regions' changed nodes in `after`)."""
    old, new = changed_nodes(before, after)
    lines = ["digraph taso_rewrites {", '  rankdir=TB; node [fontname="Helvetica", fontsize=10];',
             f'  label="{_escape(title)}{": " if title else ""}rewritten regions, before and after"; labelloc=t;']
    if not old and not new:
        lines.append('  none [label="no rewrite applied: the graph is unchanged", shape=note];')
    else:
        _cluster(before, "before", old, lines)
        _cluster(after, "after", new, lines)
    lines.append("}")
    return "\n".join(lines) + "\n", len(new)


def render(dot_text: str, path) -> dict:
    """Write `path`: SVG (or another graphviz format by suffix) via `dot` when installed, else DOT.

    Returns {"path": what was written, "format": "svg"|"dot", "note": why it is DOT when SVG was asked}.
    """
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "dot"
    if fmt in ("dot", "gv"):
        path.write_text(dot_text)
        return {"path": str(path), "format": "dot", "note": ""}
    dot = shutil.which("dot")
    if dot is not None:
        done = subprocess.run([dot, f"-T{fmt}", "-o", str(path)], input=dot_text.encode(), capture_output=True,
                              timeout=120)
        if done.returncode == 0:
            return {"path": str(path), "format": fmt, "note": ""}
        why = done.stderr.decode(errors="replace").strip().splitlines()[:1]
        note = f"graphviz failed ({why[0] if why else done.returncode}); wrote DOT"
    else:
        note = "graphviz 'dot' is not installed; wrote DOT (render with: dot -Tsvg FILE.dot -o FILE.svg)"
    dot_path = path.with_suffix(".dot")
    dot_path.write_text(dot_text)
    return {"path": str(dot_path), "format": "dot", "note": note}


def draw_regions(before: Graph, after: Graph, path, title: str = "") -> dict:
    text, changed = regions_dot(before, after, title)
    info = render(text, path)
    info["changed_nodes"] = changed
    return info
