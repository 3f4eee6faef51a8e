"""The analytic model: FLOPs and bytes of each kernel against the machine's peaks.

cost(kernel) = max(flops / peak_flops, bytes / bandwidth) + launch overhead
(a roofline). Bytes are what the fused kernel reads and writes in memory: its
inputs (activations and weights) and the outputs that leave it; intermediates
inside a kernel stay in registers/cache, which is why fusion pays.

The peaks are measured once with numpy (a float32 matmul and a large copy) and
cached as JSON under the user cache directory; tests pass `MachinePeaks`
explicitly, which makes the model fully deterministic. No TVM needed.
"""
from __future__ import annotations

import json
import math
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from ..graph import Node, TensorType
from .kernel import Kernel
from .paths import default_peaks_path
from .protocol import KernelCostModel


@dataclass(frozen=True)
class MachinePeaks:
    gflops: float  # sustained float32 GFLOP/s (numpy matmul)
    gbps: float  # sustained copy bandwidth, GB/s (read + write counted)
    launch_s: float = 2e-6  # fixed cost per kernel call


PEAKS_METHOD = 2  # bump when measure_peaks changes: cached peaks of an older method are measured again


def measure_peaks(seconds: float = 0.3, repeats: int = 5) -> MachinePeaks:
    """Time a 1024^3 matmul and a 64 MiB copy with numpy: best of at least `repeats` runs.

    Each is run once untimed first: the first copy into fresh memory page-faults and
    measured 0.4-0.9 GB/s where the steady rate is ~40 GB/s, which made every
    memory-bound operator look a hundred times dearer than it is.
    """
    import numpy as np

    def best_of(fn) -> float:
        fn()  # warm-up: page faults, thread pool start
        best, runs = math.inf, 0
        deadline = time.perf_counter() + seconds
        while runs < repeats or time.perf_counter() < deadline:
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
            runs += 1
        return best

    n = 1024
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    b = a.copy()
    gflops = 2 * n ** 3 / best_of(lambda: a @ b) / 1e9
    src = np.ones(16 * 1024 * 1024, np.float32)
    dst = np.empty_like(src)
    gbps = 2 * src.nbytes / best_of(lambda: np.copyto(dst, src)) / 1e9
    return MachinePeaks(gflops=round(gflops, 3), gbps=round(gbps, 3))


def _host() -> str:
    return f"{platform.node()}/{platform.machine()}/{os.cpu_count()}"


def _busy_cores() -> float | None:
    """The 1-minute load average beyond this process's own core (None where there is none to read)."""
    try:
        return max(0.0, os.getloadavg()[0] - 1.0)
    except (OSError, AttributeError):  # no load average on this platform (Windows)
        return None


def load_peaks(path: str | os.PathLike | None = None, remeasure: bool = False) -> MachinePeaks:
    """Peaks for this machine from the JSON cache, measured (and saved) on first use.

    Peaks measured while other work held the cores read low, and every later search would price with
    them: such a measurement is kept with the load it was taken under, and measured again once the
    machine is quieter, keeping the higher of each figure."""
    path = Path(path) if path else default_peaks_path()
    cached, busy_now = None, _busy_cores()
    if not remeasure and path.exists():
        try:
            data = json.loads(path.read_text())
            if data.get("host") == _host() and data.get("method") == PEAKS_METHOD:
                cached = MachinePeaks(float(data["gflops"]), float(data["gbps"]), float(data.get("launch_s", 2e-6)))
                busy_then = data.get("busy_cores")
                if busy_then is None or busy_now is None or busy_now + BUSY_MARGIN >= float(busy_then):
                    return cached
        except (ValueError, KeyError, TypeError, OSError):
            pass  # unreadable: measure again
    peaks = measure_peaks()
    if cached is not None:
        peaks = MachinePeaks(max(peaks.gflops, cached.gflops), max(peaks.gbps, cached.gbps), cached.launch_s)
    busy = busy_now if busy_now is not None and busy_now >= BUSY_MARGIN else None
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({**asdict(peaks), "host": _host(), "method": PEAKS_METHOD,
                               "measured_at": time.time(), "busy_cores": busy}, indent=1))
    os.replace(tmp, path)
    return peaks


BUSY_MARGIN = 0.5  # cores of other load that make a measurement worth repeating when the machine is quieter


# ---- FLOPs and bytes --------------------------------------------------------------
UNARY_FLOPS = {"relu": 1, "neg": 1, "abs": 1, "cast": 1, "sigmoid": 4, "tanh": 6, "exp": 4, "log": 4,
               "sqrt": 4, "rsqrt": 5, "erf": 8, "gelu": 10, "gelu_tanh": 10, "silu": 5, "clip": 2, "isnan": 1,
               "leaky_relu": 2}
BINARY_FLOPS = {"add": 1, "sub": 1, "mul": 1, "div": 1, "maximum": 1, "minimum": 1, "pow": 8}


MAC_OPS = ("conv2d", "conv2d_transpose", "matmul")  # multiply-add bound: element-wise epilogues fuse into them


def multiply_add_flops(node: Node, in_types: Sequence[TensorType]) -> float:
    """A conv's or matmul's multiply-adds (2 flops each), without its fused activation."""
    out = node.types[0]
    if node.op == "conv2d_transpose":  # as TVM computes it: a conv over the input spread out by the stride, its
        w = in_types[1]                  # zeros included (s * s times the multiply-adds that count, at stride s)
        return 2.0 * out.size * (w.shape[0] // node.attr_dict["groups"]) * w.shape[2] * w.shape[3]
    if node.op == "conv2d":
        w = in_types[1]
        kernel_elems = w.size // (w.shape[0] if node.attr_dict["kernel_layout"].startswith("O") else w.shape[3])
        return 2.0 * out.size * kernel_elems
    return 2.0 * out.size * in_types[0].shape[-1]


def node_flops(node: Node, in_types: Sequence[TensorType]) -> float:
    """Floating-point operations of one node (multiply-add = 2)."""
    op, out = node.op, node.types[0]
    a = node.attr_dict
    if op in MAC_OPS:
        return multiply_add_flops(node, in_types) + (out.size if a.get("activation", "none") != "none" else 0)
    if op in ("max_pool2d", "avg_pool2d"):
        kh, kw = a["kernel"]
        return float(out.size * kh * kw)
    if op in UNARY_FLOPS:
        return float(out.size * UNARY_FLOPS[op])
    if op in BINARY_FLOPS:
        return float(out.size * BINARY_FLOPS[op])
    if op == "where":
        return float(out.size)
    if op == "batch_norm":
        return 4.0 * out.size
    if op in ("layer_norm", "group_norm", "exported_group_norm"):
        return 8.0 * out.size
    if op == "softmax":
        return 5.0 * out.size
    if op in ("sum", "mean", "max", "min"):
        return float(in_types[0].size)
    if op == "variance":  # a mean, then a subtract, square and sum per value
        return 4.0 * in_types[0].size
    if op == "resize2d":  # linear: three lerps of two multiplies and an add per output value
        return 9.0 * out.size if a["method"] == "linear" else 0.0
    return 0.0  # data movement: concat, split, transpose, reshape, slices, pad, opaque


def nbytes(t: TensorType) -> int:
    import numpy as np

    return t.size * np.dtype(t.dtype).itemsize


def kernel_flops(kernel: Kernel) -> float:
    g = kernel.graph
    return sum(node_flops(g.nodes[i], [g.type_of(r) for r in g.nodes[i].inputs]) for i in kernel.nodes)


def moves_innermost(perm: Sequence[int], shape: Sequence[int]) -> bool:
    """Whether a transpose of `shape` by `perm` changes which non-unit axis is innermost.

    Such a transpose reads or writes with a stride however it is fused, and its
    cache lines are fetched more than once (charged as one more pass over its
    output, strided_bytes); one that keeps the innermost axis copies whole rows.
    """
    kept = [a for a in perm if shape[a] != 1]
    return bool(kept) and kept[-1] != max(kept)


def strided_bytes(kernel: Kernel) -> float:
    """Extra traffic of the kernel's transposes that move the innermost axis: one more pass each.

    Without it a transpose fused into an injective kernel is free, and relu(x) =>
    T(relu(T(x))) (an H/W swap of the generated rules) cost nothing more than relu(x).
    """
    g, extra = kernel.graph, 0.0
    for i in kernel.nodes:
        node = g.nodes[i]
        if node.op == "transpose" and moves_innermost(node.attr_dict["perm"], g.type_of(node.inputs[0]).shape):
            extra += nbytes(node.types[0])
    return extra


def compute_flops(kernel: Kernel) -> float:
    """The flops that take compute time: in a kernel with a conv or matmul, only their multiply-adds.

    Its element-wise epilogue (bias, batch norm, activation) works on values already in registers,
    hidden under the multiply-adds. Counted at the compute peak, it made moving an activation out
    of the epilogue into a memory-bound kernel look cheaper: relu(x1), relu(x2) =>
    split(relu(concat(x1, x2))) on every SqueezeNet fire module and ShuffleNet block."""
    g = kernel.graph
    anchors = [i for i in kernel.nodes if g.nodes[i].op in MAC_OPS]
    if not anchors:
        return kernel_flops(kernel)
    return sum(multiply_add_flops(g.nodes[i], [g.type_of(r) for r in g.nodes[i].inputs]) for i in anchors)


def input_bytes(kernel: Kernel) -> float:
    """Bytes the kernel reads: each input whole, except one read only through slices, of which it reads
    the slices (a merged projection's part, sliced inside the kernel that reshapes it)."""
    g, members = kernel.graph, kernel.nodes
    total = 0.0
    for ref, t in zip(kernel.inputs, kernel.input_types):
        readers = [g.nodes[i] for i in members if ref in g.nodes[i].inputs]
        if readers and all(n.op == "strided_slice" for n in readers):
            total += min(nbytes(t), sum(nbytes(n.types[0]) for n in readers))
        else:
            total += nbytes(t)
    return total


def kernel_bytes(kernel: Kernel) -> float:
    return float(input_bytes(kernel) + sum(nbytes(t) for t in kernel.output_types) + strided_bytes(kernel))


class AnalyticCost(KernelCostModel):
    """Roofline cost per kernel; deterministic given the peaks.

    efficiency scales the peak compute rate (e.g. 0.05 to approximate TVM's
    untuned default lowering, which reaches a few percent of BLAS speed).
    """

    name = "analytic"

    def __init__(self, peaks: MachinePeaks | None = None, efficiency: float = 1.0,
                 peaks_path: str | os.PathLike | None = None, lowering: str = "default"):
        super().__init__(lowering=lowering)
        self.peaks = peaks or load_peaks(peaks_path)
        self.efficiency = efficiency

    def estimate(self, kernel: Kernel) -> float:
        p = self.peaks
        compute = compute_flops(kernel) / (p.gflops * 1e9 * self.efficiency)
        memory = kernel_bytes(kernel) / (p.gbps * 1e9)
        return max(compute, memory) + p.launch_s

    def _compute(self, kernels: Sequence[Kernel]) -> list[float]:
        return [self.estimate(k) for k in kernels]
