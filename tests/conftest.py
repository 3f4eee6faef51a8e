"""Shared test helpers: `run_module` (compile and run a Relax module), a seeded `rng`, the shipped K=3 rules."""
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


@pytest.fixture(scope="session")
def shipped_k3():
    """rules/taso_k3.json, loaded once for the generator's and the verifier's checks of it."""
    from taso_relay.subst import load_rules
    from taso_relay.subst.rule_io import shipped_rules_dir

    path = shipped_rules_dir() / "taso_k3.json"
    if not path.exists():
        pytest.skip("rules/taso_k3.json not generated")
    return load_rules(path)
