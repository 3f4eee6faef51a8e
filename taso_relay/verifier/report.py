"""The verification report: a summary table for people, a JSON file beside the rules.

The JSON report is written as ``NAME.verify.report.json`` beside ``NAME.json``
(``default_rules`` skips ``*.report.json`` when it loads rule files).
"""
from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import z3

from . import axioms as AX

STATUSES = ("PROVED", "REFUTED", "UNKNOWN", "UNVERIFIED")


def report_path(rule_file) -> Path:
    p = Path(rule_file)
    return p.with_name(p.stem + ".verify.report.json")


def report_dict(result) -> dict:
    rules = result.rules
    times = [r.verification.get("time_s", 0.0) for r in rules]
    rows = []
    for r in rules:
        v, n = r.verification, r.numerics
        rows.append({"id": r.id, "text": r.text, "status": r.status, "time_s": v.get("time_s"),
                     "outputs": v.get("outputs"), "reason": v.get("reason", ""),
                     "counterexample": v.get("counterexample"),
                     "max_rel_err_f32": n.get("max_rel_err"), "numeric_flags": n.get("flags", [])})
    return {
        "rule_file": result.path.name,
        "z3": z3.get_version_string(),
        "axioms": len(AX.ALL),
        "axiom_families": {k: len(v) for k, v in AX.FAMILIES.items()},
        "timeout_s": result.timeout,
        "workers": result.workers,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "elapsed_s": round(result.elapsed_s, 2),
        "reused": result.reused,
        "interrupted": result.interrupted,
        "counts": result.counts,
        "proof_time_s": {"total": round(sum(times), 2), "max": round(max(times, default=0.0), 3)},
        "precision_sensitive": [r.id for r in rules if r.numerics.get("precision_sensitive")],
        "rules": rows,
    }


def write_report(result) -> Path:
    path = report_path(result.path)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report_dict(result), indent=1) + "\n")
    os.replace(tmp, path)
    return path


def summary_table(result, max_rows: int = 25) -> str:
    """Counts, time, and a row for every rule that is not PROVED (then the slowest proofs)."""
    rules = result.rules
    lines = [f"{result.path}: {len(rules)} rules, {len(AX.ALL)} axioms, "
             f"{result.elapsed_s:.1f} s on {result.workers} worker(s), timeout {result.timeout:g} s/query"
             + (f", {result.reused} reused" if result.reused else "")
             + (" (INTERRUPTED)" if result.interrupted else "")]
    lines.append("  ".join(f"{s}: {result.counts.get(s, 0)}" for s in STATUSES))
    flagged = [r for r in rules if r.numerics.get("precision_sensitive")]
    lines.append(f"precision-sensitive (skipped for low-precision dtypes): {len(flagged)}")
    bad = [r for r in rules if r.status != "PROVED"]
    slow = sorted((r for r in rules if r.status == "PROVED"),
                  key=lambda r: -r.verification.get("time_s", 0.0))[:5]
    shown = bad[:max_rows] + slow
    if shown:
        w = max(len(r.id) for r in shown)
        lines.append("")
        lines.append(f"{'rule':<{w}}  {'status':<8}  {'time':>7}  {'f32 err':>8}  note")
        for r in shown:
            v, n = r.verification, r.numerics
            note = v.get("reason", "") or ("slowest" if r in slow else "")
            if v.get("counterexample"):
                note = f"counterexample: {v['counterexample'].get('detail', '')}"
            err = n.get("max_rel_err")
            err = f"{err:.1e}" if isinstance(err, float) else str(err or "-")
            lines.append(f"{r.id:<{w}}  {r.status:<8}  {v.get('time_s', 0):>6.2f}s  {err:>8}  {note[:90]}")
        if len(bad) > max_rows:
            lines.append(f"... and {len(bad) - max_rows} more not proved (see {report_path(result.path).name})")
    return "\n".join(lines)
