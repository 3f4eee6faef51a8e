"""The rewrite report of TASOPass as text and as JSON.

`TASOPass.report` maps function names to `FunctionReport`s. Fields the search
adds later (applied rewrites, costs before and after) are shown when present,
so this module does not have to change when they land.
"""
from __future__ import annotations

import dataclasses

NON_OPS = ("input", "weight", "constant")
EXTRA_FIELDS = ("rewrites", "applied", "cost_before", "cost_after", "cost_model", "search_seconds",
                "graphs_explored", "search")


def report_dict(report) -> dict:
    """One FunctionReport as plain data (graphs and other objects left out)."""
    if dataclasses.is_dataclass(report):
        return _fields(report)
    return {k: v for k, v in vars(report).items() if _is_plain(v)}


_SKIP = object()


def _fields(obj) -> dict:
    """A dataclass instance's fields as plain data, those that have none (graphs) left out."""
    items = ((f.name, _jsonable(getattr(obj, f.name))) for f in dataclasses.fields(obj))
    return {name: value for name, value in items if value is not _SKIP}


def _jsonable(value):
    """Plain data for JSON, or _SKIP for objects such as graphs."""
    for method in ("to_dict", "as_dict"):
        if hasattr(value, method):
            try:
                return getattr(value, method)()
            except Exception:  # noqa: BLE001
                return _SKIP
    if _is_plain(value) and not dataclasses.is_dataclass(value):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _fields(value)
    if isinstance(value, (list, tuple)):
        items = [_jsonable(v) for v in value]
        return [v for v in items if v is not _SKIP]
    return str(value) if isinstance(value, (int, float, str)) else _SKIP


def _is_plain(value) -> bool:
    if value is None or isinstance(value, (str, int, float, bool)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    return False  # dataclasses included: _jsonable converts them field by field


def _ops(counts: dict) -> str:
    body = {k: v for k, v in sorted(counts.items()) if k not in NON_OPS}
    return ", ".join(f"{k} {v}" for k, v in body.items()) or "none"


def format_report(reports: dict) -> list[str]:
    """Readable lines for every function the pass saw: its summary, then what the summary leaves out."""
    lines = []
    for report in reports.values():
        has_summary = hasattr(report, "summary")
        summary = report.summary() if has_summary else str(report)
        lines.extend(summary.splitlines())
        before, after = getattr(report, "ops_before", {}), getattr(report, "ops_after", {})
        if before:
            lines.append(f"  ops before: {_ops(before)}")
        if after and after != before:
            lines.append(f"  ops after:  {_ops(after)}")
        if not has_summary:  # FunctionReport.summary() already shows the search, its costs and rewrites
            lines.extend(_extra_fields(report))
        if getattr(report, "status", "") != "optimized" and not getattr(report, "rewrites", None) \
                and "no rewrite applied" not in summary:  # the search's text says so when it found none
            lines.append("  " + _why_unchanged(report))
    return lines


def _extra_fields(report) -> list[str]:
    lines = []
    for name in EXTRA_FIELDS:
        value = getattr(report, name, None)
        if value in (None, [], {}, ""):
            continue
        if hasattr(value, "to_text"):
            lines.append(f"  {name.replace('_', ' ')}:")
            lines.extend(f"    {line}" for line in str(value.to_text()).splitlines())
        elif isinstance(value, (list, tuple)):
            lines.append(f"  {name.replace('_', ' ')}:")
            lines.extend(f"    {item}" for item in value)
        else:
            lines.append(f"  {name.replace('_', ' ')}: {value}")
    return lines


def _why_unchanged(report) -> str:
    """A search that found rewrites and a function returned as it was: say which gate stopped them."""
    if getattr(report, "below_min_gain", False):
        return "no rewrite applied: the search's predicted gain is under min_gain"
    return "no rewrite applied"


def changed(reports: dict) -> bool:
    """Whether the pass returned any function other than as given (re-emitted counts: it builds now)."""
    return any(getattr(r, "status", "") in ("optimized", "re-emitted") for r in reports.values())
