"""The generation report (NAME.report.json beside the rule file) and `rules stats`."""
from __future__ import annotations

import json
import platform
import sys
from collections import Counter
from pathlib import Path

from .config import Settings

STAGE_TEXT = (
    ("graphs", "graphs enumerated (canonical operator and input order)"),
    ("candidates", "candidate pairs: same collapsed fingerprint, not renamings of one another"),
    ("exact", "pairs with equal exact fingerprints (under some renaming)"),
    ("renaming", "after pruning pairs equal up to input renaming"),
    ("common_subgraph", "after pruning pairs with a common subgraph"),
    ("common_final_op", "after pruning pairs with a common final operator"),
    ("independent_parts", "after pruning pairs made of independent parts"),
    ("float_check", "after the float64 re-check on fresh inputs (two seeds)"),
    ("rules_directed", "distinct generalised rules (each direction a rule)"),
    ("equivalences", "distinct generalised equivalences (unordered pairs)"),
)


def report_path(rule_file) -> Path:
    p = Path(rule_file)
    return p.with_name(p.name[:-5] + ".report.json" if p.name.endswith(".json") else p.name + ".report.json")


def build_report(settings: Settings, counts: dict, enum_counts: dict, bucket_stats: dict, stats: dict,
                 times: dict, memory: dict, execution: dict) -> dict:
    levels = {k.split(":", 1)[1]: v for k, v in sorted(stats.items()) if k.startswith("level:")}
    return {
        "format": 1,
        "settings": settings.to_dict(),
        "settings_digest": settings.digest,
        "stages": [{"stage": key, "what": text, "count": counts.get(key, 0)} for key, text in STAGE_TEXT],
        "enumeration": dict(sorted(enum_counts.items())),
        "buckets": bucket_stats,
        "renamed_duplicate_graphs": stats.get("renamed_duplicates", 0),
        "generalisation": {"directed_rules_by_level": levels,
                           "directions_not_generalised": stats.get("not_generalised", 0)},
        "time_s": times,
        "peak_memory_mib": memory,
        "execution": execution,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }


def write_report(rule_file, report: dict) -> Path:
    path = report_path(rule_file)
    body = {k: v for k, v in report.items() if k != "rules"}
    path.write_text(json.dumps(body, indent=1) + "\n")
    return path


def stage_table(report: dict) -> str:
    width = max(len(s["what"]) for s in report["stages"])
    lines = [f"{s['what']:<{width}}  {s['count']:>9}" for s in report["stages"]]
    return "\n".join(lines)


def stats_text(rule_file) -> str:
    """What `taso-relay rules stats FILE` prints."""
    from ..subst.rule_io import read_rule_file, unreadable_reasons

    read = read_rule_file(rule_file)
    rules = read.rules
    lines = [f"{rule_file}: {len(rules)} rules"]
    if read.unreadable:
        lines.append(f"not usable here: {len(read.unreadable)} ({unreadable_reasons(read.unreadable)})")
    by_status = Counter(r.status for r in rules)
    lines.append("verification: " + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items())))
    by_size = Counter((len(r.source), len(r.target)) for r in rules)
    lines.append("operators (source -> target): " + ", ".join(
        f"{a}->{b}: {n}" for (a, b), n in sorted(by_size.items())))
    ops = Counter(n.op for r in rules for n in r.source + r.target)
    lines.append("operators used: " + ", ".join(f"{k} {v}" for k, v in ops.most_common()))
    outs = Counter(len(r.outputs) for r in rules)
    lines.append("outputs per rule: " + ", ".join(f"{k}: {v}" for k, v in sorted(outs.items())))
    levels = Counter(r.provenance.get("generalisation", "?") for r in rules)
    lines.append("generalisation: " + ", ".join(f"{k} {v}" for k, v in sorted(levels.items())))
    constrained = sum(1 for r in rules if r.constraints)
    lines.append(f"rules with constraints: {constrained}")
    eqs = {r.provenance.get("equivalence") for r in rules}
    lines.append(f"equivalences (unordered): {len(eqs)}")
    rp = report_path(rule_file)
    if rp.exists():
        try:
            rep = json.loads(rp.read_text())
            lines.append("")
            lines.append(f"generation report ({rp.name}):")
            lines.append(stage_table(rep))
            t = rep.get("time_s", {})
            m = rep.get("peak_memory_mib", {})
            lines.append(f"time: {t.get('total')} s (enumerate {t.get('enumerate')} s); peak memory: "
                         f"main {m.get('main_process')} MiB, largest worker {m.get('largest_worker')} MiB")
        except (OSError, ValueError, KeyError):
            lines.append(f"(report {rp.name} unreadable)")
    return "\n".join(lines)
