"""How much of TASO's rule set the shipped rules cover: each TASO rule, read at the shapes TASO found it
on, rewritten by the shipped rules in at most two steps.

    .venv/bin/python -m bench.rulesets.coverage converted.txt --multi converted_multi.txt

The files are Tensat's conversion of TASO's rules (github.com/uwplse/tensat, not part of this project;
bench/rulesets/README.md says how to fetch them). Per TASO rule: its source and target graphs
(tensat.py); whether they compute the same on random float64 inputs (a rule that does not was read
wrongly, or is wrong); and how many rewrites by the shipped proven rules turn the source into the
target: 0 (the same graph once the inputs of commutative operators are ordered), 1, or 2 (a graph one
rewrite from each side is the same). A step from the target's side uses a shipped rule the other way
round: the rules are proven equalities, but the search applies each in its own direction, so the
records say which way ("forward": one rule from source to target). Matches are taken wherever they
fit, as a derivation may (the pass's own context checks, such as leaving weight-only subgraphs to
FoldConstant, are a policy of the search, not of what the rules can derive). Prints one JSON line per
rule and a summary.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from bench.rulesets.tensat import TensatRule, Unreadable, graphs, read_rules

from taso_relay.graph import get_op
from taso_relay.graph.graph import Graph
from taso_relay.graph.interpreter import evaluate, random_feeds


def canonical(graph: Graph) -> str:
    """A hash of what the outputs compute, blind to the order of a commutative operator's inputs."""
    hashes: list[str] = []
    for node in graph.nodes:
        ins = [(hashes[r.node], r.index) for r in node.inputs]
        if get_op(node.op).commutative:
            ins.sort()
        hashes.append(hashlib.blake2b(repr((node.op, node.attrs, tuple(ins))).encode(), digest_size=16).hexdigest())
    return hashlib.blake2b(repr([(hashes[r.node], r.index) for r in graph.outputs]).encode(),
                           digest_size=16).hexdigest()


def same_numbers(src: Graph, tgt: Graph, seed: int = 0) -> bool:
    rng = np.random.default_rng(seed)
    feeds = {**random_feeds(src, rng, include_weights=True), **random_feeds(tgt, rng, include_weights=True)}
    a = evaluate(src, feeds, dtype="float64")
    b = evaluate(tgt, feeds, dtype="float64")
    # the constants (an averaging kernel's 1/9) are float32: agreement to float32's rounding
    return len(a) == len(b) and all(x.shape == y.shape and np.abs(x - y).max(initial=0) <= 1e-6 * (1 + np.abs(x).max())
                                    for x, y in zip(a, b))


def one_step(graph: Graph, index) -> dict[str, str]:
    """canonical hash -> the id of a shipped rule whose one rewrite of `graph` gives it."""
    from taso_relay.subst.apply import apply
    from taso_relay.subst.incremental import MatchSet

    found: dict[str, str] = {}
    matches = MatchSet.build(graph, index)
    for i, ms in matches.by_rule.items():
        for m in ms:
            try:
                result = apply(graph, m, check=False).graph
            except Exception:  # noqa: BLE001 - a rewrite that cannot be applied here is no derivation
                continue
            found.setdefault(canonical(result), index.matchers[i].rule.id)
    return found


def derive(src: Graph, tgt: Graph, index) -> tuple[int | None, list[str], str]:
    """(steps, rule ids, way) of the shortest derivation found, at most two steps. way: "same", "forward"
    (source to target), "backward" (a rule rewrites the target into the source: an equality the shipped
    rules hold, used the other way) or "meet" (one step from each side)."""
    start, goal = canonical(src), canonical(tgt)
    if start == goal:
        return 0, [], "same"
    forward = one_step(src, index)
    if goal in forward:
        return 1, [forward[goal]], "forward"
    backward = one_step(tgt, index)
    if start in backward:
        return 1, [backward[start]], "backward"
    for h, rid in forward.items():
        if h in backward:
            return 2, [rid, backward[h]], "meet"
    return None, [], ""


def check(rule: TensatRule, index) -> dict:
    record = {"line": rule.line, "outputs": rule.outputs, "rule": rule.text}
    try:
        src, tgt = graphs(rule)
    except Unreadable as exc:
        record["unreadable"] = str(exc)
        return record
    record["holds"] = same_numbers(src, tgt)
    steps, by, way = derive(src, tgt, index)
    record.update(steps=steps, by=by, way=way)
    return record


def summary(records: list[dict]) -> dict:
    read = [r for r in records if "unreadable" not in r]
    steps = Counter(r["steps"] for r in read)
    return {"rules": len(records), "read": len(read), "hold": sum(r["holds"] for r in read),
            "same_graph": steps[0], "one_step": steps[1], "two_steps": steps[2], "not_derived": steps[None],
            "one_step_forward": sum(r.get("way") == "forward" for r in read),
            "unreadable": Counter(r["unreadable"].split(":")[0] for r in records if "unreadable" in r)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*", type=Path, help="single-output rule files (one rule a line)")
    p.add_argument("--multi", nargs="*", type=Path, default=[], help="two-output rule files (two lines a rule)")
    p.add_argument("--rules", nargs="*", type=Path, default=None,
                   help="rule files to derive with (default: every shipped file, proven rules)")
    p.add_argument("--json", type=Path, default=None,
                   help="write the summaries and the records here (by line number: no rule text is kept)")
    p.add_argument("--no-text", action="store_true", help="print the records without the rules' text")
    args = p.parse_args(argv)
    from taso_relay.subst import default_rules, load_rules
    from taso_relay.subst.incremental import RuleIndex

    rules = (default_rules() if args.rules is None
             else [r for f in args.rules for r in load_rules(f, status="PROVED")])
    index = RuleIndex(rules)
    out = {}
    start = time.perf_counter()
    for path, multi in [(f, False) for f in args.files] + [(f, True) for f in args.multi]:
        records = [check(rule, index) for rule in read_rules(path.read_text(), multi=multi)]
        kept = [{k: v for k, v in r.items() if k != "rule"} for r in records]
        for r in kept if args.no_text else records:
            print(json.dumps(r), flush=True)
        out[path.name] = {"summary": summary(records), "records": kept}
        print(json.dumps({"file": path.name, **out[path.name]["summary"]}), file=sys.stderr)
    print(f"{len(rules)} shipped rules; {time.perf_counter() - start:.0f} s", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
