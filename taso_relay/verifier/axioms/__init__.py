"""The operator properties, one small file per operator family."""
from __future__ import annotations

from . import activation, batched, concat_split, constants, elementwise, enlarge, linear, pad, pool, scalar, transpose
from .base import Axiom, N, Z3Axiom, axiom, to_z3
from . import norm, subpixel

FAMILIES = {
    "elementwise": elementwise.AXIOMS,
    "activation": activation.AXIOMS,
    "linear": linear.AXIOMS,
    "concat_split": concat_split.AXIOMS,
    "transpose": transpose.AXIOMS,
    "enlarge": enlarge.AXIOMS,
    "constants": constants.AXIOMS,
    "pool": pool.AXIOMS,
    "scalar": scalar.AXIOMS,
    "batched": batched.AXIOMS,
    "norm": norm.AXIOMS,
    "pad": pad.AXIOMS,
    "subpixel": subpixel.AXIOMS,
}
ALL: list[Axiom] = [a for family in FAMILIES.values() for a in family]
BY_NAME = {a.name: a for a in ALL}
assert len(BY_NAME) == len(ALL), "axiom names must be unique"

__all__ = ["ALL", "BY_NAME", "FAMILIES", "Axiom", "N", "Z3Axiom", "axiom", "to_z3"]
