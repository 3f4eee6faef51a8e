"""What a search did, for people (text) and programs (JSON)."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields


def json_ready(value):
    """`value` with every infinite or NaN float made None: strict JSON has no Infinity (``--time-limit inf``)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


@dataclass(frozen=True)
class AppliedRewrite:
    rule_id: str
    text: str  # the rule's readable form
    where: str  # the replaced values, their types and the operands bound to the rule's inputs


@dataclass
class SearchReport:
    applied: list[AppliedRewrite]
    cost_before: float
    cost_after: float
    seconds: float
    graphs_explored: int  # distinct graphs built and costed
    expansions: int  # graphs whose rewrites were enumerated
    stopped_by: str  # "exhausted" (queue empty), "budget", "patience" (no cheaper graph lately) or "time"
    candidates: int = 0  # rewrites that passed the cost threshold and were queued
    rejected: int = 0  # queued rewrites refused when applied (cycles)
    duplicates: int = 0  # queued rewrites that led to a graph already seen
    nodes_before: int = 0
    nodes_after: int = 0
    best_found_after: float = 0.0  # seconds into the search when the returned graph was first reached
    settings: dict = field(default_factory=dict)  # alpha, budget, time_limit, rules, incremental
    first_phase: int = 0  # how many of `applied` (at its head) the first phase made (search/first.py)
    cost_first: float | None = None  # the cost after the first phase, before the backtracking search
    merged: int = 0  # duplicate nodes merged before the first phase (graph/cse.py)
    saturated: int = 0  # of `applied`: merge rules applied to a fixpoint (saturate.py); after the first
    # phase, or with a judge (settings["judge"]) at the end
    # the graph after the first phase: the pass falls back to it when the search's result is refused
    first_graph: object = field(default=None, repr=False, compare=False)
    # Merges the judge refused though the search's model priced them far cheaper (backtracking.py):
    # their whole trail, the judge's price and graph. A pass that measures speed may take them.
    contested: list[AppliedRewrite] = field(default_factory=list)
    contested_cost: float | None = None
    contested_saturated: int = 0
    contested_graph: object = field(default=None, repr=False, compare=False)
    # The graphs a judge (or the layout step) weighed: [{"graph", "cost", "rewrites"}], in the order
    # weighed; a later one is taken only where it is priced judge_margin cheaper than the one before.
    priced: list[dict] = field(default_factory=list)

    @property
    def improvement(self) -> float | None:
        """cost_before / cost_after (1.0: nothing gained); None where the search's graph is free and the
        input was not (a split rejoined into its own input): no finite ratio says that."""
        if self.cost_after > 0:
            return self.cost_before / self.cost_after
        return None if self.cost_before else 1.0

    def to_dict(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("first_graph", "contested_graph", "applied", "contested")}
        data["applied"] = [asdict(a) for a in self.applied]
        data["contested"] = [asdict(a) for a in self.contested]
        data["settings"] = dict(self.settings)
        data["improvement"] = self.improvement
        return data

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(json_ready(self.to_dict()), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict) -> "SearchReport":
        data = dict(data)
        data.pop("improvement", None)
        data.pop("first_graph", None)
        data.pop("contested_graph", None)
        data["applied"] = [AppliedRewrite(**a) for a in data.get("applied", [])]
        data["contested"] = [AppliedRewrite(**a) for a in data.get("contested", [])]
        return cls(**data)

    def keep_first_phase(self) -> None:
        """Narrow the report to the first phase's rewrites: what the pass kept when it refused the rest."""
        if self.first_graph is None:
            raise ValueError("no first-phase graph to keep")
        self.applied = self.applied[:self.first_phase]
        self.cost_after = self.cost_first if self.cost_first is not None else self.cost_after
        self.nodes_after = len(self.first_graph.nodes)

    def keep_contested(self) -> None:
        """Widen the report to the contested merges: what the pass kept when it measured them faster."""
        if self.contested_graph is None:
            raise ValueError("no contested graph to keep")
        self.applied = list(self.contested)
        self.cost_after = self.contested_cost if self.contested_cost is not None else self.cost_after
        self.nodes_after = len(self.contested_graph.nodes)
        self.saturated = self.contested_saturated

    def _ratio(self) -> str:
        """", x1.234"; nothing where the search's graph is free (a split rejoined into its own input), since no
        ratio says that and x1.000 would say the opposite."""
        return "" if self.improvement is None else f", x{self.improvement:.3f}"

    def to_text(self) -> str:
        gain = (1 - self.cost_after / self.cost_before) * 100 if self.cost_before else 0.0
        lines = [
            f"TASO search: cost {_fmt(self.cost_before)} -> {_fmt(self.cost_after)} "
            f"({gain:.1f}% less{self._ratio()}); nodes {self.nodes_before} -> {self.nodes_after}",
            f"  {self.seconds:.2f} s{self._judged()}, {self.expansions} expansions, "
            f"{self.graphs_explored} graphs explored, "
            f"{self.candidates} candidates queued ({self.duplicates} duplicates, {self.rejected} rejected); "
            f"best found after {self.best_found_after:.2f} s; stopped: {self.stopped_by}",
        ]
        if self.merged:
            lines.append(f"  {self.merged} duplicate nodes merged (common subexpressions)")
        if self.settings:
            lines.append("  settings: " + ", ".join(f"{k}={v}" for k, v in self.settings.items()))
        if self.priced:
            lines.append("  priced: " + "; ".join(
                f"{p['graph']} {_fmt(p['cost']) if p['cost'] is not None else 'not priced'}"
                f" ({p['rewrites']} rewrites)" for p in self.priced))
        if not self.applied:
            lines.append("  no rewrite applied" + (" besides merging the duplicates" if self.merged else ""))
        if self.contested and self.contested != self.applied:
            lines.append(f"  contested: {len(self.contested)} rewrites the judge priced at "
                         f"{_fmt(self.contested_cost)}, far cheaper by the search's model (measured only with "
                         "verify_speed)")
        counts: dict[str, int] = {}
        texts: dict[str, str] = {}
        for a in self.applied:
            counts[a.rule_id] = counts.get(a.rule_id, 0) + 1
            texts.setdefault(a.rule_id, a.text)
        if counts:
            lines.append("  rules: " + ", ".join(f"{rid} x{n}" for rid, n in counts.items()))
            # each rule's text once: a model's 200 rewrites of four rules read as four rules, not 200 formulas
            lines += [f"    {rid}: {text}" for rid, text in texts.items()]
        for k, a in enumerate(self.applied, 1):
            lines.append(f"  {k:3d}. {a.rule_id} at {a.where}")
        return "\n".join(lines)

    def _judged(self) -> str:
        judge_s = (self.settings or {}).get("judge_seconds")
        return f" ({judge_s:.2f} s of it in the judge, tuning and timing kernels)" if judge_s else ""

    def __str__(self) -> str:
        return self.to_text()


def _fmt(cost: float) -> str:
    return f"{cost:.6g}"


__all__ = ["AppliedRewrite", "SearchReport"]
