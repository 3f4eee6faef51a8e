"""Prove rules correct: operator axioms in Z3, checked on concrete tensors; numerics.

`verify_file` proves every rule of a rule file and writes the verdicts back;
`prove_rule` proves one rule; `axioms.ALL` lists the operator properties.
"""
from __future__ import annotations


def __getattr__(name):  # keep `import taso_relay.verifier` cheap (z3 loads on use)
    if name in ("prove_rule", "Verdict", "PROVED", "REFUTED", "UNKNOWN"):
        from . import prover
        return getattr(prover, name)
    if name == "verify_file":
        from .run import verify_file
        return verify_file
    if name == "add_verify_command":
        from .cli import add_verify_command
        return add_verify_command
    raise AttributeError(name)


__all__ = ["prove_rule", "verify_file", "add_verify_command", "Verdict", "PROVED", "REFUTED", "UNKNOWN"]
