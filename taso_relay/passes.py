"""`TASOPass`, a Relax function pass, and the registered "taso" pipeline.

Each Relax function with a dataflow block goes Relax -> Graph -> (optimize)
-> Relax. A function the graph form cannot hold is left as it is, with a
warning; a graph the optimizer changed is used only if it still computes the
same results (checked on random inputs, on the rewritten region), so the pass
never changes what a model computes beyond float rounding; with verify_speed (on
by default wherever the model can be timed as it will run) it is also used only
if it measures faster on the target.
"""
from __future__ import annotations

import functools
import logging
import numbers
import os
import statistics
import time
import warnings
import weakref
from dataclasses import dataclass, field, fields

import numpy as np
import tvm
from tvm import relax

from .bridge import execute, symbolic_sizes
from .bridge.from_relax import Imported, function_name, graph_from_function
from .bridge.static_part import split_static_part
from .bridge.to_relax import function_from_graph, module_from_graph, writes_float16_batch_norms
from .cost.lowering import reusing_lowerings, with_cores
from .graph import Graph, NotModelled, blas_on_free_cores, evaluate, random_feeds
from .graph.folding import CONSTANT_OPS, weight_only
from .guard import check_region
from .guard.close import close as _close, close_for as _close_for
from .search import CONTEST_GAIN, DEFAULT_PATIENCE, DEFAULT_TIME_LIMIT, optimize  # 8 s: under the 10 s target
from .search.layout import LAYOUTS
from .search.saturate import merges_matmuls
from .subst import default_rules, load_rules
from .subst.incremental import RuleIndex

COST_MODELS = ("analytic", "measured", "tuned")

logger = logging.getLogger("taso_relay.passes")

SKIPPED_ATTRS = ("Primitive", "Composite", "Codegen")  # fused or offloaded kernels: not ours to rewrite
FAULTS = ("numeric", "build")  # refusals that are a rewrite's faults (warned); "speed" is the check's job


@dataclass
class FunctionReport:
    """What the pass did to one function."""

    name: str
    status: str = "unchanged"  # optimized | unchanged | rejected | skipped | re-emitted (see _reemitted)
    # "numeric" (results differ), "build" (TVM cannot build it) or "speed", when rejected (or re-emitted: the last);
    # "sizes": optimized at stand-in sizes, its symbolic form differs from the original at other sizes
    rejected_by: str = ""
    check: str = ""  # how the results were compared (region or whole function) and what was found
    speed: object = None  # guard.speed.SpeedCheck with verify_speed: the deciding (last) measurement
    speed_tried: list = field(default_factory=list)  # every SpeedCheck made, one per candidate tried
    kept: str = ""  # which candidate the function now holds: "search" or "first phase" (its rewrites only)
    refused: list = field(default_factory=list)  # (candidate, by, why) for each candidate refused
    ops_before: dict = field(default_factory=dict)
    ops_after: dict = field(default_factory=dict)
    opaque: int = 0
    opaque_ops: dict = field(default_factory=dict)  # what the opaque nodes call, with counts
    seconds: float = 0.0
    warnings: list = field(default_factory=list)  # something to look into: a numeric refusal, an error
    notes: list = field(default_factory=list)  # decisions that are the pass working: a rewrite not measured faster
    folded: str = ""  # shape values folded before it was read: "numpy", "numpy, then FoldConstant", "FoldConstant";
    # or its weight-only opaque calls: "FoldConstant: weight-only calls" (bridge/from_relax.py)
    search: object = None  # search.SearchReport: rewrites applied, cost before/after, search time
    graph_before: object = None
    graph_after: object = None
    signature: object = None
    below_min_gain: bool = False  # the search found a cheaper graph, predicted less than min_gain cheaper
    # where only the function's static part had a graph form: "n of m bindings" (the figures above are that
    # part's; the rest, control flow or shapes known only when it runs, is kept as given)
    partial: str = ""
    # where its parameters have symbolic sizes: the stand-in values it was read and searched at (the figures
    # above are at those), and the sizes the result, written back in the symbols, was checked at as well
    sized: str = ""
    # 1-D calls read as their 2-D operators over a unit axis (conv1d as conv2d on (N, C, 1, L)): "conv1d x3, ..."
    one_d: str = ""

    @property
    def rewrites(self) -> list[str]:
        """The rewrites in the function the pass returned (none unless it was optimized)."""
        if self.search is None or self.status != "optimized":
            return []
        return [f"{a.rule_id} at {a.where}: {a.text}" for a in self.search.applied]

    @property
    def graphs_explored(self) -> int:
        return self.search.graphs_explored if self.search else 0

    @property
    def cost_before(self):
        return self.search.cost_before if self.search else None

    @property
    def cost_after(self):
        return self.search.cost_after if self.search and self.status == "optimized" else self.cost_before

    @property
    def search_seconds(self):
        return self.search.seconds if self.search else 0.0

    def summary(self) -> str:
        ops = sum(v for k, v in self.ops_after.items() if k not in ("input", "weight", "constant"))
        kinds = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in sorted(self.opaque_ops.items()))
        opaque = f"{self.opaque} opaque" + (f": {kinds}" if kinds else "")
        unread = not self.ops_before and self.warnings
        read = "not read as a graph (the warning says why)" if unread else f"{ops} ops ({opaque})"
        line = f"{self.name}: {self.status}, {read}, {self.seconds:.3f} s"
        if self.partial:
            line += f"\n  static part: {self.partial} read as a graph (the figures here are its); the rest as given"
        if self.sized:
            line += f"\n  symbolic sizes: {self.sized}"
        if self.folded:
            what = "its weight-only calls" if "weight-only" in self.folded else "its shape values (R.shape_of)"
            line += f"\n  read with {what} folded to constants by {self.folded.split(':')[0]}"
        if self.one_d:
            line += (f"\n  read as 2-D over a unit axis: {self.one_d} (the rules over conv2d hold for them; the ops "
                     "counted are that reading's, with expand_dims and squeeze at its edges; a rewritten function "
                     "calls the 2-D operators on (N, C, 1, L))")
        if self.search is not None:
            if self.below_min_gain:  # (said first: the rewrites listed next are what the search found, not applied)
                line += "\n  no rewrite applied: the search's predicted gain is under min_gain; it found:"
            line += "\n  " + self.search.to_text().replace("\n", "\n  ")
        if self.check:
            line += f"\n  numeric check: {self.check}"
        for check in self.speed_tried or ([self.speed] if self.speed is not None else []):
            line += f"\n  {check.to_text()}"
        return (line + "".join(f"\n  note: {n}" for n in self.notes)
                + "".join(f"\n  warning: {w}" for w in self.warnings))


class TASOOptimizer:
    """The body of TASOPass (wrapped below as a Relax function pass).

    target: where costs are measured (default: the target in scope, else llvm).
    cost, rules, time_limit, patience: for the search (`optimize_graph`; patience: expansions in a row
      without a cheaper graph after which it stops, None never). A cost model given as an object is told
      each function's module before the search (`set_module`, for opaque calls' PrimFuncs), so it serves
      one pass at a time; its caches carry over between passes. With cost="tuned" (or a TunedCost) the
      analytic model of the tuning lowering searches, and the tuned model (each new kernel tuned with
      MetaSchedule into its database, then timed) decides which merges to keep and which graph to
      return; build the result with that database (`TunedCost.compile_tuned`). Its tuning time is
      not part of time_limit.
    check: verify a changed graph on random inputs and keep the original if it differs.
    min_gain: apply the search's result only if it is predicted (and, with verify_speed,
      measured) at least this fraction cheaper; with a judge (cost="tuned"), also what it must
      price a graph with more rewrites cheaper by to prefer it.
    verify_speed: compile the original and the rewritten module with the cost model's lowering,
      time both on the target (interleaved rounds, medians) and keep the rewrite only if faster.
      None (the default): with the tuned cost model, and under TVM's default lowering for a target that
      runs on this machine (see `verifies_speed`); False trusts the cost model.
    speed_budget: seconds of timing rounds per function for verify_speed (compilation not included).
    layout: "nhwc" offers the search's result with every conv in NHWC and the transposes between
      them cancelled (search/layout.py, proved rules), and where there are grouped or depthwise convs
      also with the dense convs only, kept where the cost model (with cost="tuned", the judge) prices
      it min_gain cheaper; None keeps the model's layouts; "auto" (the default):
      "nhwc" where a judge times tuned kernels (quick ResNet-50 under MetaSchedule: 1.33x), None
      otherwise (a layout-blind or untuned model cannot price it: TVM's default CPU lowering runs
      NHWC convs 5x slower).
    keep_build: keep the speed check's executable of the module returned, for take_build (a compile
      right after the pass then builds nothing again); off, no whole-model executable outlives a function.
    lowering: how the model will be built, for a cost model given by name: "default" (the target's
      default pipeline, when None) or "tuning" (MetaSchedule's static_shape_tuning pipeline, which fuses
      batch norms into convs itself); the kernels are priced as that pipeline forms them. A cost model
      given as an object (and "tuned") has its own: a lowering that contradicts it is an error.
    """

    def __init__(self, target=None, cost=None, time_limit: float = DEFAULT_TIME_LIMIT, rules=None, check: bool = True,
                 seed: int = 0, min_gain: float = 0.01, verify_speed: bool | None = None, speed_budget: float = 10.0,
                 lowering: str | None = None, patience: int | None = DEFAULT_PATIENCE, layout: str | None = "auto",
                 keep_build: bool = False):
        from .cost.lowering import check_lowering

        _check_arguments(target, cost, time_limit, rules, speed_budget, patience)
        self.target = target
        self.lowering = check_lowering(lowering or "default")
        fixed = _fixed_lowering(cost)
        if lowering is not None and fixed not in (None, lowering):
            raise ValueError(f"lowering={lowering!r} contradicts the cost model, which prices kernels as the "
                             f"{fixed!r} lowering forms them")
        self.cost = cost
        self.time_limit = time_limit
        self.patience = patience
        if layout not in (None, "auto", *LAYOUTS):
            raise ValueError(f"unknown layout {layout!r}; known: auto, None, {', '.join(LAYOUTS)}")
        self.layout = layout
        self.rules = rules
        self.check = check
        self.seed = seed
        if not 0.0 <= min_gain <= 1.0:
            raise ValueError(f"min_gain must be in [0, 1], got {min_gain}")
        self.min_gain = min_gain
        self.verify_speed = verify_speed
        self.speed_budget = speed_budget
        self.report: dict[str, FunctionReport] = {}  # of the latest run, by function name
        self._run = None  # the module being transformed (held, so that no later run's copy can take its place)
        self._cost_model = None
        self._compiled = {}  # verify_speed: executables by module hash, so the original is built once
        # keep the speed check's build of the module returned, for take_build (a whole model: off by default)
        self.keep_build = keep_build
        # the IRModule of the function being transformed, for its cost models; not an argument of
        # optimize_graph, whose two-argument form tests and subclasses replace
        self._module = None

    # ---- the search ------------------------------------------------------------
    def optimize_graph(self, graph: Graph, report: FunctionReport | None = None) -> Graph:
        """The cheapest equivalent graph the search finds with the proven rules under the cost model."""
        rules = resolve_rules(self.rules)
        if not len(rules.matchers):
            return graph
        cost, judge = self.cost_model(), None
        searcher = cost.search_model() if callable(getattr(cost, "search_model", None)) else cost
        if searcher is not cost:  # a dear model judges the few graphs a cheap one proposes
            cost, judge = searcher, cost
        left_out = 0
        if judge is None and self._prices_naive_matmuls(cost):
            narrowed = without_matmul_merges(rules)
            left_out, rules = len(rules.matchers) - len(narrowed.matchers), narrowed
        for model in (cost, judge):  # the PrimFuncs opaque call_tir nodes call: their patterns, their kernels
            if self._module is not None and callable(getattr(model, "set_module", None)):
                model.set_module(self._module)
        best, search_report = optimize(graph, rules, cost, time_limit=self.time_limit,
                                       saturate_merges=getattr(cost, "lowering", self.lowering) == "tuning",
                                       judge=judge, judge_margin=self.min_gain, patience=self.patience,
                                       layout=self.resolved_layout())
        if left_out:  # said in the report's settings line: a merge the user may look for was not tried
            search_report.settings["left_out"] = (f"{left_out} merges onto wider matmuls (slower under TVM's default "
                                                  "CPU lowering)")
        if report is not None:
            report.search = search_report
        if search_report.cost_after > search_report.cost_before * (1.0 - self.min_gain):
            if report is not None:
                report.below_min_gain = search_report.cost_after < search_report.cost_before
            return graph  # a predicted gain within the cost model's noise is not worth a rewrite
        return best

    def _prices_naive_matmuls(self, cost) -> bool:
        """Whether `cost` is the roofline model pricing TVM's default lowering on a CPU, whose matmuls are
        plain loops: there a matmul on wider (concatenated) weights runs slower per flop, which a roofline
        cannot see. Measured on this machine, merged 0.62x for a gated MLP's gate and up projections
        (128x512 by 512x1376 each), 0.72x for BERT-base's Q/K/V, 0.61x for NASRNN (TVM's
        CombineParallelMatmul); under MetaSchedule the same merges gain (bench/README.md). So the search
        leaves matmul merges out there, as it leaves out saturating them (which only the tuned build does)."""
        from .cost.analytic import AnalyticCost

        if not isinstance(cost, AnalyticCost) or getattr(cost, "lowering", self.lowering) != "default":
            return False
        try:
            return self._speed_target().kind.name == "llvm"
        except Exception:  # no target to read (an invalid one is refused when the pass is made)
            return False

    def resolved_layout(self) -> str | None:
        """The layout the search offers: layout, where "auto" is "nhwc" only for a cost model with a judge
        (the tuned model, whose kernels are timed tuned in each layout) and None for the others."""
        if self.layout != "auto":
            return self.layout
        model = self.cost_model()
        search_model = getattr(model, "search_model", None)
        return "nhwc" if callable(search_model) and search_model() is not model else None

    @property
    def verifies_speed(self) -> bool:
        """verify_speed, or when it is None: whether the model this pass returns can be timed here and the
        cost model's word is not enough. That is the tuned model (its tuning dwarfs the two builds; its
        verdicts come from kernels timed alone, and quick ResNet-50's batch-norm folds and a conv merge,
        judged 2.2% cheaper, measured 8% slower), and any model pricing TVM's default lowering for a
        target this machine runs: there the analytic model's predicted gains often do not materialise
        (ShuffleNetV2's search result measured 0.97x). The check costs something only when the search
        changed the graph: a build of the original and of each candidate tried, and speed_budget seconds
        of timing each (at least three runs of each, however long a run takes); and for a float16 function
        with a batch norm, a build of it as given (see _probe). Kernels to be tuned
        later (lowering="tuning" with an untuned model) cannot be timed as they will run, and are not."""
        if self.verify_speed is not None:
            return bool(self.verify_speed)
        model = self.cost_model()
        runner = getattr(model, "runner", None)
        if runner is not None and getattr(runner, "device_key", "local") != "local":
            return False  # priced on another machine (RPC): timing here would judge the wrong device
        tuned = callable(getattr(model, "tune_modules", None))  # the tuned model, or one like it
        if not tuned and _lowering_of(model, self.lowering)[0] != "default":
            return False
        return execute.runs_here(self._speed_target())

    def _speed_target(self):
        """Where the speed check builds and times: the pass's target, else its cost model's, else the
        target in scope (the host CPU outside one)."""
        model = self.cost_model()
        target = self.target if self.target is not None else getattr(model, "target", None)
        if target is not None and callable(getattr(model, "tune_modules", None)):
            # the judge tunes for this CPU's cores where the target names none (with_cores): build
            # for the same target, so the speed check reuses its lowering and schedules
            return with_cores(target)
        return tvm.target.Target(target) if target is not None else execute.default_target()

    def cost_model(self):
        """The cost model in use, resolved once per pass object (the speed check needs its lowering)."""
        if self._cost_model is None:
            self._cost_model = resolve_cost(self.cost, self.target, self.lowering)
        return self._cost_model

    # ---- pass body --------------------------------------------------------------
    def transform_function(self, func, mod, ctx):
        name = _global_name(func, mod)
        if self._run is None or not mod.same_as(self._run):  # TVM passes one module per run (its copy): a
            self._run, self.report = mod, {}  # pass object run again reports the new run only
        report = self.report[name] = FunctionReport(name)
        start = time.perf_counter()
        result = func
        try:
            with warnings.catch_warnings(record=True) as caught, reusing_lowerings():
                warnings.simplefilter("always")  # (a tuned speed check lowers what its tuning lowered)
                result = self._transform(func, mod, report)
            for w in caught:
                report.warnings.append(str(w.message))
        except Exception as exc:  # never break the user's build: keep the function
            report.status = "unchanged"
            report.warnings.append(f"taso_relay: leaving function '{name}' unchanged: "
                                   f"{type(exc).__name__}: {exc}")
            result = func
        finally:
            self._keep_only_build_of(mod, name, result)
            self._module = None
        report.seconds = time.perf_counter() - start
        for message in report.warnings:
            warnings.warn(message, stacklevel=2)
        for message in report.notes:
            logger.info(message)
        if logger.isEnabledFor(logging.INFO):
            logger.info(report.summary())
        return result

    def _transform(self, func, mod, report: FunctionReport):
        if func.attrs is not None and any(k in func.attrs for k in SKIPPED_ATTRS):
            report.status = "skipped"
            return func
        # said first: weights as parameters also make shapes values (R.shape bindings) the graph cannot read
        weights = _weights_as_parameters(func)
        if weights:
            warnings.warn(f"taso_relay: {weights} parameters of '{report.name}' after its first num_input are "
                          "weights passed at run time: the search cannot fold or merge them; bind them as "
                          "constants first (from_onnx(..., keep_params_in_input=False), "
                          "from_exported_program(..., keep_params_as_input=False), or relax.transform.BindParams)")
        with warnings.catch_warnings(record=True) as refusal:
            warnings.simplefilter("always")
            imported = graph_from_function(func, report.name, mod)
        if imported is None:
            sized = None if report.sized else self._sized(func, mod, report)
            if sized is not None:
                return sized
            part = split_static_part(func) if _has_bindings(func) and not report.partial else None
            if part is not None:
                return self._static_part(func, part, mod, report, refusal)
            report.status = "skipped" if not _has_bindings(func) else "unchanged"
        for w in refusal:  # the refusal, or what the import said on the way
            warnings.warn(str(w.message), w.category, stacklevel=2)
        if imported is None:
            return func
        graph = imported.graph
        report.folded, report.one_d = imported.folded, imported.one_d
        report.ops_before = report.ops_after = graph.op_counts()  # what the function as given calls
        report.opaque = report.ops_before.get("opaque", 0)
        for i in graph.nodes_of("opaque"):
            label = graph.nodes[i].attr("label")
            report.opaque_ops[label] = report.opaque_ops.get(label, 0) + 1
        report.graph_before, report.signature = graph, imported.signature
        self._module = mod
        best = self.optimize_graph(graph, report)
        report.graph_after = best
        candidates = self._candidates(graph, best, report)
        if not candidates:  # nothing to check or emit: the very function given, if TVM builds it
            reemitted = self._reemitted(report, imported, self._probe(func, mod, report))
            return func if reemitted is None else reemitted
        refused = None
        for label, candidate in candidates:
            rewritten, refused = self._vet(func, mod, graph, candidate, imported, report, label)
            if refused is None:
                if label == CONTESTED:
                    report.search.keep_contested()
                if label == "first phase":
                    later = sorted({a.rule_id for a in report.search.applied[report.search.first_phase:]})
                    report.search.keep_first_phase()
                    told = report.warnings if report.refused[0][1] in FAULTS else report.notes
                    told.append(f"taso_relay: the search's result for '{report.name}' {report.refused[0][2]} "
                                f"(rules: {', '.join(later)}); kept the first phase's {len(report.search.applied)} "
                                "rewrites")
                report.status, report.kept, report.graph_after = "optimized", label, candidate
                report.ops_after = _op_counts(candidate, imported.signature)
                return rewritten
            report.refused.append((label, *refused))
        reemitted = self._reemitted(report, imported, self._probe(func, mod, report))
        if reemitted is not None:
            return reemitted
        if candidates[0][0] == CONTESTED:  # the judge's verdict stands, confirmed by measurement
            if refused[0] in FAULTS:  # but a fault found on the way is still the user's to know
                report.warnings.append(f"taso_relay: the merges the judge refused for '{report.name}' "
                                       f"{refused[1]}; kept the original")
            return func
        return self._reject(report, func, *refused)

    def _static_part(self, func, part, mod, report: FunctionReport, refusal) -> relax.Function:
        """A function the graph form cannot take whole (an If, a NonZero's shape), whose static part it can:
        that part optimized as a function of its own (checks and speed check included, its own report) and
        put back in its place; where it is not, the function as given, with the refusal that stood."""
        why = "; ".join(str(w.message).split(" unchanged: ", 1)[-1] for w in refusal)
        n, total = part.sizes
        own = FunctionReport(report.name, partial=f"{n} of {total} bindings")
        head = self._transform(part.head, mod, own)
        spliced = part.splice(head) if own.status in ("optimized", "re-emitted") else None
        try:
            if spliced is not None:
                relax.analysis.well_formed(tvm.IRModule({report.name: spliced}))
        except Exception:  # noqa: BLE001 - a splice TVM would not take: the function as given
            spliced = None
        if spliced is None:
            for w in refusal:
                warnings.warn(str(w.message), w.category, stacklevel=2)
            if own.search is not None:
                report.notes.append(f"taso_relay: the static part of '{report.name}' ({own.partial}) was read as "
                                    f"a graph and searched; {own.status}, so the function is kept as given")
            return func
        for f in fields(FunctionReport):
            setattr(report, f.name, getattr(own, f.name))
        report.notes.append(f"taso_relay: '{report.name}' optimized in its static part ({n} of its {total} "
                            f"bindings, a graph of their own); the rest is kept as given: {why}")
        return spliced

    def _sized(self, func, mod, report: FunctionReport) -> relax.Function | None:
        """A function with symbolic sizes: optimized bound at stand-in sizes (checks and speed check there),
        written back in its symbols, and kept where that computes what the original does at other sizes
        (bridge/symbolic_sizes.py); the function as given where it is not; None where it has no symbols or
        cannot be bound at stand-ins (the refusal with its pinning hint follows)."""
        syms = symbolic_sizes.symbols(func)
        if syms is None:
            return None
        values, steps = symbolic_sizes.stand_ins(func, syms), {}
        bound, refusal = symbolic_sizes.bound_at(func, values)
        divisors = symbolic_sizes.divisors(func) if refusal is not None else {}
        if divisors:  # it may type-check at multiples of them (a pixel unshuffle's H // 2: even sizes)
            steps = divisors
            stepped = symbolic_sizes.stand_ins(func, syms, steps)
            bound, second = symbolic_sizes.bound_at(func, stepped, steps)
            values, steps, refusal = (stepped, steps, None) if second is None else (values, {}, refusal)
        shown = symbolic_sizes.shown_sizes(values)
        if refusal is not None:  # (a warning too: the import's refusal that follows names only the symbol)
            message = f"taso_relay: '{report.name}' not optimized at stand-in sizes for its symbolic ones ({shown}): " \
                      f"{refusal}"
            report.notes.append(message)
            warnings.warn(message, stacklevel=3)
            return None
        own = FunctionReport(report.name, sized=shown)  # (not empty: the bound function does not come back here)
        optimized = self._transform(bound, mod, own)
        for f in fields(FunctionReport):
            setattr(report, f.name, getattr(own, f.name))
        report.sized = f"read and searched at {shown} (stand-ins)"  # (a static part's report has none)
        if own.status == "re-emitted":  # TVM cannot build it as given: nothing optimized to write back
            report.status, report.rejected_by = "unchanged", ""
            report.warnings = [w for w in report.warnings if "re-emitted" not in w]
            report.notes.append(f"taso_relay: '{report.name}' does not build with TVM at the stand-in sizes as "
                                "given; kept as given")
        if own.status != "optimized":
            return func
        try:
            general = symbolic_sizes.generalize(optimized, func, values, steps)
            checked = symbolic_sizes.checked_elsewhere(general, func, mod, report.name, values, self.target,
                                                       _close_for(own.graph_before), self.seed, steps)
        except symbolic_sizes.NotGeneral as exc:
            report.status, report.rejected_by, report.kept = "rejected", "sizes", ""
            report.graph_after, report.ops_after = report.graph_before, report.ops_before
            report.warnings.append(
                f"taso_relay: '{report.name}' optimized at stand-in sizes for its symbolic ones ({shown}), but its "
                f"form in the symbols was not kept: {exc}; kept as given. {symbolic_sizes.pin_hint(syms)}")
            return func
        report.sized += (f"; the result, written in the symbols, computes what the original does at "
                         f"{' and at '.join(checked)} too")
        return general

    def _candidates(self, graph: Graph, best: Graph, report: FunctionReport) -> list[tuple[str, Graph]]:
        """What to try, in order: the search's result, then the first phase's alone (duplicates merged,
        batch norms folded: what TVM's own rule passes give), when it differs and is predicted cheaper.
        Where the judge kept the input, the graph it passed over that the search's model priced far
        cheaper (SearchReport.contested), measured only with verify_speed: the judge times kernels
        alone, and on full NASRNN its verdict and the model's differed."""
        search = report.search
        if best.hash == graph.hash:
            contested = getattr(search, "contested_graph", None)
            if contested is not None and self.verifies_speed and contested.hash != graph.hash:
                return [(CONTESTED, contested)]
            return []
        out = [("search", best)]
        first = getattr(search, "first_graph", None)
        if (first is not None and first.hash not in (graph.hash, best.hash)
                and search.cost_first <= search.cost_before * (1.0 - self.min_gain)):
            out.append(("first phase", first))
        return out

    def _vet(self, func, mod, graph: Graph, candidate: Graph, imported: Imported, report: FunctionReport,
             label: str):
        """(the rewritten function, None) if `candidate` passes the checks, else (None, (by, why))."""
        if self.check and not self._same_results(graph, candidate, imported, mod, report):
            return None, ("numeric", "computes different results")
        rewritten = _emitted(candidate, report.name, imported.signature)
        if self.verifies_speed:
            contested = label == CONTESTED  # the judge refused it: it must measure clearly faster
            check = self._speed_check(func, rewritten, mod, report, contested=contested)
            check.candidate = label
            report.speed = check
            report.speed_tried.append(check)
            if check.same_outputs is False:
                return None, ("numeric", "computes different results when compiled")
            if check.builds is not None and not check.builds[1]:
                neither = "" if check.builds[0] else " (nor does the original)"
                return None, ("build", f"does not build, tune or run with TVM{neither}")
            if not check.kept:
                if check.builds == (False, True):
                    return None, ("speed", "is not measured (TVM cannot build the original)")
                if check.baseline:
                    return None, ("speed", "ran slower than the original re-emitted")
                return None, ("speed", "is not measured faster")
        return rewritten, None

    def _reject(self, report: FunctionReport, func, by: str, why: str):
        """Keep the original function; the warning names the rules the search applied."""
        report.status, report.rejected_by, report.graph_after = "rejected", by, report.graph_before
        applied = sorted({a.rule_id for a in report.search.applied}) if report.search else []
        rules = f" (rules: {', '.join(applied)})" if applied else ""
        # a wrong result is a fault to report, whichever candidate it was; a rewrite that does not pay
        # is the speed check doing its job
        if len(report.refused) > 1:  # the search's result, then the first phase's: each its reason
            why = " and ".join(f"{reason} ({label})" for label, _, reason in report.refused)
        told = report.warnings if any(r[1] in FAULTS for r in report.refused) else report.notes
        told.append(f"taso_relay: optimized '{report.name}' {why}{rules}; kept the original")
        return func

    # ---- checks -------------------------------------------------------------------
    def _same_results(self, before: Graph, after: Graph, imported: Imported, mod,
                      report: FunctionReport | None = None) -> bool:
        """Equal outputs on random inputs: on the rewritten region, else on the whole function.

        The region check is the fast path; a region it cannot evaluate, or a difference it finds,
        is decided by the whole function (numpy interpreter when it can, else TVM).
        """
        # each region pair in its own type's rounding (a rewrite of float32 code beside float16 code is held to
        # float32's); a difference found there is decided by the whole function, in the narrow type's rounding
        region = check_region(before, after, _close, self.seed)
        if region.same or before.output_types != after.output_types:
            if report is not None:
                report.check = region.describe()
            return bool(region.same)
        same, how = self._whole_function_same(before, after, imported, mod)
        if report is not None:
            report.check = f"{region.describe()}; whole function ({how}): {'equal' if same else 'differ'}"
        return same

    def _whole_function_same(self, before: Graph, after: Graph, imported: Imported, mod) -> tuple[bool, str]:
        """In the rounding of the narrowest float the function computes in (guard.close.close_for)."""
        rng = np.random.default_rng(self.seed)
        how = "numpy"
        try:
            feeds = random_feeds(before, rng)
            with np.errstate(all="ignore"), blas_on_free_cores():  # NaN or overflow on random inputs is compared
                want, got = evaluate(before, feeds), evaluate(after, feeds)
        except NotModelled:
            how = "tvm"
            sig = imported.signature
            inputs = execute.random_inputs(sig.params, rng, mod[sig.name] if _named_in(mod, sig.name) else None)
            runs = []
            with execute.stderr_silenced():  # TVM's C++ notes while building our check's modules are not the user's
                for graph in (before, after):
                    module = module_from_graph(graph, sig.name, sig, mod=mod)
                    runs.append(execute.run_module(module, inputs, self.target, func=sig.name))
            want, got = runs
        close = _close_for(before)
        return all(close(a, b) for a, b in zip(want, got)), how

    def _speed_check(self, func, rewritten, mod, report: FunctionReport, contested: bool = False):
        """Measure the original against the rewritten module; SpeedCheck.kept is the verdict.

        contested: a graph the judge refused (SearchReport.contested). It must measure at least
        CONTEST_GAIN faster, and is not kept unmeasured: full NASRNN's merged matmuls ran
        1.2-1.45x faster on two threads, 0.9x while another tenant slowed one core, 0.75x on one."""
        from .guard.speed import SpeedCheck, faster

        min_gain = max(self.min_gain, CONTEST_GAIN) if contested else self.min_gain
        lowering, database = _lowering_of(self.cost_model(), self.lowering)
        try:
            self._original_graph = (report.graph_before, report.signature)  # the reference, where TVM cannot build
            check = self._measure_speed(func, rewritten, mod, report.name, lowering, database)
        except Exception as exc:  # noqa: BLE001 - a function the VM cannot run as given: not measured
            check = SpeedCheck(lowering=lowering, note=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        check.min_gain = min_gain
        if check.same_outputs is False or (check.builds is not None and not check.builds[1]):
            check.kept = False  # differs, or TVM cannot build or run it (whether or not it can the original)
        elif check.builds == (False, True):
            check.kept = not contested
            compared = (" and computes what the original graph does" if check.same_outputs else
                        " (its outputs not compared: the numpy interpreter cannot run the original graph)")
            report.warnings.append(f"taso_relay: {check.note}; the rewritten one builds{compared}" +
                                   ("" if check.kept else ", but a contested rewrite is not kept unmeasured"))
        elif check.measured:
            if check.baseline and not contested:  # either changes the function as given (TVM cannot build it):
                check.kept = statistics.median(check.after_rounds) <= statistics.median(check.before_rounds)
            else:
                check.kept = faster(check.before_rounds, check.after_rounds, min_gain)
            if check.baseline and check.kept:
                report.warnings.append(f"taso_relay: {check.note}; the rewritten one builds, computes what the "
                                       "original re-emitted from its graph does, and ran at least as fast")
        elif contested:
            check.kept = False
        else:
            report.warnings.append(f"taso_relay: could not measure '{report.name}' ({check.note}); "
                                   "kept the rewrite the numeric check accepted")
        return check

    def _keep_only_build_of(self, mod, name: str, func) -> None:
        """Drop the speed check's executables (whole models, kept across one function's candidates) but,
        with keep_build, the build of the module this function makes, for take_build."""
        from .guard.speed import keep_only

        final = None
        if self.keep_build and self._compiled:
            try:
                final = mod.clone() if _named_in(mod, name) else tvm.IRModule()
                final[name] = func
            except Exception:  # noqa: BLE001 - only a saving: never break the user's build for it
                final = None
        keep_only(self._compiled, final)

    def take_build(self, mod, target, lowering: str = "default", database=None):
        """The executable the speed check built of `mod` for `target` with `lowering` (and, for "tuning",
        the schedules of `database`, the judge's very object), or None.

        `mod` is what this pass (made with keep_build=True) returned: its kept rewrite was built and timed,
        so a compile that follows (`taso-relay compile`) need not build it again. Handed over once: the
        pass holds it no longer. A caller that tuned more kernels since must not ask: the build predates them.
        """
        from .guard.speed import take_compiled

        return take_compiled(self._compiled, mod, target, lowering, database)

    def _measure_speed(self, func, rewritten, mod, name: str, lowering: str, database):
        """guard.speed.measure on the module before and after (tests replace this with fixed times).

        Where TVM cannot build the original but can build the rewritten function, the rewrite is timed
        and compared against the original re-emitted from its graph (self._original_graph), which builds
        where TVM's trouble was how the importer wrote it (a float16 batch norm: TVM 0.27's default
        pipeline cannot build it, its arithmetic builds); where that does not build either, its outputs
        are compared with the original graph's as the numpy interpreter computes them."""
        original = _module_of(func, mod, name)
        changed = _with(original, name, rewritten)
        tune = getattr(self.cost_model(), "tune_modules", None)
        graph, signature = getattr(self, "_original_graph", (None, None))
        timed = self._timer(name, lowering, graph)
        if callable(tune):  # a kernel the judge did not meet alone (fused otherwise) must not run unscheduled
            try:
                database = tune([original, changed])
            except Exception as exc:  # noqa: BLE001 - which of the two TVM cannot lower decides the verdict
                database, builds = _tuned_alone(tune, original, changed)
                if not builds[1]:
                    from .guard.speed import SpeedCheck

                    side = "either function" if builds == (False, False) else "the rewritten function"
                    return SpeedCheck(lowering=lowering, builds=builds, note=f"TVM cannot lower or tune {side}: "
                                      f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        check = timed(original, changed, database=database, run_alone=False)
        if check.builds != (False, True):
            return check
        against = self._against_reemitted(original, changed, name, graph, signature, timed, tune, database)
        if against is not None:
            against.note = "; ".join(filter(None, (check.note, against.note)))
            if against.same_outputs is not False:
                return against
        # which of two that differ is wrong, the numpy interpreter says; where it cannot, the rewrite is refused
        alone = timed(original, changed, database=database, reference=_reference(graph, signature))
        return against if against is not None and alone.same_outputs is None else alone

    @staticmethod
    def _against_reemitted(original, changed, name: str, graph, signature, timed, tune, database):
        """The speed check of `changed` against `original` re-emitted from its graph, or None where that
        does not build and run either (or there is no graph)."""
        if graph is None:
            return None
        baseline = _with(original, name, _emitted(graph, name, signature))
        if callable(tune):
            try:
                database = tune([baseline, changed])
            except Exception:  # noqa: BLE001 - the re-emission cannot be tuned either: no baseline
                return None
        check = timed(baseline, changed, database=database)
        if check.builds != (True, True):
            return None
        check.baseline = "re-emitted"
        return check

    def _reemitted(self, report: FunctionReport, imported: Imported, probed=None):
        """The function re-emitted from its graph, where TVM cannot build it as given and builds it re-emitted
        and its outputs were checked: against the rewrite, by a speed check that timed it (the rewrite not
        slower than it), or against the original graph's (`probed`, by _probe). Else None."""
        timed = [c for c in report.speed_tried if c.baseline == "re-emitted" and c.same_outputs]
        check = timed[-1] if timed else probed
        if check is None:
            return None
        report.status, report.graph_after = "re-emitted", report.graph_before
        if report.refused:
            report.rejected_by = report.refused[-1][1]
        report.ops_after = _op_counts(report.graph_before, imported.signature)
        why = "; ".join(f"{label}: {reason}" for label, _, reason in report.refused) or "none found"
        if timed and timed[-1].candidate == CONTESTED:
            how = ", computes what the rewrite does, which was not measured clearly faster"
        elif timed:
            how = ", computes what the rewrite does and ran faster"
        else:  # (the probe returns only a re-emission compared with the graph)
            how = " and computes what the original graph does"
        report.warnings.append(f"taso_relay: {check.note}; returned '{report.name}' re-emitted from its graph, "
                               f"which builds{how} (no rewrite: {why})")
        return _emitted(report.graph_before, report.name, imported.signature)

    def _timer(self, name: str, lowering: str, graph: Graph | None):
        """guard.speed.measure(original, rewritten, ...) with this pass's settings for function `name`, whose
        original graph is `graph`."""
        from .guard.speed import measure

        return functools.partial(measure, func=name, target=self._speed_target(), lowering=lowering,
                                 budget_s=self.speed_budget, seed=self.seed, close=_close_for(graph),
                                 compiled=self._compiled)

    def _probe(self, func, mod, report: FunctionReport):
        """Where no speed check built the function as given, and its re-emission may build where it
        does not (a float16 batch norm, TVM's default lowering): build it; where TVM cannot, the SpeedCheck of
        its re-emission against it (built, run, compared with the original graph's outputs in numpy), if that
        builds and does not differ. Else None: the function is returned as given."""
        from .guard.speed import compile_cached

        graph = report.graph_before
        # settled where a speed check built the original, or checked the re-emission against a rewrite that
        # computes the same (not where the rewrite did not build, or was found wrong)
        settled = any(c.builds is None or c.builds[0] or (c.baseline and c.same_outputs) for c in report.speed_tried)
        if not self.verifies_speed or settled or graph is None or not writes_float16_batch_norms(graph):
            return None
        lowering, database = _lowering_of(self.cost_model(), self.lowering)
        if lowering != "default":  # MetaSchedule's pipeline builds a float16 batch_norm
            return None
        name = report.name
        original = _module_of(func, mod, name)
        try:
            compile_cached(original, self._speed_target(), database, lowering, self._compiled)
            return None  # it builds as given
        except Exception:  # noqa: BLE001 - TVM cannot build it: try its re-emission
            pass
        reemitted = _with(original, name, _emitted(graph, name, report.signature))
        check = self._timer(name, lowering, graph)(original, reemitted, database=database,
                                                   reference=_reference(graph, report.signature))
        check.candidate = "re-emission"
        check.kept = check.builds == (False, True) and check.same_outputs is True
        report.speed, report.speed_tried = check, report.speed_tried + [check]
        if check.builds == (False, True) and not check.kept:
            differs = ("computes otherwise than the graph" if check.same_outputs is False else
                       "could not be compared with it (the numpy interpreter cannot run the graph)")
            report.warnings.append(f"taso_relay: TVM cannot build '{name}' as given; its re-emission from its graph "
                                   f"builds but {differs}: returned as given")
        return check if check.kept else None


CONTESTED = "contested merges"  # the candidate made of merges the judge refused (SearchReport.contested)


SHIPPED = "shipped"  # in a list of rule files: the rule files shipped with the package


@functools.lru_cache(maxsize=8)
def _load(files: tuple[tuple[str, int], ...]) -> RuleIndex:
    """Rule files are read and compiled once per process (the index is reused across functions); a
    file changed since (verified again, say) is read again: the key has its modification time."""
    from .verifier.run import rule_digest

    rules: dict[str, object] = {}
    for path, _ in files:
        for rule in default_rules() if path == SHIPPED else _proven(path):
            first = rules.setdefault(rule.id, rule)  # a file named twice, or a shipped file named again
            if first is not rule and rule_digest(first) != rule_digest(rule):
                warnings.warn(f"{path}: rule {rule.id} differs from the rule of that id read before it; "
                              "the first is used", stacklevel=3)
    return RuleIndex(list(rules.values()))


_WITHOUT_MATMUL_MERGES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def without_matmul_merges(rules: RuleIndex) -> RuleIndex:
    """`rules` less those that merge matmuls (TASOPass._prices_naive_matmuls); indexed once per rule set.
    (A set with none to remove is remembered as False: the set itself as the value would keep its key alive.)"""
    kept = _WITHOUT_MATMUL_MERGES.get(rules)
    if kept is None:
        matchers = [m for m in rules.matchers if not merges_matmuls(m.rule)]
        kept = _WITHOUT_MATMUL_MERGES[rules] = len(matchers) < len(rules.matchers) and RuleIndex(matchers)
    return kept or rules


def _versioned(paths) -> tuple[tuple[str, int], ...]:
    def stamp(path: str) -> int:
        try:
            return os.stat(path).st_mtime_ns
        except OSError:
            return -1  # not there: load_rules says so
    return tuple((path, 0 if path == SHIPPED else stamp(path)) for path in paths)


def _proven(path: str) -> list:
    """A rule file's rules whose proof is current: PROVED with today's axioms for exactly this rule
    text (a status typed in, or a rule edited since its proof, does not count). What is left out is
    said: a reference rule set may not be proven yet, or use operators the graph form does not have."""
    from .verifier.run import proof_is_current

    rules = load_rules(path, strict=False)
    by_id = {r.id: r for r in rules}
    proven = [r for r in rules if proof_is_current(r, by_id)]
    if len(proven) < len(rules):
        warnings.warn(f"{path}: {len(rules) - len(proven)} of its {len(rules)} usable rules have no current proof "
                      f"(not PROVED, or proved before the rule or the axioms changed) and are not used; prove "
                      f"them with `taso-relay rules verify {path}`", stacklevel=3)
    return proven


def _check_arguments(target, cost, time_limit, rules, speed_budget, patience) -> None:
    """A mistake in the pass's arguments is the caller's to fix: said when the pass is made. (Once it
    runs, every failure leaves the function unchanged with a warning, which a typo should not look like.)"""
    if isinstance(cost, str) and cost not in COST_MODELS:
        raise ValueError(f"unknown cost model '{cost}' (expected one of {', '.join(COST_MODELS)}, or a cost model "
                         "object)")
    if cost is not None and not isinstance(cost, str) and not (callable(cost) or hasattr(cost, "graph_cost")):
        raise TypeError(f"cost must be a name ({', '.join(COST_MODELS)}), a cost model with graph_cost(graph), "
                        f"or a callable; got {type(cost).__name__}")
    for name, value, least in (("time_limit", time_limit, 0.0), ("speed_budget", speed_budget, 0.0)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= least:
            raise ValueError(f"{name} must be a number of seconds >= {least:g}, got {value!r}")
    if patience is not None and (isinstance(patience, bool) or not isinstance(patience, numbers.Integral)
                                 or patience < 0):
        raise ValueError(f"patience must be None or an int >= 0, got {patience!r}")
    paths = [rules] if isinstance(rules, (str, os.PathLike)) else (
        list(rules) if isinstance(rules, (list, tuple)) else [])
    for path in paths:
        if isinstance(path, (str, os.PathLike)) and os.fspath(path) != SHIPPED and not os.path.exists(path):
            raise FileNotFoundError(f"rule file not found: {os.fspath(path)}")
    if target is not None and not isinstance(target, tvm.target.Target):
        try:
            tvm.target.Target(target)
        except Exception as exc:  # TVM raises its own error types for a bad target
            raise ValueError(f"invalid target {target!r}: {exc}") from None


def resolve_rules(rules) -> RuleIndex:
    """None: the shipped proven rules; a path, or a list of paths ("shipped" naming the shipped files):
    the proven rules of those files; a list of Rules: as given."""
    if isinstance(rules, RuleIndex):
        return rules
    if rules is None or isinstance(rules, (str, os.PathLike)):
        return _load(_versioned((SHIPPED if rules is None else os.fspath(rules),)))
    rules = list(rules)
    if rules and all(isinstance(r, (str, os.PathLike)) for r in rules):
        return _load(_versioned(os.fspath(r) for r in rules))
    return RuleIndex(rules)


def resolve_cost(cost, target=None, lowering: str = "default"):
    """None or "analytic": FLOPs/bytes roofline; "measured"/"tuned": TVM on `target`; or a CostModel.

    lowering: the pipeline the kernels are formed by, for the first two ("tuned" always tunes)."""
    from . import cost as costs

    if cost is None or cost == "analytic":
        return costs.AnalyticCost(lowering=lowering)
    if cost == "measured":
        return costs.MeasuredCost(target=target, lowering=lowering)
    if cost == "tuned":
        return costs.TunedCost(target=target)
    if isinstance(cost, str):
        raise ValueError(f"unknown cost model '{cost}' (expected one of {', '.join(COST_MODELS)})")
    return cost


def _fixed_lowering(cost) -> str | None:
    """The lowering a cost model given to the pass settles itself; None where the pass's lowering decides."""
    if cost == "tuned":
        return "tuning"
    if cost is None or isinstance(cost, str):
        return None
    return getattr(cost, "lowering", None)


def _lowering_of(cost, default: str = "default") -> tuple[str, object]:
    """The lowering a cost model predicts (the pass's, `default`, unless it says) and its tuning database."""
    lowering = getattr(cost, "lowering", default)
    if lowering not in ("default", "tuning"):
        lowering = "default"
    database = cost.database() if lowering == "tuning" and callable(getattr(cost, "database", None)) else None
    return lowering, database


def _tuned_alone(tune, original, changed):
    """(database, builds) after tuning the two modules together failed, each tuned alone: the judge's one
    database (it holds what either tuned). A failure here may be MetaSchedule's rather than a lowering's;
    either way the side that fails is not kept unmeasured."""
    database, builds = None, []
    for module in (original, changed):
        try:
            database = tune([module])
            builds.append(True)
        except Exception:  # noqa: BLE001 - this one is what TVM cannot lower
            builds.append(False)
    return database, tuple(builds)


def _emitted(graph: Graph, name: str, signature):
    """`graph` as the Relax function `name` the pass returns (weight-only computations folded in numpy)."""
    return function_from_graph(graph, name, signature, fold_weights=True)


def _module_of(func, mod, name: str):
    """The module the function is checked in: `mod` where it holds `name` (with `func` as `name`: a static
    part is checked in its function's place), else one of the function alone."""
    return execute.module_with(mod, name, func)


def _with(module, name: str, func):
    """A copy of `module` with `func` as `name`."""
    changed = module.clone()
    changed[name] = func
    return changed


def _reference(graph: Graph | None, signature):
    """The original graph's outputs, as the compiled function returns them, for its parameters' arrays
    (numpy interpreter); None where it cannot say (an opaque call, an export the graph does not hold)."""
    if graph is None or signature is None:
        return None

    def flat(result):
        if isinstance(result, int):
            return [result]
        if isinstance(result, tuple):
            return [i for r in result for i in flat(r)]
        if hasattr(result, "index") and hasattr(signature, "exports"):  # an ExportRef: what the block exported
            return flat(signature.exports[result.index].structure)
        raise NotModelled(f"a result of the form {result!r}")

    def outputs(arrays):
        try:
            order = flat(signature.result)
            feeds = dict(zip(signature.input_names, arrays))
            with np.errstate(all="ignore"), blas_on_free_cores():
                values = evaluate(graph, feeds)
            types = graph.output_types
            return [np.asarray(values[i]).astype(types[i].dtype) for i in order]
        except Exception:  # noqa: BLE001 - NotModelled, or anything the interpreter cannot run: no reference
            return None

    return outputs


def _op_counts(graph: Graph, signature) -> dict[str, int]:
    """Operators per kind as the emitted function has them: what is computed from constant weights alone
    is emitted as constants (a folded batch norm's arithmetic is not an operator the model runs)."""
    params = frozenset(signature.input_names) if signature is not None else frozenset()
    counts: dict[str, int] = {}
    for node, folded in zip(graph.nodes, weight_only(graph, params)):
        if folded and node.op not in CONSTANT_OPS:
            continue
        counts[node.op] = counts.get(node.op, 0) + 1
    return counts


def _weights_as_parameters(func) -> int:
    """How many parameters follow the function's `num_input` ones: weights, as TVM's importers mark them."""
    num_input = func.attrs.get("num_input") if func.attrs is not None else None
    return max(0, len(func.params) - int(num_input)) if num_input is not None else 0


def _named_in(mod, name: str) -> bool:
    return mod is not None and name in [g.name_hint for g in mod.get_global_vars()]


def _global_name(func, mod) -> str:
    if mod is not None:
        for gvar, f in mod.functions_items():
            if f.same_as(func):
                return gvar.name_hint
    return function_name(func, "<anonymous>")


def _has_bindings(func) -> bool:
    body = func.body
    return isinstance(body, relax.SeqExpr) and any(len(b.bindings) for b in body.blocks)


TASOPass = relax.transform.function_pass(opt_level=0, name="TASOPass")(TASOOptimizer)
TASOPass.__doc__ = """Graph superoptimization of every Relax function (a tvm.transform function pass).

    seq = tvm.transform.Sequential([TASOPass(), relax.transform.LegalizeOps()])
    pass_ = TASOPass(); mod = pass_(mod); pass_.report  # per-function FunctionReport
"""


def taso_pipeline(target=None, cost=None, time_limit: float = DEFAULT_TIME_LIMIT, rules=None, check: bool = True,
                  verify_speed: bool | None = None, layout: str | None = "auto", **options):
    """TASOPass, then the build its cost model priced: `tvm.compile(mod, target, relax_pipeline="taso")`.

    `options` are TASOPass's other arguments (min_gain, patience, seed, ...). Each function's report is
    logged (logger "taso_relay.passes", level INFO), as every TASOPass logs it.

    TVM's default Relax pipeline follows, except with a cost model that tunes (cost="tuned"): the
    search was judged on MetaSchedule's kernels, so the kernels not yet in its database are tuned
    into it and the model is built from it (static_shape_tuning's passes). Built with the default
    lowering instead, those kernels would run unscheduled.
    """

    # every argument checked now (the pass's own checks), not when tvm.compile runs the pipeline
    TASOOptimizer(target=target, cost=cost, time_limit=time_limit, rules=rules, check=check,
                  verify_speed=verify_speed, layout=layout, **options)

    @tvm.transform.module_pass(opt_level=0, name="taso_pipeline")
    def _pipeline(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        where = target or tvm.target.Target.current(allow_none=True)  # tvm.compile's target: costs measured there
        taso = TASOPass(target=where, cost=cost, time_limit=time_limit, rules=rules, check=check,
                        verify_speed=verify_speed, layout=layout, **options)
        with reusing_lowerings():  # the speed check's lowering of the result, tuning's and the build's: one
            mod = taso(mod)
            model = taso.cost_model()
            if callable(getattr(model, "tune_modules", None)):
                from .cost.lowering import lower
                where = getattr(model, "target", None) or where
                mod = lower(mod, where, model.tune_modules([mod]), "tuning")
                return _build_pipeline(where)(mod)  # what tvm.compile runs after it, as in TunedCost.compile_tuned
        return _default_pipeline(where)(mod)

    return _pipeline


def _build_pipeline(target):
    """The Relax passes tvm.compile runs on a module whose kernels are formed (relax_pipeline="default")."""
    if target is not None and "gpu" in target.keys:
        return _default_pipeline(target)
    return relax.get_pipeline("default")


def _default_pipeline(target):
    """The target's own default Relax pipeline (it fuses on CPU too): the lowering the cost models assume."""
    if target is not None:
        try:
            return relax.get_default_pipeline(target)
        except (ValueError, AttributeError):
            pass
    return relax.get_pipeline("default")


if "taso" not in relax.pipeline.PIPELINE_MAP:
    relax.register_pipeline("taso")(taso_pipeline)
