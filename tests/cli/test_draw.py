"""The drawing of rewritten regions: what counts as changed, and rendering with or without graphviz."""
from __future__ import annotations

import os
import stat

import numpy as np

from taso_relay.draw import changed_nodes, draw_regions, regions_dot
from taso_relay.graph import GraphBuilder


def _pair():
    """before: relu(conv(x, w1)) and relu(conv(x, w2)); after: one conv on concatenated weights, then split."""
    rng = np.random.default_rng(0)
    w1, w2 = (rng.uniform(size=(2, 3, 3, 3)).astype("float32") for _ in range(2))
    b = GraphBuilder()
    x = b.input("x", (1, 3, 6, 6))
    c1 = b.op("conv2d", x, b.weight("a", (2, 3, 3, 3), value=w1), padding=(1, 1, 1, 1))
    c2 = b.op("conv2d", x, b.weight("b", (2, 3, 3, 3), value=w2), padding=(1, 1, 1, 1))
    before = b.build([b.op("relu", c1), b.op("relu", c2)])
    a = GraphBuilder()
    x = a.input("x", (1, 3, 6, 6))
    # the same weights under other names: weights are compared by value
    both = a.op("concat", a.weight("p", (2, 3, 3, 3), value=w1), a.weight("q", (2, 3, 3, 3), value=w2), axis=0)
    s1, s2 = a.op("split", a.op("conv2d", x, both, padding=(1, 1, 1, 1)), axis=1, sizes=(2, 2))
    after = a.build([a.op("relu", s1), a.op("relu", s2)])
    return before, after


def test_changed_nodes_are_the_rewrite_not_everything_downstream():
    before, after = _pair()
    old, new = changed_nodes(before, after)
    assert sorted(before.nodes[i].op for i in old) == ["conv2d", "conv2d"]
    assert sorted(after.nodes[i].op for i in new) == ["concat", "conv2d", "split"]
    assert changed_nodes(before, before) == (set(), set())


def test_dot_has_both_sides_with_context():
    before, after = _pair()
    text, changed = regions_dot(before, after, "pair")
    assert changed == 3 and text.startswith("digraph")
    assert "cluster_before" in text and "cluster_after" in text
    assert text.count('style="dashed,rounded"') >= 4  # input, weights and relus as context
    assert "no rewrite applied" in regions_dot(before, before)[0]


def test_render_without_graphviz_writes_dot(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    before, after = _pair()
    info = draw_regions(before, after, tmp_path / "d.svg")
    assert info["format"] == "dot" and info["path"] == str(tmp_path / "d.dot")
    assert "not installed" in info["note"] and (tmp_path / "d.dot").read_text().startswith("digraph")


def test_render_with_graphviz(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "dot"  # stands in for graphviz: records its arguments, writes an SVG
    fake.write_text('#!/bin/sh\nfor a; do out="$a"; done\ncat > /dev/null\necho "<svg/>" > "$out"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir) + os.pathsep + os.environ.get("PATH", ""))
    before, after = _pair()
    info = draw_regions(before, after, tmp_path / "d.svg")
    assert info == {"path": str(tmp_path / "d.svg"), "format": "svg", "note": "", "changed_nodes": 3}
    assert (tmp_path / "d.svg").read_text().strip() == "<svg/>"
