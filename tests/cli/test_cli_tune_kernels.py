"""`taso-relay tune` and `compile --tune-trials` tune with the tuned cost model's MetaSchedule parts."""
from __future__ import annotations

import glob

import numpy as np
import pytest

pytest.importorskip("tvm")

from tests.cost.relax_modules import lookup_then_add  # noqa: E402


def test_tune_schedules_an_embedding_lookup_and_builds_a_model_that_runs(tmp_path):
    """static_shape_tuning's runner fills the ids at random: every candidate of the lookup read out of
    bounds and failed, so the lookup was built unscheduled. Every kernel now gets a valid record, and
    no kernel is sent an empty batch (one whose space is used up ends at once)."""
    import tvm
    from tvm import relax

    from taso_relay.commands.build import tune
    from taso_relay.commands.common import tuning_target
    from taso_relay.cost.lowering import open_database

    target = tuning_target(tvm.target.Target("llvm"))
    mod = tune(lookup_then_add(rows=1000), target, 8, tmp_path / "db", max_trials_per_task=4)
    records = open_database(tmp_path / "db").get_all_tuning_records()
    names = [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
    assert len(names) == 2 and all(f.attrs.get("tirx.is_scheduled", False)
                                   for f in mod.functions.values() if isinstance(f, tvm.tirx.PrimFunc))
    assert len({r.workload for r in records}) == 2 and all(float(r.run_secs[0]) < 1e9 for r in records)
    log = "".join(open(f).read() for f in glob.glob(str(tmp_path / "db" / "logs" / "*task_scheduler.log")))
    assert "Sending 0 sample" not in log
    vm = relax.VirtualMachine(tvm.compile(mod, target), tvm.cpu())
    ids, x = np.array([[3, 999] * 8], "int64"), np.random.default_rng(0).uniform(size=(1, 16, 64)).astype("float32")
    out = vm["main"](tvm.runtime.tensor(ids), tvm.runtime.tensor(x)).numpy()
    np.testing.assert_allclose(out, x + 1.0, rtol=1e-6)
