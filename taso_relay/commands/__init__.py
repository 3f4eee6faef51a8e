"""The subcommands of `taso-relay`, one module each; `COMMANDS` lists their `add_*` functions.

The rule generator, the verifier and the cost package live in their own
folders; their subcommands are added when those packages import, and left
out silently when they are absent, so the command always works.
"""
from __future__ import annotations

import argparse

from .compile import add_compile
from .cost import add_cost
from .demo import add_demo
from .optimize import add_optimize
from .run import add_run
from .tune import add_tune


def add_rules(sub) -> None:
    """`rules generate|stats` (generator) and `rules verify` (verifier), each when its package imports."""
    try:
        from ..generator.cli import add_rules_commands
    except Exception:  # noqa: BLE001 - absent or broken: the rest of the command must still work
        add_rules_commands = None
    try:
        from ..verifier.cli import add_verify_command
    except Exception:  # noqa: BLE001
        add_verify_command = None
    if add_rules_commands is None and add_verify_command is None:
        return
    if add_rules_commands is not None:
        rules = add_rules_commands(sub)
    else:
        rules = sub.add_parser("rules", help="rule files: verify")
        inner = rules.add_subparsers(dest="rules_command", metavar="{verify}")
        inner.required = True
    if add_verify_command is not None:
        inner = next(a for a in rules._actions if isinstance(a, argparse._SubParsersAction))
        add_verify_command(inner)
        inner.metavar = "{" + ",".join(inner.choices) + "}"


def _optional(add):
    """A subcommand from another package: left out when adding it fails."""
    def guarded(sub) -> None:
        try:
            add(sub)
        except Exception:  # noqa: BLE001
            pass
    guarded.__name__ = add.__name__
    return guarded


COMMANDS = [add_optimize, add_compile, add_run, add_tune, _optional(add_rules), _optional(add_cost), add_demo]
