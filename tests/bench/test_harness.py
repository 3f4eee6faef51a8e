"""Benchmark harness: pure report/table functions (fast) and a --quick run (slow)."""

from __future__ import annotations

import json
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `bench` is a top-level folder, not an installed package
    sys.path.insert(0, str(REPO))

from bench.harness import configs, measure, report  # noqa: E402


def _timing(rounds_ms, base_ms):
    times = {"tvm": [t / 1e3 for t in base_ms], "x": [t / 1e3 for t in rounds_ms]}
    return measure.summarize(times, "tvm")["x"]


def synthetic_result(file="bench/results/2099-01-01-cpu-default.json"):
    base = [10.0, 11.0, 10.5]

    def cfg(ms, **extra):
        entry = {"status": "ok", "kernel_launches": 5, "search_time_s": 0.5,
                 "timing": _timing(ms, base)}
        entry.update(extra)
        return entry

    models = [
        {"name": "alpha", "quick": False, "status": "ok", "configs": {
            "tvm": cfg(base),
            "tvm_rules": cfg([8.0, 8.5, 9.0], numerics_vs_tvm={"ok": True}),
            "taso": cfg([5.0, 5.5, 6.0], numerics_vs_tvm={"ok": True}, rules_applied=3,
                        graphs_explored=40)},
         "onnxruntime": {"status": "ok", "timing": _timing([1.0, 1.0, 1.0], base)}},
        {"name": "beta", "quick": False, "status": "ok", "configs": {
            "tvm": cfg(base),
            "tvm_rules": cfg([10.0, 11.0, 10.5], numerics_vs_tvm={"ok": False}),
            "taso": {"status": "unavailable", "reason": "no pass"}},
         "onnxruntime": {"status": "ok", "timing": _timing([2.0, 2.0, 2.0], base)}},
        {"name": "gamma", "status": "error", "error": "ValueError: broken"},
    ]
    result = {"file": file, "target": {"kind": "llvm", "num-cores": 2}, "target_kind": "cpu",
              "kernel_treatment": "default lowering (no schedules)", "threads": 2, "rounds": 3,
              "machine": {"cpu_model": "Test CPU"}, "versions": {"tvm": "0.27", "onnxruntime": "1"},
              "models": models, "notes": ["a note"]}
    result["summary"] = report.summarize(result)
    return result


# ---------------------------------------------------------------- fast tests
def test_ratios_are_medians_from_the_same_rounds():
    t = _timing([5.0, 5.5, 6.0], [10.0, 11.0, 10.5])
    assert t["median_ms"] == pytest.approx(5.5)
    assert t["speedup"] == pytest.approx(10.5 / 5.5)
    assert t["speedup_paired"] == pytest.approx(statistics.median([2.0, 2.0, 1.75]))


def test_interleaved_order_and_counts():
    calls = []

    class Fake:
        def __init__(self, name):
            self.name = name

        def time_round(self):
            calls.append(self.name)
            return 1.0

    times = measure.interleaved({n: Fake(n) for n in ("tvm", "tvm_rules", "taso")}, 2)
    assert calls == ["tvm", "tvm_rules", "taso"] * 2
    assert all(len(v) == 2 for v in times.values())


def test_numerics_compare_flags():
    ref = [np.ones((2, 3), "float32") * 4]
    assert measure.compare([ref[0] + 1e-5], ref)["ok"]
    bad = measure.compare([ref[0] + 0.5], ref)
    assert not bad["ok"] and bad["max_abs_err"] == pytest.approx(0.5)
    assert not measure.compare([np.ones((3, 2), "float32")], ref)["ok"]
    assert not measure.compare([ref[0] * np.nan], ref)["ok"]
    tiny = [np.float32([1e-9, -2e-9])]  # a scale floored at 1.0 let any result of this size agree
    assert not measure.compare([tiny[0] * 1.01], tiny)["ok"] and measure.compare([tiny[0] * (1 + 1e-6)], tiny)["ok"]
    inf = [np.float32([np.inf, 1.0])]  # the same inf on both sides agrees; a finite value for it does not
    assert measure.compare([inf[0].copy()], inf)["ok"] and not measure.compare([np.float32([1.0, 1.0])], inf)["ok"]


def test_result_names_keep_targets_and_modes_apart(tmp_path):
    assert report.target_kind({"kind": "llvm"}) == "cpu"
    assert report.target_kind({"kind": "cuda"}) == "cuda"
    assert report.mode_name(False, 0) == "default"
    assert report.mode_name(False, 64) == "tuned64"
    assert report.mode_name(True, 0) == "quick"
    cpu = report.result_path(tmp_path, "2099-01-01", "cpu", "default")
    gpu = report.result_path(tmp_path, "2099-01-01", "cuda", "default")
    assert cpu != gpu and cpu.name == "2099-01-01-cpu-default.json"
    assert report.marker_key("cpu") != report.marker_key("cuda")


def test_table_regenerated_matches_json(tmp_path):
    result = synthetic_result()
    path = report.write_json(result, tmp_path / "r.json")
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\nprose quoting `<!-- bench-table:start -->` stays\n\n"
                      "<!-- bench-table:start -->\nold\n<!-- bench-table:end -->\n\ntail\n")
    assert report.update_readme(readme, "bench-table", report.render_table(report.load_json(path)))
    text = readme.read_text()
    assert text.startswith("# x\n") and text.endswith("tail\n") and "old" not in text
    assert "prose quoting `<!-- bench-table:start -->` stays" in text
    assert report.extract_block(text, "bench-table") == report.render_table(result)
    table = report.render_table(result)
    assert "| alpha | 10.5 | 8.5 (1.24×) | 5.5 (1.91×) |" in table
    assert "3 / 40" in table and "ok/ok" in table
    assert "| beta |" in table and "unavailable" in table and "FAIL/–" in table
    assert "| gamma | error: ValueError: broken" in table
    assert "a note" in table
    # geomean over the models that ran
    assert result["summary"]["geomean_speedup"]["taso"] == pytest.approx(10.5 / 5.5)


def test_readme_without_markers_is_left_alone(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("no markers\n")
    assert not report.update_readme(readme, "bench-table", "table")
    assert readme.read_text() == "no markers\n"
    assert not report.update_readme(tmp_path / "missing.md", "bench-table", "table")


def test_chart_is_written(tmp_path):
    png = report.write_chart(synthetic_result(), tmp_path / "r.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_taso_report_summary_handles_todays_and_future_reports():
    class FR:
        def __init__(self, status, **kw):
            self.status, self.ops_before, self.ops_after = status, {"conv2d": 2, "weight": 3}, {
                "conv2d": 1, "weight": 3}
            self.warnings = []
            self.__dict__.update(kw)

    today = configs.summarize_taso_report({"main": FR("unchanged")})
    assert today["rules_applied"] == 0 and today["graphs_explored"] is None
    assert today["ops_before"] == 2 and today["ops_after"] == 1
    later = configs.summarize_taso_report(
        {"main": FR("optimized", rules_applied=["r1", "r2"], graphs_explored=17)})
    assert later["rules_applied"] == 2 and later["graphs_explored"] == 17
    assert configs.summarize_taso_report(None)["rules_applied"] is None
    json.dumps(later)  # stays JSON-serialisable
    weights = {"w": np.zeros((64, 64, 3, 3), "float32")}
    kept = configs.summarize_taso_report({"main": FR("optimized", graph_before=weights, graph_after=weights,
                                                     check="region: equal")})
    assert "graph_before" not in kept["report"]["main"] and "graph_after" not in kept["report"]["main"]
    assert kept["report"]["main"]["check"] == "region: equal"


def test_committed_readme_tables_match_their_json():
    """The table in bench/README.md (and README.md) is the one its JSON renders."""
    for readme in (REPO / "bench" / "README.md", REPO / "README.md"):
        if not readme.exists():
            continue
        text = readme.read_text()
        for key in ("bench-table", "bench-table-cuda"):
            block = report.extract_block(text, key)
            if not block or not block.startswith("Results: `"):
                continue
            name = re.match(r"Results: `([^`]+)`", block).group(1)
            data = REPO / name
            assert data.exists(), f"{readme} cites {name}, which is missing"
            assert block == report.render_table(report.load_json(data)), \
                f"{readme} table is stale: run python -m bench.run --table-from {name}"


# ---------------------------------------------------------------- slow test
@pytest.mark.slow
def test_quick_run_end_to_end(tmp_path):
    cmd = [sys.executable, "-m", "bench.run", "--quick", "--models", "nasrnn", "--rounds", "3",
           "--results-dir", str(tmp_path), "--date", "2099-01-01", "--readme", "no"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    path = tmp_path / "2099-01-01-cpu-quick.json"
    result = json.loads(path.read_text())
    assert path.with_suffix(".png").exists()
    for key in ("machine", "versions", "target", "threads", "kernel_treatment", "summary"):
        assert key in result
    assert result["versions"]["tvm"] and result["machine"]["cpu_cores_available"] >= 1
    (model,) = result["models"]
    assert model["status"] == "ok" and model["quick"]
    cfgs = model["configs"]
    base = cfgs["tvm"]["timing"]
    assert len(base["rounds_ms"]) == model["rounds"]
    for name in ("tvm", "tvm_rules", "taso"):
        c = cfgs[name]
        if c["status"] != "ok":
            assert name == "taso" and c["status"] == "unavailable"
            continue
        t = c["timing"]
        assert len(t["rounds_ms"]) == len(base["rounds_ms"])  # same interleaved run
        assert t["speedup"] == pytest.approx(base["median_ms"] / t["median_ms"])
        for field in ("compile_time_s", "kernels", "kernel_launches", "peak_rss_mb",
                      "search_time_s"):
            assert c[field] is not None
        if name != "tvm":
            assert c["numerics_vs_tvm"]["ok"] is True
    probe = model["host_probe"]  # measured before and after the rounds, against the machine's best
    assert len(probe["probes"]) == 2 and set(probe["best"]) == {"gflops", "gbps"}
    assert probe["slowdown"] == pytest.approx(max(probe["best"][n] / p[n] for p in probe["probes"] for n in p))
    ort = model["onnxruntime"]
    assert ort["status"] == "ok" and ort["threads"] == result["threads"]
    assert ort["numerics_tvm_vs_onnxruntime"]["ok"] is True


# ---------------------------------------------------------------- configurations
def _tiny_onnx():
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype("float32"), "w")
    bn = [numpy_helper.from_array(v.astype("float32"), n) for n, v in (
        ("g", rng.uniform(0.5, 1.5, 4)), ("b", rng.standard_normal(4) * 0.1),
        ("m", rng.standard_normal(4) * 0.1), ("v", rng.uniform(0.5, 1.5, 4)))]
    wq = numpy_helper.from_array(rng.standard_normal((8, 8)).astype("float32"), "wq")
    wk = numpy_helper.from_array(rng.standard_normal((8, 8)).astype("float32"), "wk")
    nodes = [
        helper.make_node("Conv", ["input", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("MatMul", ["r", "wq"], ["q"]),
        helper.make_node("MatMul", ["r", "wk"], ["k"]),
        helper.make_node("Add", ["q", "k"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4, 8, 8])],
        [w, *bn, wq, wk])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_rule_config_rewrites_and_keeps_numerics():
    import tvm
    from bench.harness import compile as hcompile

    target = tvm.target.Target({"kind": "llvm", "num-cores": 1})
    imported = configs.import_onnx(_tiny_onnx())
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype("float32")
    outs, infos = {}, {}
    for name in ("tvm", "tvm_rules"):
        mod, info = configs.apply_config(name, imported, target, configs.Options())
        ex, cinfo = hcompile.build(mod, target)
        outs[name] = measure.TVMRunner(ex, tvm.cpu(), x).outputs()
        infos[name] = {**info, **cinfo}
    assert measure.compare(outs["tvm_rules"], outs["tvm"])["ok"]
    # batch_norm folded into the conv and the two matmuls combined: fewer launches
    assert infos["tvm_rules"]["kernel_launches"] < infos["tvm"]["kernel_launches"]
    assert infos["tvm"]["search_time_s"] == 0.0


def test_a_tuned_judge_without_a_tuned_build_is_refused_up_front(tmp_path):
    """--taso-cost tuned prices MetaSchedule's kernels: a run that builds with the default lowering
    would measure something else, so it stops before it imports anything, with one line."""
    from bench import run

    with pytest.raises(SystemExit, match="add --trials-per-task"):
        run.main(["--quick", "--models", "nasrnn", "--taso-cost", "tuned", "--results-dir", str(tmp_path)])
    assert list(tmp_path.iterdir()) == []


def test_latest_run_tables_state_the_geomean_of_their_rows():
    """bench/README's hand-kept tables of each model's latest run: every geomean row is the geometric
    mean of the model rows above it (within the rounding of rows and mean to two decimals)."""
    text = (REPO / "bench" / "README.md").read_text()
    for heading in ("### Eight full models, latest run of each", "### The seven quick models, latest run of each"):
        assert heading in text, f"bench/README.md lost its section {heading!r}"
        rows, geomeans = [], 0
        for line in text.split(heading, 1)[1].split("\n### ", 1)[0].splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
            ratios = [float(m.group(1)) for m in (re.fullmatch(r"\**([0-9.]+)×\**", c) for c in cells[1:]) if m]
            if len(ratios) != 2:
                continue
            if "geomean" not in cells[0]:
                rows.append(ratios)
                continue
            means = [math.exp(sum(math.log(r[k]) for r in rows) / len(rows)) for k in range(2)]
            assert means == pytest.approx(ratios, abs=0.011), (heading, cells[0], means, ratios)
            geomeans += 1
        assert geomeans >= 1 and len(rows) >= 7, f"no geomean row, or too few models, under {heading!r}"


def test_an_onnx_file_is_a_model_named_by_its_stem(tmp_path):
    """`bench.run --models path/to/x.onnx` benchmarks a model nobody here wrote (a bench/corpus export)."""
    from bench.harness import models

    path = tmp_path / "timm_block.onnx"
    onnx.save(_tiny_onnx(), str(path))
    loaded = models.build_model(str(path))
    assert [n.op_type for n in loaded.graph.node] == [n.op_type for n in _tiny_onnx().graph.node]
    assert models.label(str(path)) == "timm_block" and models.label("resnet50") == "resnet50"
    assert models.input_shape(loaded) == ("input", [1, 3, 8, 8], "float32")
