"""Cost-based search for the cheapest equivalent graph (TASO's backtracking search).

    from taso_relay.search import optimize
    best, report = optimize(graph, rules, cost)      # cost: has graph_cost(graph), or is a callable
    print(report.to_text())

`optimize` never returns a costlier graph than it was given (on a tie, the
input itself), and its report lists the rewrites applied, in order.
"""
from __future__ import annotations

from typing import Iterable

from ..graph import Graph
from ..subst.incremental import RuleIndex
from ..subst.match import Matcher
from ..subst.rule import Rule
from .backtracking import (CONTEST_GAIN, DEFAULT_ALPHA, DEFAULT_BUDGET, DEFAULT_PATIENCE, DEFAULT_TIME_LIMIT,
                           JUDGE_MARGIN, backtracking_search)
from .costing import CostFn, LocalCost, SupportsGraphCost, cost_function
from .report import AppliedRewrite, SearchReport


def optimize(graph: Graph, rules: Iterable[Rule | Matcher] | RuleIndex, cost: SupportsGraphCost | CostFn, *,
             alpha: float = DEFAULT_ALPHA, budget: int = DEFAULT_BUDGET, patience: int | None = DEFAULT_PATIENCE,
             time_limit: float = DEFAULT_TIME_LIMIT, incremental: bool = True,
             batch: bool = True, saturate_merges: bool = False,
             judge: SupportsGraphCost | CostFn | None = None,
             judge_margin: float = JUDGE_MARGIN, layout: str | None = None) -> tuple[Graph, SearchReport]:
    """Search for a cheaper equivalent of `graph` with `rules`, priced by `cost`.

    rules: Rule objects, compiled Matchers, or a RuleIndex (build it once to search many graphs);
    alpha: relaxation (a candidate is kept if its cost < alpha x the best so far);
    budget: at most this many graphs expanded; patience: stop after this many expansions in a row
    without a cheaper graph (None: never); time_limit: seconds, checked between rewrites;
    incremental=False: the plain (slow) loop, every candidate built and costed in full;
    batch: also try all improving, mutually distant rewrites of a graph at once;
    saturate_merges: apply each merge rule to its fixpoint first, kept where it lowers the cost;
    judge: a dearer model `cost` stands in for: it decides the saturation and the result (backtracking_search);
    judge_margin: how much cheaper it must price a graph with more rewrites to prefer it;
    layout: last, offer the result with every conv in this layout ("nhwc"), priced whole.
    """
    return backtracking_search(graph, rules, cost, alpha=alpha, budget=budget, patience=patience, time_limit=time_limit,
                               incremental=incremental, batch=batch, saturate_merges=saturate_merges,
                               judge=judge, judge_margin=judge_margin, layout=layout)


__all__ = ["AppliedRewrite", "CONTEST_GAIN", "CostFn", "DEFAULT_ALPHA", "DEFAULT_BUDGET", "DEFAULT_PATIENCE",
           "DEFAULT_TIME_LIMIT", "LocalCost", "JUDGE_MARGIN", "SearchReport", "SupportsGraphCost",
           "backtracking_search", "cost_function", "optimize"]
