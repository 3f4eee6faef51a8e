"""Writing a hand-written rule file: the rules as data, a header that says where they come from.

Such a file is written unverified (but for the rules it held already, unchanged); `taso-relay rules verify FILE`
proves it afterwards.
"""
from __future__ import annotations

import argparse
from pathlib import Path


def node(id_, op, inputs, **attrs) -> dict:
    """One node of a rule's source or target, as rule files spell it."""
    return {"id": id_, "op": op, "inputs": list(inputs), "attrs": attrs}


def write_main(argv, description: str, rules_fn, doc: str) -> int:
    """The `--out FILE` command line of a hand-written rule module. Rules already in FILE with the same
    text keep their verdicts and numerics (`rules verify FILE` then proves only the new or changed ones)."""
    from dataclasses import replace

    from ..subst.rule_io import load_rules, rule_from_dict, save_rules
    from ..verifier.run import rule_digest

    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    rules = [rule_from_dict(r) for r in rules_fn()]
    if Path(args.out).exists():
        old = {(r.id, rule_digest(r)): r for r in load_rules(Path(args.out), status=None)}
        kept = [old.get((r.id, rule_digest(r))) for r in rules]
        rules = [replace(r, verification=k.verification, numerics=k.numerics) if k else r for r, k in zip(rules, kept)]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    save_rules(args.out, rules, {"generator": {"name": "handwritten", "version": 1, "doc": doc}})
    load_rules(Path(args.out), status=None)  # the file reads back
    return 0
