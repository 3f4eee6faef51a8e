"""Every cost test runs with its own user cache directory: the real one is never touched."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _private_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TASO_RELAY_CACHE_DIR", str(tmp_path / "user-cache"))
    monkeypatch.setenv("TASO_RELAY_PROGRESS", "0")
    return tmp_path / "user-cache"


@pytest.fixture
def peaks():
    from taso_relay.cost import MachinePeaks

    return MachinePeaks(gflops=100.0, gbps=20.0, launch_s=2e-6)


@pytest.fixture
def target():
    return {"kind": "llvm", "num-cores": 2}
