"""Timing and numerics.

All configurations of one model (and onnxruntime) are timed in interleaved
rounds - ``tvm, tvm_rules, taso, onnxruntime, tvm, tvm_rules, ...`` - so slow
drift of the machine (thermal, other load) hits every configuration alike.
Each round is one ``time_evaluator`` call (``number`` runs averaged); the
result per configuration is the median over rounds, and ratios are taken
against configuration (1) of the same run.
"""

from __future__ import annotations

import math
import resource
import statistics
import time

import numpy as np

REFERENCE = "onnxruntime"
# Numerics of (2) and (3) against (1): float rounding only.
ATOL_REL = 1e-3  # largest difference allowed, as a fraction of the output's largest finite |reference|
# A run at least this long is timed directly instead of with time_evaluator.
SLOW_RUN_S = 0.5


def to_numpy_list(out) -> list[np.ndarray]:
    """A VM result (tensor or nested tuple) as a flat list of numpy arrays."""
    if hasattr(out, "numpy"):
        return [out.numpy()]
    if isinstance(out, np.ndarray):
        return [out]
    flat = []
    for item in out:
        flat.extend(to_numpy_list(item))
    return flat


def error_of_scale(out: list[np.ndarray], ref: list[np.ndarray]) -> float | None:
    """max |out - ref| / max |ref| over the outputs, each against its own scale (its largest finite
    magnitude). A scale floored at 1.0 made every result agree for bench/corpus's MobileNets and
    EfficientNets, whose random weights give logits of 1e-9 to 1e-13. None for another number or shape
    of outputs; inf where the non-finite elements differ (the same inf, or NaN on both sides, agree) or
    where an all-zero output gets anything else."""
    if len(out) != len(ref):
        return None
    worst = 0.0
    for o, r in zip(out, ref):
        if o.shape != r.shape:
            return None
        o64, r64 = o.astype(np.float64), r.astype(np.float64)
        finite = np.isfinite(o64) & np.isfinite(r64)
        same_special = (o64 == r64) | (np.isnan(o64) & np.isnan(r64))
        if not np.all(finite | same_special):
            return float("inf")
        if not finite.any():
            continue
        err = float(np.max(np.abs(o64[finite] - r64[finite])))
        scale = float(np.max(np.abs(r64[finite])))
        worst = max(worst, err / scale if scale > 0 else (0.0 if err == 0 else float("inf")))
    return worst


def compare(out: list[np.ndarray], ref: list[np.ndarray]) -> dict:
    """Max absolute error and error_of_scale of ``out`` against ``ref``, and whether the latter is
    within ATOL_REL (inf, thus not ok, where their NaN and inf elements differ)."""
    if len(out) != len(ref):
        return {"ok": False, "max_abs_err": None, "max_rel_err": None,
                "note": f"{len(out)} outputs vs {len(ref)}"}
    for o, r in zip(out, ref):
        if o.shape != r.shape:
            return {"ok": False, "max_abs_err": None, "max_rel_err": None,
                    "note": f"shape {o.shape} vs {r.shape}"}
    rel = error_of_scale(out, ref)
    max_abs = 0.0 if rel != float("inf") else float("inf")
    for o, r in zip(out, ref):
        o64, r64 = o.astype(np.float64), r.astype(np.float64)
        finite = np.isfinite(o64) & np.isfinite(r64)
        max_abs = max(max_abs, float(np.max(np.abs(o64[finite] - r64[finite]), initial=0.0)))
    return {"ok": rel <= ATOL_REL, "max_abs_err": max_abs, "max_rel_err": rel, "atol_rel": ATOL_REL}


class TVMRunner:
    """One compiled configuration: VM, bound input, time_evaluator."""

    def __init__(self, executable, device, x: np.ndarray):
        import tvm
        from tvm import relax
        self.device = device
        self.vm = relax.VirtualMachine(executable, device)
        self.x = tvm.runtime.tensor(x, device=device)
        self.number = 1
        self.timer = "time_evaluator"

    def outputs(self) -> list[np.ndarray]:
        return to_numpy_list(self.vm["main"](self.x))

    def single_run_s(self) -> float:
        t0 = time.perf_counter()
        self.vm["main"](self.x)
        self.device.sync()
        return time.perf_counter() - t0

    def time_round(self) -> float:
        """Mean seconds per run over ``number`` runs (one round).

        ``time_evaluator`` makes an untimed warm-up call every time it is
        called; for a run of seconds (untuned CPU kernels) that doubles the
        cost of a round for nothing, so slow runs are timed directly
        (``timer = "wall"``: one call plus device sync - the VM call overhead
        is negligible at that scale)."""
        if self.timer == "wall":
            return self.single_run_s()
        ev = self.vm.time_evaluator("main", self.device, number=self.number, repeat=1)
        return float(ev(self.x).mean)


def ort_providers(target_kind: str) -> list[str]:
    """onnxruntime's CUDA provider for a CUDA target when it is installed, else CPU."""
    import onnxruntime as ort
    if target_kind == "cuda" and "CUDAExecutionProvider" in ort.get_available_providers():
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


class ORTRunner:
    """onnxruntime on the same number of threads, as an outside reference."""

    def __init__(self, model_bytes: bytes, input_name: str, x: np.ndarray, threads: int,
                 providers: list[str] | None = None):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Idle onnxruntime workers spin by default and would steal the cores
        # from the TVM configuration timed right after them.
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(model_bytes, so,
                                            providers=providers or ["CPUExecutionProvider"])
        self.feed = {input_name: x}
        self.number = 1
        self.timer = "wall"
        self.providers = self.session.get_providers()

    def outputs(self) -> list[np.ndarray]:
        return [np.asarray(o) for o in self.session.run(None, self.feed)]

    def single_run_s(self) -> float:
        t0 = time.perf_counter()
        self.session.run(None, self.feed)
        return time.perf_counter() - t0

    def time_round(self) -> float:
        t0 = time.perf_counter()
        for _ in range(self.number):
            self.session.run(None, self.feed)
        return (time.perf_counter() - t0) / self.number


def calibrate(runner, min_round_s: float, max_number: int = 1000) -> float:
    """Sets ``runner.number`` so that one round lasts about ``min_round_s``;
    returns the estimated seconds of one round.  Expects a warmed-up runner
    (``outputs()`` ran already); a fast model gets a second warm-up run."""
    one = max(runner.single_run_s(), 1e-7)
    if one < 0.1:
        one = max(runner.single_run_s(), 1e-7)
    runner.number = int(min(max_number, max(1, math.ceil(min_round_s / one))))
    if one >= SLOW_RUN_S and hasattr(runner, "vm"):
        runner.timer = "wall"
    return one * runner.number


def _process_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def interleaved(runners: dict, rounds: int, progress=None,
                cpu: dict | None = None) -> dict[str, list[float]]:
    """``rounds`` rounds of every runner in order; seconds per run, per round.

    If ``cpu`` is a dict it receives, per runner, the process CPU seconds
    (user + system, all threads) per run in each round.  Wall time is the
    measurement; CPU time is a second view that other processes competing
    for the cores inflate much less (time slices lost to them are not
    counted), so it shows whether a wall-time difference is contention.
    """
    times: dict[str, list[float]] = {name: [] for name in runners}
    if cpu is not None:
        cpu.update({name: [] for name in runners})
    for r in range(rounds):
        for name, runner in runners.items():
            c0 = _process_cpu_s()
            times[name].append(runner.time_round())
            if cpu is not None:
                # time_evaluator makes one untimed warm-up call per round
                runs = runner.number + (1 if runner.timer == "time_evaluator" else 0)
                cpu[name].append((_process_cpu_s() - c0) / runs)
        if progress:
            progress(r + 1, rounds, {n: t[-1] for n, t in times.items()})
    return times


def summarize(times: dict[str, list[float]], baseline: str,
              cpu: dict[str, list[float]] | None = None) -> dict[str, dict]:
    """Medians (ms), spread, and ratios to ``baseline`` from the same rounds.

    ``speedup`` = median(baseline) / median(config) (> 1: faster than the
    baseline); ``speedup_paired`` is the median of the per-round ratios.
    """
    base = times[baseline]
    out = {}
    for name, ts in times.items():
        med = statistics.median(ts)
        paired = [b / t for b, t in zip(base, ts) if t > 0]
        out[name] = {
            "median_ms": med * 1e3,
            "min_ms": min(ts) * 1e3,
            "max_ms": max(ts) * 1e3,
            "rounds_ms": [t * 1e3 for t in ts],
            "speedup": statistics.median(base) / med if med > 0 else None,
            "speedup_paired": statistics.median(paired) if paired else None,
        }
        if cpu and cpu.get(name) and cpu.get(baseline):
            cmed = statistics.median(cpu[name])
            out[name]["cpu_median_ms"] = cmed * 1e3
            out[name]["cpu_rounds_ms"] = [c * 1e3 for c in cpu[name]]
            out[name]["cpu_speedup"] = statistics.median(cpu[baseline]) / cmed if cmed > 0 else None
    return out
