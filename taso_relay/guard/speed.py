"""Measure that a rewritten module is faster than the original before keeping it.

The cost model predicts; this checks. Both modules are compiled with the
lowering the cost model assumes (cost/lowering.py: "default", or "tuning"
with the tuned model's schedules) and timed on the target in interleaved
rounds, alternating which goes first, as bench/harness does: drift of a
shared machine then hits both alike. The verdict compares medians. A side
TVM cannot build is not timed: the caller never keeps a rewrite that does not
build, and keeps one that builds where the original does not.
"""
from __future__ import annotations

import logging
import math
import statistics
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from ..cost.host_speed import SLOW as HOST_SLOW

logger = logging.getLogger("taso_relay.guard.speed")


@dataclass
class SpeedCheck:
    """Measured seconds per run of the original and the rewritten function, and the verdict."""

    lowering: str = "default"
    min_gain: float = 0.0  # the rewrite is kept only if at least this fraction faster
    before_s: float | None = None  # median over rounds
    after_s: float | None = None
    before_rounds: list = field(default_factory=list)
    after_rounds: list = field(default_factory=list)
    number: int = 1  # runs averaged per round
    compile_s: float = 0.0
    measure_s: float = 0.0
    kept: bool = True  # the rewritten function was kept
    # which rewrite was measured: the search's result, the first phase's alone, the judge's contested merges,
    # or "re-emission": the function re-emitted from its graph, where TVM cannot build it as given
    candidate: str = "search"
    same_outputs: bool | None = None  # the two compiled functions' outputs agree (None: not compared)
    threads: int | None = None  # TVM runtime threads the timing ran with (TVM_NUM_THREADS)
    target_cores: int | None = None  # the target's num-cores, which the schedules were made for
    host_slowdown: float | None = None  # numpy's matmul and copy after the timing, against the best seen here
    note: str = ""  # why it was not measured
    builds: tuple | None = None  # (original, rewritten): whether TVM built and ran each (None: not tried)
    # "re-emitted": TVM cannot build the original as given, so the rewrite was timed and compared against
    # the original re-emitted from its graph (which builds: a float16 batch norm as its arithmetic)
    baseline: str = ""

    @property
    def measured(self) -> bool:
        return self.before_s is not None and self.after_s is not None

    @property
    def speedup(self) -> float | None:
        """before / after (> 1: the rewrite is faster)."""
        return self.before_s / self.after_s if self.measured and self.after_s > 0 else None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["speedup"] = self.speedup
        return data

    def to_text(self) -> str:
        verdict = "kept the rewrite" if self.kept else "kept the original" + (" re-emitted" if self.baseline else "")
        if self.candidate == "re-emission":  # (passes._probe: the function as given does not build)
            verdict = "returned the re-emission" if self.kept else "kept the original"
        if self.candidate not in ("search", "re-emission"):
            verdict = f"{self.candidate}: {verdict}"
        if not self.measured:
            return f"speed check ({self.lowering} lowering): not measured ({self.note}); {verdict}"
        threads = f", {self.threads} thread{'s' if self.threads != 1 else ''}" if self.threads else ""
        original = "original re-emitted" if self.baseline else "original"
        text = (f"speed check ({self.lowering} lowering{threads}): {original} {self.before_s * 1e3:.3f} ms, "
                f"rewritten {self.after_s * 1e3:.3f} ms (x{self.speedup:.3f}; median of {len(self.before_rounds)} "
                f"rounds of {self.number} runs; needs x{1 / (1 - self.min_gain):.3f}) -> {verdict}")
        notes = [self.note] if self.note else []
        if self.host_slowdown is not None and self.host_slowdown >= HOST_SLOW:
            notes.append(f"the host ran numpy's matmul and copy {self.host_slowdown:.2f}x slower than the best it has "
                         "shown: other work (another process, or another tenant of the host) slowed it, and a "
                         "speedup timed so may not hold on a quiet machine")
        if self.threads and self.target_cores and self.threads < self.target_cores:
            notes.append(f"TVM ran {self.threads} of the target's {self.target_cores} cores: set TVM_NUM_THREADS "
                         "to time what a deployment with all of them would run")
        return text + "".join(f" ({n})" for n in notes)


def host_slowdown(target) -> float | None:
    """How much slower this host runs numpy's matmul and copy now than the best it has shown
    (cost/host_speed.py); None off CPU or where it cannot be measured."""
    from ..cost.lowering import as_target

    if as_target(target).kind.name != "llvm":
        return None
    from ..cost.host_speed import slowdown_now

    return slowdown_now()


def faster(before_rounds, after_rounds, min_gain: float, alpha: float = 0.01) -> bool:
    """Whether the rewrite is shown at least `min_gain` faster: median against median, and either

    * with the slowest fifth of the rewrite's rounds and the fastest fifth of the original's set
      aside, every remaining round of the rewrite faster than every remaining round of the
      original. With 3 rounds nothing is set aside (every round against every round), so
      round-to-round noise never decides for a rewrite; with 25, one or two disturbed rounds do
      not decide against it. But a gain smaller than the rounds' spread never passes this, or
    * with 10 or more rounds, the rewrite faster in so many of the pairs of rounds (timed side by
      side, so each pair shares the machine's state) that a fair coin would do it with
      probability at most `alpha` (a one-sided sign test; ties count against the rewrite). Quick
      ResNeXt-50's batch-norm folds ran 3% faster by median in 17 of 25 pairs (p = 0.054) with
      rounds spread over 13%: not shown; more rounds (now up to 60) can show such a gain.
    """
    if not before_rounds or not after_rounds:
        return False
    if statistics.median(after_rounds) > statistics.median(before_rounds) * (1.0 - min_gain):
        return False
    slowest_after = sorted(after_rounds)[len(after_rounds) - 1 - len(after_rounds) // 5]
    fastest_before = sorted(before_rounds)[len(before_rounds) // 5]
    if slowest_after <= fastest_before:
        return True
    pairs = list(zip(before_rounds, after_rounds))
    if len(pairs) < 10:
        return False
    wins = sum(after < before for before, after in pairs)
    return sign_test_p(wins, len(pairs)) <= alpha


def sign_test_p(wins: int, n: int) -> float:
    """P(at least `wins` heads in `n` tosses of a fair coin)."""
    return sum(math.comb(n, k) for k in range(wins, n + 1)) / 2 ** n


def measure(original, rewritten, func: str, target, *, lowering: str = "default", database=None,
            budget_s: float = 10.0, min_rounds: int = 3, max_rounds: int = 60, round_s: float = 0.05,
            seed: int = 0, close=None, compiled: dict | None = None, reference=None,
            run_alone: bool = True) -> SpeedCheck:
    """Compile both modules, check their outputs agree (with `close`), time `func` interleaved.

    The outputs are compared after compilation as well: a second numeric check, of what TVM
    built, which the graph-level check cannot see (e.g. how the bridge emitted the rewrite).

    budget_s bounds the timing rounds (not the compilation); at least min_rounds run whatever it says.
    compiled: a dict kept by the caller across calls: executables by module hash (the original,
    measured against several candidates, is built once).
    reference: the original's outputs for given input arrays, or None (what it cannot compute), for a
    rewritten module that TVM builds where it cannot build the original.
    run_alone: run the rewritten module where TVM cannot build the original (False: only build it, for a
    caller that will measure it against something else; a float16 model's run on a CPU takes a minute).
    """
    import tvm
    from tvm import relax

    from ..bridge.execute import device_of, flatten, random_inputs
    from ..cost.lowering import as_target
    from ..cost.progress import progress

    target = as_target(target)
    check = SpeedCheck(lowering=lowering, threads=runtime_threads(), target_cores=_cores(target))
    start = time.perf_counter()
    # seconds to minutes inside a pass that otherwise says nothing: a bar on a terminal says what runs
    executables, errors = [], []
    for m in progress((original, rewritten), total=2, desc="speed check: compiling", unit="model"):
        try:
            executables.append(compile_cached(m, target, database, lowering, compiled))
            errors.append(None)
        except Exception as exc:  # noqa: BLE001 - which side TVM cannot build decides the verdict
            executables.append(None)
            errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    check.compile_s = time.perf_counter() - start
    device = device_of(target)
    params = original[func].params
    arrays = random_inputs(params, np.random.default_rng(seed), original[func])
    inputs = [tvm.runtime.tensor(np.asarray(x, order="C"), device) for x in arrays]
    vms, outs = [None, None], [None, None]
    # the first runs: a float16 model on a CPU runs for a minute (TVM has no float16 CPU schedules)
    for k, ex in progress(enumerate(executables), total=2, desc="speed check: a first run of each", unit="model"):
        if ex is None or (k == 1 and errors[0] is not None and not run_alone):
            continue
        try:  # also the warm-up run
            vms[k] = relax.VirtualMachine(ex, device)
            outs[k] = flatten(vms[k][func](*inputs))
        except Exception as exc:  # noqa: BLE001 - a build that fails when run counts as none
            errors[k] = f"fails when run: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    check.builds = tuple(e is None for e in errors)
    if not all(check.builds):
        # TVM 0.27's default pipeline legalizes a float16 batch_norm to a float32 result, which the next
        # operator refuses: a float16 model whose batch norms the rewrite folds builds only rewritten. A
        # rewrite TVM cannot build or run is never kept; one that builds where the original does not is
        # compared with `reference` (the original's outputs as the numpy interpreter computes them)
        check.note = "; ".join(f"the {name} function TVM built {e}" if e.startswith("fails when run") else
                               f"TVM cannot build the {name} function: {e}"
                               for name, e in zip(("original", "rewritten"), errors) if e)
        if check.builds == (False, True) and reference is not None and close is not None:
            want = reference(arrays)  # a fraction of a second (convs as float32 BLAS matmuls): the build's
            # run above is what takes long for a float16 model on a CPU (TVM has no float16 CPU schedules)
            if want is not None:
                check.same_outputs = len(want) == len(outs[1]) and all(map(close, want, outs[1]))
                if not check.same_outputs:
                    check.note += "; the rewritten function's outputs differ from the original graph's"
        return check
    if close is not None:
        check.same_outputs = len(outs[0]) == len(outs[1]) and all(map(close, *outs))
        if not check.same_outputs:
            check.note = "outputs differ"
            return check
    start = time.perf_counter()
    timers = [_Timer(vm, func, device, inputs) for vm in vms]
    ones = [t.once() for t in timers]
    number, rounds = plan_rounds(ones, [t.slow for t in timers], budget_s, round_s, min_rounds, max_rounds)
    # runs of half a second or more are timed one at a time by the wall clock: the runs just timed, in the
    # first round's order, are that round (a float16 model on a CPU runs for half a minute)
    first = 1 if number == 1 and all(t.slow for t in timers) else 0
    times = interleaved([lambda t=t: t.round(number) for t in timers],
                        progress(range(first, rounds), total=rounds - first,
                                 desc="speed check: timing before and after", unit="round"))
    if first:
        times = [[one] + rest for one, rest in zip(ones, times)]
    check.measure_s = time.perf_counter() - start
    check.number = number
    check.before_rounds, check.after_rounds = times
    check.before_s, check.after_s = statistics.median(times[0]), statistics.median(times[1])
    check.host_slowdown = host_slowdown(target)
    return check


def plan_rounds(ones, slow, budget_s: float, round_s: float, min_rounds: int, max_rounds: int) -> tuple[int, int]:
    """(runs per round, rounds) for functions that run once in `ones` seconds each: a round of the
    slowest about round_s, all rounds of all of them about budget_s (min_rounds to max_rounds).

    A round timed by time_evaluator (`slow` false) costs one run more than it times (its untimed
    warm-up call): counted, or runs of 50-500 ms (one timed run a round) took twice the budget."""
    number = max(1, min(1000, math.ceil(round_s / max(max(ones), 1e-7))))
    per_round = sum((number if s else number + 1) * one for one, s in zip(ones, slow))
    rounds = min(max_rounds, budget_s / max(per_round, 1e-9))  # before int(): the budget may be inf
    return number, max(min_rounds, int(rounds))


def interleaved(timers, rounds) -> list[list[float]]:
    """One time per round from each timer (a callable), alternating which runs first: a shared
    machine's drift (another tenant, a frequency change) then falls on all alike."""
    times: list[list[float]] = [[] for _ in timers]
    order = list(range(len(timers)))
    for r in rounds:
        for k in (order if r % 2 == 0 else order[::-1]):
            times[k].append(timers[k]())
    return times


def runtime_threads() -> int | None:
    """The threads TVM's runtime runs kernels with in this process.

    Unless TVM_NUM_THREADS says otherwise, TVM takes half the logical CPUs on x86 (it assumes
    two hyperthreads per core): one thread on a 2-vCPU machine. A rewrite's gain can hinge on it:
    full NASRNN's merged matmuls ran 1.2-1.45x faster than the original on two threads and
    about 0.75x on one."""
    import tvm

    num_threads = tvm.get_global_func("runtime.NumThreads", allow_missing=True)
    return int(num_threads()) if num_threads is not None else None


def _cores(target) -> int | None:
    cores = target.attrs.get("num-cores") if target.kind.name == "llvm" else None
    return int(cores) if cores is not None and int(cores) > 0 else None


COMPILED_KEPT = 4  # executables a cache holds (whole models: not many)


def _key(mod, target, lowering: str, database) -> tuple:
    from tvm_ffi import structural_hash

    from ..cost.lowering import as_target
    # the database itself, not its id: the key keeps it alive, so a later database cannot take its id
    return structural_hash(mod), str(as_target(target)), lowering, database


def take_compiled(compiled: dict, mod, target, lowering: str = "default", database=None):
    """The executable a cache holds of `mod` built for `target` with `lowering` and `database` (that very
    object; None: no tuning database), removed from the cache; None if it holds none."""
    return compiled.pop(_key(mod, target, lowering, database), None) if compiled else None


def keep_only(compiled: dict, mod) -> None:
    """Drop every executable of a cache but the builds of `mod` (None: drop them all)."""
    if not compiled:
        return
    digest = None
    if mod is not None:
        from tvm_ffi import structural_hash
        digest = structural_hash(mod)
    for key in [k for k in compiled if k[0] != digest]:
        del compiled[key]


def compile_cached(mod, target, database, lowering: str, compiled: dict | None):
    """`mod` built with `lowering`, from the cache `compiled` (a dict, or None: no cache) or built now and kept."""
    from ..cost.lowering import compile_module

    if compiled is None:
        return compile_module(mod, target, database, lowering)
    key = _key(mod, target, lowering, database)
    if key not in compiled:
        while len(compiled) >= COMPILED_KEPT:
            compiled.pop(next(iter(compiled)))
        logger.info("verify_speed: compiling a module with the %s lowering", lowering)
        compiled[key] = compile_module(mod, target, database, lowering)
    return compiled[key]


class _Timer:
    """One compiled function: time_evaluator for fast runs, the wall clock for slow ones."""

    SLOW_S = 0.5  # time_evaluator adds an untimed warm-up call per round: too dear above this

    def __init__(self, vm, func, device, inputs):
        self.vm, self.func, self.device, self.inputs = vm, func, device, inputs
        self.slow = False

    def once(self) -> float:
        start = time.perf_counter()
        self.vm[self.func](*self.inputs)
        self.device.sync()
        one = time.perf_counter() - start
        self.slow = one >= self.SLOW_S
        return one

    def round(self, number: int) -> float:
        """Mean seconds per run over `number` runs."""
        if self.slow:
            start = time.perf_counter()
            for _ in range(number):
                self.vm[self.func](*self.inputs)
            self.device.sync()
            return (time.perf_counter() - start) / number
        evaluator = self.vm.time_evaluator(self.func, self.device, number=number, repeat=1)
        return float(evaluator(*self.inputs).mean)
