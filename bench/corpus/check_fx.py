"""Models through TVM's PyTorch frontend, as its users import them, the pass's result against torch itself.

    make corpus-fx    # torch from .venv-corpus and TVM from .venv in one interpreter (both Python 3.11)

Per model: `torch.export.export` with a dynamic batch (`Dim`), `from_exported_program` with the weights as
constants, TASOPass with min_gain=0 and no speed check (every rewrite kept; the batch is symbolic, so the
pass works at stand-in sizes and writes its result back in the symbol), then the result bound at batch 1
and 3, built and run against the torch module on the same inputs. Random weights, with random batch-norm
statistics so that folds show in the numbers. One JSON line per model; exits 1 where any differs by more
than --tolerance of the output's scale or fails. `--layout nhwc` also converts every conv of the result to
NHWC, as check_models' option does (Relax's nn.group_norm, which this frontend writes for GroupNorm, carried).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections import Counter

import numpy as np

MODELS = {  # name: (module factory, input shape at batch 2)
    "resnet18": ("torchvision", (3, 64, 64)),
    "mobilenet_v2": ("torchvision", (3, 64, 64)),
    "mobilenet_v3_small": ("torchvision", (3, 64, 64)),
    "efficientnet_b0": ("torchvision", (3, 64, 64)),
    "regnet_y_400mf": ("torchvision", (3, 64, 64)),
    "levit_128s": ("timm", (3, 224, 224)),
    "repvit_m0_9": ("timm", (3, 64, 64)),
    "nf_resnet26": ("timm", (3, 64, 64)),
    "resnet1d": ("models_1d", (12, 1000)),  # (bench/corpus/models_1d.py: conv1d + BatchNorm1d)
    "pointnet": ("models_1d", (3, 1024)),
    "dcgan_generator": ("models_decoders", (64, 1, 1)),  # (bench/corpus/models_decoders.py: ConvTranspose2d + BN)
    "pose_resnet18": ("models_decoders", (3, 128, 96)),
    "resnet18_gn": ("models_groupnorm", (3, 64, 64)),  # (bench/corpus/models_groupnorm.py: Relax's nn.group_norm)
    "vae_decoder": ("models_groupnorm", (4, 16, 16)),
}


def build(name: str):
    from bench.corpus.export_models import randomized_batch_norms

    source, _shape = MODELS[name]
    if source == "torchvision":
        import torchvision.models as models

        model = getattr(models, name)(weights=None)
    elif source == "timm":
        import timm

        model = timm.create_model(name, pretrained=False)
    elif source == "models_1d":
        from bench.corpus import models_1d

        return randomized_batch_norms(getattr(models_1d, name)(), kind="BatchNorm1d").eval()
    elif source == "models_groupnorm":
        from bench.corpus import models_groupnorm
        from bench.corpus.export_models import randomized_norm_affines

        return randomized_norm_affines(getattr(models_groupnorm, name)(), "GroupNorm").eval()
    else:
        from bench.corpus import models_decoders

        model = getattr(models_decoders, name)()
    return randomized_batch_norms(model).eval()


def check(name: str, time_limit: float, layout: str | None = None) -> dict:
    import torch
    import tvm
    from tvm.relax.frontend.torch import from_exported_program

    from bench.corpus.check_models import layout_pass
    from bench.harness.measure import error_of_scale
    from taso_relay.bridge.execute import run_module
    from taso_relay.passes import TASOPass

    start = time.perf_counter()
    model, shape = build(name), MODELS[name][1]
    batch = torch.export.Dim("batch", min=1, max=64)
    program = torch.export.export(model, (torch.randn(2, *shape),), dynamic_shapes=({0: batch},))
    mod = from_exported_program(program, keep_params_as_input=False)
    kind = layout_pass(layout) if layout else TASOPass
    taso = kind(min_gain=0.0, verify_speed=False, time_limit=time_limit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rewritten = taso(mod)
    report = taso.report["main"]
    applied = [a.rule_id for a in report.search.applied] if report.search and report.status == "optimized" else []
    record = {"model": name, "status": report.status, "rewrites": len(applied), "sized": report.sized,
              "rules": dict(sorted(Counter(applied).items())), "pass_s": round(time.perf_counter() - start, 1)}
    if layout:
        record["layout"] = getattr(taso, "layout_note", None)
    errors = {}
    symbol = rewritten["main"].params[0].ty.shape.values[0]
    for k in (1, 3):
        x = np.random.default_rng(k).standard_normal((k, *shape)).astype("float32")
        with torch.no_grad():
            want = [model(torch.from_numpy(x)).numpy()]
        bound = tvm.IRModule({"main": rewritten["main"].bind_symbolic_vars({symbol: k})})
        errors[k] = error_of_scale(run_module(bound, [x])[:1], want)
    record["vs_torch"] = max(errors.values(), key=lambda e: float("inf") if e is None else e)
    record["at_batch"] = errors
    record["total_s"] = round(time.perf_counter() - start, 1)
    return record


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", help=f"default: all of {', '.join(MODELS)}")
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--time-limit", type=float, default=8.0)
    p.add_argument("--layout", choices=("nhwc",), default=None,
                   help="also convert every conv of the result to this layout (check_models' option)")
    args = p.parse_args(argv)
    unknown = sorted(set(args.models) - set(MODELS))
    if unknown:
        p.error(f"unknown models: {', '.join(unknown)}")
    import torch

    torch.manual_seed(0)
    failed = 0
    names = args.models or list(MODELS)
    for name in names:
        try:
            record = check(name, args.time_limit, args.layout)
        except Exception as exc:  # noqa: BLE001 - one model's failure is its record
            record = {"model": name, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
        error = record.get("vs_torch")
        failed += "error" in record or error is None or error > args.tolerance
        print(json.dumps(record), flush=True)
    print(f"{len(names) - failed} of {len(names)} models: the pass's result computes what torch does "
          f"(within {args.tolerance:g} of the output's scale) at batch 1 and 3", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
