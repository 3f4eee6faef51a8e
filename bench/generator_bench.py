"""Time and peak memory of rule generation.

    python bench/generator_bench.py --max-ops 3 [--workers N] [--scheduler ADDR] [--json FILE]

Runs the whole pipeline (enumerate, pair, prune, float re-check, generalise)
from scratch into a temporary directory (fresh checkpoints), then prints the
stage counts, wall time per phase and peak resident memory of the main
process and of the largest worker process (getrusage).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from taso_relay.generator.config import Settings  # noqa: E402
from taso_relay.generator.report import stage_table  # noqa: E402
from taso_relay.generator.run import generate  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-ops", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--scheduler", default=None)
    ap.add_argument("--checkpoint-dir", default=None, help="keep checkpoints here (default: a temporary directory)")
    ap.add_argument("--json", default=None, help="also write the measurements to this file")
    args = ap.parse_args(argv)
    settings = Settings(max_ops=args.max_ops)
    with tempfile.TemporaryDirectory() as tmp:
        ck = args.checkpoint_dir or os.path.join(tmp, "ck")
        out = Path(tmp) / f"taso_k{args.max_ops}.json"
        start = time.perf_counter()
        rep = generate(settings, out, workers=args.workers, scheduler=args.scheduler, checkpoint_dir=ck,
                       fresh=args.checkpoint_dir is None, progress=True, log=lambda m: print(m, file=sys.stderr))
        wall = time.perf_counter() - start
    result = {
        "max_ops": args.max_ops, "workers": args.workers or os.cpu_count(), "scheduler": args.scheduler,
        "cpus": os.cpu_count(), "wall_s": round(wall, 1), "time_s": rep["time_s"],
        "peak_memory_mib": rep["peak_memory_mib"], "counts": {s["stage"]: s["count"] for s in rep["stages"]},
    }
    print(stage_table(rep))
    print(json.dumps({k: v for k, v in result.items() if k != "counts"}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
