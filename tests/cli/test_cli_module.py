"""`python -m taso_relay` is the same command."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _taso_relay(*args, timeout):
    """`python -m taso_relay ARGS` in a fresh interpreter (the package from this checkout)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "taso_relay", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


def test_python_dash_m(small, tmp_path):
    missing = _taso_relay("optimize", tmp_path / "x.onnx", timeout=120)
    assert missing.returncode == 2
    assert missing.stderr == f"taso-relay: error: no such model file: {tmp_path / 'x.onnx'}\n"
    ok = _taso_relay("optimize", small, "--json", timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["functions"]["main"]["ops_before"]["conv2d"] == 2
