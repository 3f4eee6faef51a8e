"""The graph form, the generator and the verifier work where TVM cannot be imported (DESIGN: graph/ never
imports tvm), whether or not TVM was imported first."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("module", ["taso_relay.graph", "taso_relay.generator", "taso_relay.verifier"])
def test_imports_with_tvm_blocked(module):
    code = (f"import sys; sys.modules['tvm'] = None; import {module}, taso_relay; "
            "print(sorted(m for m in sys.modules if m == 'tvm' or m.startswith('tvm.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['tvm']"  # only the blocked entry itself: nothing of TVM was loaded
