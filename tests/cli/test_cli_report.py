"""The pass report as JSON: dataclasses become plain data at any depth, graphs are left out."""
from __future__ import annotations

from dataclasses import dataclass, field

from taso_relay.commands.report import report_dict


class Opaque:  # stands for a graph or another object with no plain form
    pass


@dataclass
class Step:
    rule: str
    gain: float
    graph: Opaque = field(default_factory=Opaque)


@dataclass
class Report:
    name: str
    best: Step
    applied: list
    graph: Opaque = field(default_factory=Opaque)


def test_nested_dataclasses_keep_their_plain_fields_only():
    report = Report("main", Step("r1", 0.5), [Step("r2", 0.25), Opaque()])
    assert report_dict(report) == {"name": "main", "best": {"rule": "r1", "gain": 0.5},
                                   "applied": [{"rule": "r2", "gain": 0.25}]}
