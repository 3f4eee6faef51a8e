"""Incremental matching equals matching from scratch, along random rewrite sequences."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rewrite_helpers import assert_same_outputs, bert_like, fixture_rules, inception_like, random_graph

from taso_relay.graph import Graph
from taso_relay.subst.apply import RewriteRejected, apply
from taso_relay.subst import default_rules
from taso_relay.subst.incremental import MatchSet, RuleIndex
from taso_relay.subst.index import GraphIndex, index_of, neighbourhood

RULES = fixture_rules()


def fresh(g: Graph) -> Graph:
    """The same graph with no caches (hashes, index) carried over from a rewrite."""
    return Graph(g.nodes, g.outputs, g.values, g.payloads)


def keys(ms) -> list:
    return sorted(m.key for m in ms)


def apply_some(g: Graph, options: list, rng: random.Random):
    """Apply one of the matches (some create cycles, and are refused); None if none applies."""
    rng.shuffle(options)
    for m in options:
        try:
            return apply(g, m)
        except RewriteRejected as exc:
            assert "cycle" in str(exc)
    return None


def walk(g: Graph, seed: int, steps: int) -> int:
    """Apply random applicable matches; after each, compare the derived state with a fresh one."""
    rng = random.Random(seed)
    g.hash
    ms = MatchSet.build(g, RULES)
    done = 0
    for _ in range(steps):
        rw = apply_some(g, list(ms.applicable()), rng)
        if rw is None:
            break
        child, scratch = rw.graph, fresh(rw.graph)
        derived = ms.derive(rw)
        assert keys(derived) == keys(MatchSet.build(scratch, RULES))
        assert keys(derived.applicable()) == keys(MatchSet.build(scratch, RULES).applicable())
        assert child.node_hashes == scratch.node_hashes and child.hash == scratch.hash
        idx, ref = index_of(child), GraphIndex(scratch)
        assert idx.foldable == ref.foldable and idx.by_op == ref.by_op
        assert [idx.users[i] for i in range(len(child.nodes))] == list(ref.users)
        g, ms = child, derived
        done += 1
    return done


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 1000))
def test_derived_matches_equal_a_fresh_match_on_random_graphs(graph_seed, walk_seed):
    walk(random_graph(graph_seed), walk_seed, steps=6)


def test_derived_matches_equal_a_fresh_match_on_larger_models():
    assert walk(inception_like(blocks=3), 1, steps=12) >= 10
    assert walk(bert_like(layers=2), 2, steps=12) >= 5


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 1000))
def test_random_rewrite_sequences_keep_the_numbers(graph_seed, walk_seed):
    g = random_graph(graph_seed)
    rng = random.Random(walk_seed)
    current = g
    for _ in range(4):
        rw = apply_some(current, list(MatchSet.build(current, RULES).applicable()), rng)
        if rw is None:
            break
        current = rw.graph
    assert_same_outputs(g, current)


def test_neighbourhood_is_the_undirected_distance():
    g = inception_like(blocks=1)
    conv = next(i for i, n in enumerate(g.nodes) if n.op == "conv2d")
    near = neighbourhood(index_of(g), [conv], 2)
    assert near[conv] == 0
    assert all(near[r.node] == 1 for r in g.nodes[conv].inputs)
    assert all(d <= 2 for d in near.values())


SHIPPED = default_rules(status=None)


@pytest.mark.skipif(not SHIPPED, reason="no shipped rule files")
@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 1000))
def test_derived_matches_equal_a_fresh_match_with_the_shipped_rules(graph_seed, walk_seed):
    rules = shipped_index()
    g = random_graph(graph_seed)
    rng = random.Random(walk_seed)
    ms = MatchSet.build(g, rules)
    for _ in range(4):
        rw = apply_some(g, list(ms.applicable()), rng)
        if rw is None:
            break
        derived = ms.derive(rw)
        assert keys(derived) == keys(MatchSet.build(fresh(rw.graph), rules))
        g, ms = rw.graph, derived


_SHIPPED_INDEX = []


def shipped_index() -> RuleIndex:
    if not _SHIPPED_INDEX:
        _SHIPPED_INDEX.append(RuleIndex(SHIPPED))
    return _SHIPPED_INDEX[0]


@pytest.mark.skipif(not SHIPPED, reason="no shipped rule files")
@pytest.mark.parametrize("seed", range(6))
def test_rules_of_one_source_pattern_are_matched_once_with_each_rules_own_results(seed):
    """Generated rules share source patterns (their bindings are searched for once per pattern); every
    rule still gets exactly what matching it alone finds, in the same order."""
    rules = shipped_index()
    assert len(rules.groups) < len(rules.matchers) * 0.6
    g = [inception_like(blocks=3), bert_like(layers=2)][seed] if seed < 2 else random_graph(seed)
    built = MatchSet.build(g, rules).by_rule
    alone = {i: m.find(fresh(g)) for i, m in enumerate(rules.matchers)}
    assert {i: [m.key for m in ms] for i, ms in alone.items() if ms} == {i: [m.key for m in ms]
                                                                           for i, ms in built.items()}
    assert all(m.rule is rules.matchers[i].rule for i, ms in built.items() for m in ms)
