"""Result file, chart and tables - all derived from one JSON document.

* ``result_path``: ``bench/results/<date>-<target kind>-<mode>.json`` (CPU and
  CUDA results never share a file);
* ``write_chart``: PNG with the speedup over TVM alone per model and
  configuration, and the search time per model;
* ``render_table``: the markdown table; ``update_readme`` writes it between
  ``<!-- bench-table:start -->`` / ``<!-- bench-table:end -->`` markers (CUDA
  results: ``bench-table-cuda``), so a README table is always regenerated
  from a JSON file, never edited by hand.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

CONFIGS = ("tvm", "tvm_rules", "taso")
LABELS = {"tvm": "TVM", "tvm_rules": "TVM + Relax rules", "taso": "TVM + TASOPass",
          "onnxruntime": "onnxruntime"}
REF = "onnxruntime"


# ------------------------------------------------------------------ naming
def target_kind(target: dict) -> str:
    kind = target.get("kind", "llvm")
    return "cpu" if kind in ("llvm", "c") else kind


def mode_name(quick: bool, tune_trials: int, trials_per_task: int = 0) -> str:
    base = "quick" if quick else ""
    tuned = (f"tuned{tune_trials}" if tune_trials > 0 else f"shared{trials_per_task}"
             if trials_per_task > 0 else ("" if quick else "default"))
    return "-".join(p for p in (base, tuned) if p)


def result_path(results_dir: str | os.PathLike, date: str, kind: str, mode: str) -> Path:
    return Path(results_dir) / f"{date}-{kind}-{mode}.json"


def marker_key(kind: str) -> str:
    return "bench-table" if kind == "cpu" else f"bench-table-{kind}"


# ------------------------------------------------------------------ json
def write_json(result: dict, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1, sort_keys=False) + "\n")
    tmp.replace(path)  # never leave a half-written result
    return path


def load_json(path: str | os.PathLike) -> dict:
    return json.loads(Path(path).read_text())


# ------------------------------------------------------------------ summary
def geomean(values) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def speedup(model: dict, cfg: str) -> float | None:
    entry = model.get("configs", {}).get(cfg) if cfg != REF else model.get(REF)
    if not entry or entry.get("status", "ok") != "ok":
        return None
    return (entry.get("timing") or {}).get("speedup")


def cpu_speedup(model: dict, cfg: str) -> float | None:
    entry = model.get("configs", {}).get(cfg)
    if not entry or entry.get("status", "ok") != "ok":
        return None
    return (entry.get("timing") or {}).get("cpu_speedup")


def summarize(result: dict) -> dict:
    return {"geomean_speedup": {c: geomean(speedup(m, c) for m in result["models"])
                                for c in (*CONFIGS, REF)}}


# ------------------------------------------------------------------ table
def _ms(v) -> str:
    if v is None:
        return "–"
    return f"{v:.3g}" if v < 10 else f"{v:.0f}" if v >= 1000 else f"{v:.1f}"


def _cell(model: dict, cfg: str) -> str:
    entry = model.get("configs", {}).get(cfg) if cfg != REF else model.get(REF)
    if not entry:
        return "–"
    if entry.get("status", "ok") != "ok":
        return entry.get("status", "error")
    t = entry["timing"]
    if cfg == "tvm":
        return _ms(t["median_ms"])
    return f"{_ms(t['median_ms'])} ({t['speedup']:.2f}×)"


def _kernels(model: dict) -> str:
    vals = []
    for c in CONFIGS:
        e = model.get("configs", {}).get(c, {})
        vals.append(str(e.get("kernel_launches")) if e.get("status") == "ok" else "–")
    return "/".join(vals)


def _cpu_speedups(model: dict) -> str:
    vals = []
    for c in ("tvm_rules", "taso"):
        e = model.get("configs", {}).get(c, {})
        v = (e.get("timing") or {}).get("cpu_speedup") if e.get("status") == "ok" else None
        vals.append("–" if v is None else f"{v:.2f}×")
    return "/".join(vals)


def _search(model: dict) -> str:
    """The search's own seconds / the whole pass (numeric check, verify_speed builds and timing); a
    tuned judge's seconds (MetaSchedule tuning the kernels it prices) are named apart."""
    e = model.get("configs", {}).get("taso", {})
    if e.get("status") != "ok":
        return "–"
    report = e.get("report") if isinstance(e.get("report"), dict) else {}
    searches = [(f or {}).get("search") or {} for f in report.values() if isinstance(f, dict)]
    searched = [s["seconds"] for s in searches if isinstance(s.get("seconds"), (int, float))]
    judged = sum(float((s.get("settings") or {}).get("judge_seconds") or 0) for s in searches)
    whole = f"{e.get('search_time_s', 0):.1f}"
    if not searched:
        return whole
    judge = f" (+{judged:.0f} judge)" if judged >= 10 else f" (+{judged:.1f} judge)" if judged >= 0.05 else ""
    return f"{sum(searched) - judged:.1f}{judge} / {whole}"


def _rewrites(model: dict) -> str:
    e = model.get("configs", {}).get("taso", {})
    if e.get("status") != "ok":
        return "–"
    r, g = e.get("rules_applied"), e.get("graphs_explored")
    return f"{'n/r' if r is None else r} / {'n/r' if g is None else g}"


def _numerics(model: dict) -> str:
    flags = []
    for c in ("tvm_rules", "taso"):
        e = model.get("configs", {}).get(c, {})
        n = e.get("numerics_vs_tvm")
        flags.append("–" if e.get("status") != "ok" or not n else ("ok" if n["ok"] else "FAIL"))
    return "/".join(flags)


def render_table(result: dict) -> str:
    """The markdown block for a README, generated only from ``result``."""
    lines = [
        f"Results: `{result.get('file', '?')}` — target `{json.dumps(result['target'])}`, "
        f"kernel treatment **{result['kernel_treatment']}**, {result['threads']} threads, "
        f"median of {result['rounds']} interleaved rounds; "
        f"{result['machine'].get('cpu_model', '?')}; TVM {result['versions'].get('tvm')}, "
        f"onnxruntime {result['versions'].get('onnxruntime')}.",
        "",
        "| Model | TVM (ms) | TVM + Relax rules (ms, speedup) | TVM + TASOPass (ms, speedup) "
        "| onnxruntime (ms, speedup) | CPU-time speedup 2/3 | kernels 1/2/3 | TASO search / pass (s) "
        "| TASO rewrites / graphs | numerics 2/3 vs 1 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in result["models"]:
        name = m["name"] + (" (quick)" if m.get("quick") else "")
        if m.get("status") != "ok":
            lines.append(f"| {name} | {m.get('status', 'error')}: {m.get('error', '')[:80]} "
                         "| | | | | | | | |")
            continue
        lines.append(f"| {name} | {_cell(m, 'tvm')} | {_cell(m, 'tvm_rules')} | "
                     f"{_cell(m, 'taso')} | {_cell(m, REF)} | {_cpu_speedups(m)} | "
                     f"{_kernels(m)} | {_search(m)} | "
                     f"{_rewrites(m)} | {_numerics(m)} |")
    g = (result.get("summary") or summarize(result))["geomean_speedup"]

    def gm(c):
        return "–" if g.get(c) is None else f"{g[c]:.2f}×"
    lines.append(f"| **geomean speedup** | 1.00× | {gm('tvm_rules')} | {gm('taso')} | "
                 f"{gm(REF)} | | | | | |")
    lines.append("")
    lines.append("Speedup = median of TVM alone / median of the configuration, from the same "
                 "interleaved rounds. Kernels = kernel launches per inference after fusion. "
                 "Numerics: outputs of (2) and (3) against (1). n/r = not reported by TASOPass. "
                 "CPU-time speedup: the same ratio on process CPU time (all threads), which "
                 "other processes competing for the cores distort less than wall time.")
    notes = result.get("notes") or []
    if notes:
        lines.append("")
        lines.extend(f"- {n}" for n in notes)
    return "\n".join(lines)


def replace_block(text: str, key: str, block: str) -> str | None:
    """``text`` with the content between ``key`` markers replaced; None if absent."""
    start, end = f"<!-- {key}:start -->", f"<!-- {key}:end -->"
    # Markers count only on lines of their own (prose may quote them).
    pattern = re.compile(r"^" + re.escape(start) + r"[ \t]*$.*?^" + re.escape(end) + r"[ \t]*$",
                         re.S | re.M)
    if not pattern.search(text):
        return None
    return pattern.sub(lambda _: f"{start}\n{block}\n{end}", text, count=1)


def extract_block(text: str, key: str) -> str | None:
    start, end = f"<!-- {key}:start -->", f"<!-- {key}:end -->"
    m = re.search(r"^" + re.escape(start) + r"[ \t]*\n(.*?)\n?^" + re.escape(end) + r"[ \t]*$",
                  text, re.S | re.M)
    return m.group(1) if m else None


def update_readme(path: str | os.PathLike, key: str, block: str) -> bool:
    """Rewrites the marked block of ``path``; False (and no change) without markers."""
    path = Path(path)
    if not path.exists():
        return False
    new = replace_block(path.read_text(), key, block)
    if new is None:
        return False
    path.write_text(new)
    return True


# ------------------------------------------------------------------ chart
def write_chart(result: dict, path: str | os.PathLike) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = [m for m in result["models"] if m.get("status") == "ok"]
    names = [m["name"] + ("*" if m.get("quick") else "") for m in models]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.4),
                                   gridspec_kw={"width_ratios": [3, 2]})
    width = 0.8 / len(CONFIGS)
    colors = {"tvm": "#9e9e9e", "tvm_rules": "#1f77b4", "taso": "#d62728"}
    for i, c in enumerate(CONFIGS):
        vals = [speedup(m, c) for m in models]
        xs = [k + (i - (len(CONFIGS) - 1) / 2) * width for k in range(len(models))]
        bars = ax1.bar(xs, [v or 0 for v in vals], width, label=LABELS[c], color=colors[c])
        for b, v in zip(bars, vals):
            ax1.annotate("n/a" if v is None else f"{v:.2f}", (b.get_x() + b.get_width() / 2,
                         b.get_height()), ha="center", va="bottom", fontsize=7)
        cpu = [cpu_speedup(m, c) for m in models]
        pts = [(x, v) for x, v in zip(xs, cpu) if v is not None]
        if pts and c != "tvm":
            ax1.scatter([p[0] for p in pts], [p[1] for p in pts], marker="D", s=14,
                        color="black", zorder=3, label="same, by CPU time" if i == 1 else None)
    ax1.axhline(1.0, color="black", lw=0.8, ls="--")
    ax1.set_xticks(range(len(models)), names, rotation=20)
    ax1.set_ylabel("speedup over TVM alone (median, same run)")
    ax1.set_title(f"{result['target_kind']} · kernels: {result['kernel_treatment']} · "
                  f"{result['threads']} threads")
    ax1.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4)

    search = {c: [((m["configs"].get(c) or {}).get("search_time_s") or 0)
                  if (m["configs"].get(c) or {}).get("status") == "ok" else 0 for m in models]
              for c in ("tvm_rules", "taso")}
    w2 = 0.38
    for i, c in enumerate(("tvm_rules", "taso")):
        xs = [k + (i - 0.5) * w2 for k in range(len(models))]
        ax2.bar(xs, [max(v, 1e-3) for v in search[c]], w2, label=LABELS[c], color=colors[c])
    ax2.set_yscale("log")
    ax2.set_xticks(range(len(models)), names, rotation=20)
    ax2.set_ylabel("graph optimisation time (s, log)")
    ax2.set_title("search / pass time")
    ax2.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    if any(m.get("quick") for m in models):
        fig.text(0.01, 0.01, "* quick variant (reduced size)", fontsize=8)
    fig.suptitle(Path(result.get("file", "")).name, fontsize=9)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
