"""`taso-relay cost show|clear|peaks` through add_cost_commands."""
from __future__ import annotations

import argparse
import json

from taso_relay.cost import CostCache
from taso_relay.cost.cli import add_cost_commands


def run(argv):
    parser = argparse.ArgumentParser(prog="taso-relay")
    add_cost_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.run(args)


def fill(path):
    cache = CostCache(path)
    cache.put('{"kind":"llvm"}', "local", "measured/x", "abcdef0123", 1.25e-3, 1e-6, 10, "conv2d+add+relu")
    cache.put('{"kind":"llvm"}', "rpc:pi", "measured/x", "bbcdef0123", 5e-3, 1e-6, 10, "matmul")
    cache.put('{"kind":"cuda"}', "local", "tuned/x/trials=8", "cbcdef0123", 2e-5, 1e-7, 10, "softmax", contention=0.6)
    return cache


def test_show_lists_entries(tmp_path, capsys):
    fill(tmp_path / "c.sqlite")
    assert run(["cost", "show", "--cache-file", str(tmp_path / "c.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "3 entries" in out and "conv2d+add+relu" in out and "1.2500" in out and "rpc:pi" in out
    assert "tuned/x/trials=8 on local" in out
    assert [line.split()[-7] for line in out.splitlines() if "(contended 60%" in line] == ["softmax"]


def test_show_filters_and_json(tmp_path, capsys):
    fill(tmp_path / "c.sqlite")
    assert run(["cost", "show", "--cache-file", str(tmp_path / "c.sqlite"), "--method", "measured", "--device",
                "local", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["entries"] == 1 and data["shown"][0]["label"] == "conv2d+add+relu"
    assert data["shown"][0]["contention"] is None


def test_show_default_cache_empty(capsys):
    assert run(["cost", "show"]) == 0
    assert "0 entries" in capsys.readouterr().out


def test_clear(tmp_path, capsys):
    cache = fill(tmp_path / "c.sqlite")
    assert run(["cost", "clear", "--cache-file", str(tmp_path / "c.sqlite"), "--target", '{"kind":"cuda"}']) == 0
    assert "removed 1" in capsys.readouterr().out and len(cache) == 2


def test_peaks(capsys, _private_cache_dir):
    assert run(["cost", "peaks", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gflops"] > 0 and (_private_cache_dir / "peaks.json").exists()


def test_the_installed_command_has_clear_and_peaks(capsys):
    """`taso-relay cost peaks|clear` as the console script parses them (not only add_cost_commands)."""
    from taso_relay.cli import main

    assert main(["cost", "peaks", "--json"]) == 0
    peaks = json.loads(capsys.readouterr().out)
    assert peaks["gflops"] > 0 and peaks["path"].endswith("peaks.json")
    assert main(["cost", "clear", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == 0
