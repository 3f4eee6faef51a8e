"""Parallel matmuls of one input, apart and merged (read by a split, or by slices), under TVM's default lowering.

    PYTHONPATH=. python -m bench.matmul_merge                       # gated MLP: 1x128x512 by 512x1376, twice
    PYTHONPATH=. python -m bench.matmul_merge --form qkv --hidden 768 --width 768

Why TASOPass leaves matmul merges out of its search for TVM's default CPU
lowering: there matmuls are plain loops (no schedule), and one on the
concatenated weights runs slower per flop than the ones it replaces, which the
roofline model cannot see. Each form is compiled once with `tvm.compile` and
timed in interleaved rounds; the ratios are against the separate matmuls.
`--form mlp` reads the parts as silu(gate) * up, `--form qkv` as attention's
Q, K and V heads (reshape and transpose). It also counts the kernels: a split
with parts going different ways is a kernel of its own, a slice fuses into
its reader.
"""
from __future__ import annotations

import argparse
import json
import statistics


def build(form: str, kind: str, seq: int, hidden: int, width: int):
    """The Relax module: `kind` is separate, split or slices."""
    import numpy as np
    from tvm import relax
    import tvm.relax.op as op

    parts_n = 2 if form == "mlp" else 3
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((hidden, width)).astype("float32") / hidden for _ in range(parts_n)]
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, seq, hidden), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            if kind == "separate":
                parts = [bb.emit(op.matmul(x, relax.const(w))) for w in ws]
            else:
                y = bb.emit(op.matmul(x, relax.const(np.concatenate(ws, axis=1))))
                if kind == "split":
                    tup = bb.emit(op.split(y, parts_n, axis=2))
                    parts = [bb.emit(relax.TupleGetItem(tup, i)) for i in range(parts_n)]
                else:
                    parts = [bb.emit(op.strided_slice(y, axes=[2], begin=[i * width], end=[(i + 1) * width]))
                             for i in range(parts_n)]
            if form == "mlp":
                out = bb.emit_output(op.multiply(op.nn.silu(parts[0]), parts[1]))
            else:
                heads = [bb.emit(op.permute_dims(op.reshape(p, (1, seq, width // 64, 64)), [0, 2, 1, 3]))
                         for p in parts]
                scores = bb.emit(op.matmul(heads[0], op.permute_dims(heads[1], [0, 1, 3, 2])))
                out = bb.emit_output(op.matmul(scores, heads[2]))
        bb.emit_func_output(out)
    return bb.get()


def kernels(mod) -> int:
    """Kernel launches after TVM's fusion (LegalizeOps .. FuseTIR, as the default lowering runs them)."""
    import tvm
    from tvm import relax

    from bench.harness.compile import _count_kernels

    seq = tvm.transform.Sequential([relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
                                    relax.transform.FoldConstant(), relax.transform.FuseOps(),
                                    relax.transform.FuseTIR()])
    return _count_kernels(seq(mod))["call_tir"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--form", choices=("mlp", "qkv"), default="mlp")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--width", type=int, default=1376, help="columns of each weight (qkv: a multiple of 64)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    import numpy as np
    import tvm
    from tvm import relax

    target = tvm.target.Target({"kind": "llvm", "num-cores": args.threads})
    x = tvm.runtime.tensor(np.random.default_rng(1).standard_normal((1, args.seq, args.hidden)).astype("float32"))
    forms = ("separate", "split", "slices")
    vms, counts = {}, {}
    for kind in forms:
        mod = build(args.form, kind, args.seq, args.hidden, args.width)
        counts[kind] = kernels(mod)
        vms[kind] = relax.VirtualMachine(tvm.compile(mod, target), tvm.cpu())
    rounds = {k: [] for k in forms}
    for _ in range(args.rounds):
        for kind in forms:
            timer = vms[kind].time_evaluator("main", tvm.cpu(), number=3, repeat=3)
            rounds[kind].append(timer(x).median * 1e3)
    medians = {k: statistics.median(v) for k, v in rounds.items()}
    result = {"args": vars(args), "kernels": counts, "median_ms": medians,
              "ratio_vs_separate": {k: medians["separate"] / v for k, v in medians.items()}}
    for kind in forms:
        print(f"{kind:9s} {medians[kind]:9.3f} ms  {result['ratio_vs_separate'][kind]:.3f}x  "
              f"{counts[kind]} kernels")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
