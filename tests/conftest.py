"""Shared test helpers: `run_module` (compile and run a Relax module), a seeded `rng`, the shipped K=3 rules;
every test runs with a cache directory of its session, whose machine peaks are fixed, and whose cached kernel
times are trusted even when timed on contended CPUs."""
from __future__ import annotations

import json

import numpy as np
import pytest

# The peaks the tests' expectations of the default analytic model were written against (a 2-core VM of
# earlier sessions). Machines differ (session 17's VM measured 146 GFLOP/s and 12.5 GB/s), and with
# the ratio of the two, which merges the default search prices cheaper.
TEST_PEAKS = {"gflops": 245.0, "gbps": 49.0, "launch_s": 2e-6}


@pytest.fixture(scope="session", autouse=True)
def _session_cache_dir(tmp_path_factory):
    """The cost models' cache (peaks, measured costs, tuning records) in a directory of the test session:
    nothing from the user's cache, and the same peaks on every machine."""
    from taso_relay.cost.analytic import PEAKS_METHOD, _host

    cache = tmp_path_factory.mktemp("taso-relay-cache")
    (cache / "peaks.json").write_text(json.dumps({**TEST_PEAKS, "host": _host(), "method": PEAKS_METHOD}))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TASO_RELAY_CACHE_DIR", str(cache))
        mp.setenv("TASO_RELAY_TRUST_CACHE", "1")  # a rerun reuses the times, however busy the first run's CPUs
        yield cache


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
