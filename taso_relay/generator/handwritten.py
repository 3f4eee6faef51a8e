"""Writing a hand-written rule file: the rules as data, a header that says where they come from.

Such a file is written unverified; `taso-relay rules verify FILE` proves it afterwards.
"""
from __future__ import annotations

import argparse
from pathlib import Path


def node(id_, op, inputs, **attrs) -> dict:
    """One node of a rule's source or target, as rule files spell it."""
    return {"id": id_, "op": op, "inputs": list(inputs), "attrs": attrs}


def write_main(argv, description: str, rules_fn, doc: str) -> int:
    """The `--out FILE` command line of a hand-written rule module."""
    from ..subst.rule_io import load_rules, rule_from_dict, save_rules

    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    rules = [rule_from_dict(r) for r in rules_fn()]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    save_rules(args.out, rules, {"generator": {"name": "handwritten", "version": 1, "doc": doc}})
    load_rules(Path(args.out), status=None)  # the file reads back
    return 0
