"""Shared test helpers: `run_module` (compile and run a Relax module) and a seeded `rng`."""
from __future__ import annotations

import numpy as np
import pytest


def run_module(mod, inputs, target=None, func: str = "main") -> list[np.ndarray]:
    """Compile `mod` with tvm.compile (CPU by default), run `func` on `inputs`, outputs as numpy."""
    from taso_relay.bridge.execute import run_module as run

    return run(mod, inputs, target, func)


@pytest.fixture(name="run_module")
def _run_module_fixture():
    return run_module


@pytest.fixture
def rng():
    return np.random.default_rng(0)
