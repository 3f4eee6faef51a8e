"""The best-records copy of a MetaSchedule database: the same best schedule per kernel, fewer records to read."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("tvm")

from taso_relay.cost.best_records import (  # noqa: E402
    COMPLETE, COPIES, read_best, read_database, synced_stamp)


def _kernel(scale: float):
    import tvm
    from tvm import te

    a = te.placeholder((8,), name="a")
    return tvm.IRModule({"main": te.create_prim_func([a, te.compute((8,), lambda i: a[i] * scale, name="c")])})


def _commit(database, mod, seconds, target):
    """Records of `mod` timed at `seconds` each (a real one-instruction schedule: MetaSchedule drops empty ones)."""
    import tvm.s_tir as s_tir
    from tvm.s_tir import meta_schedule as ms

    sch = s_tir.Schedule(mod)
    (loop,) = sch.get_loops(sch.get_sblock("c"))
    sch.parallel(loop)
    workload = database.commit_workload(mod)
    for secs in seconds:
        database.commit_tuning_record(ms.database.TuningRecord(
            sch.trace, workload, [secs], target, ms.arg_info.ArgInfo.from_prim_func(mod["main"])))


def _best(database, mod, target) -> float:
    return float(database.query_tuning_record(mod, target, "main").run_secs[0])


@pytest.fixture
def llvm():
    import tvm

    return tvm.target.Target({"kind": "llvm", "num-cores": 2})


def test_the_copy_keeps_each_kernel_s_best_record_and_is_read_instead(tmp_path, llvm):
    from taso_relay.cost.lowering import open_database

    full = open_database(tmp_path)
    double, triple, failed = _kernel(2.0), _kernel(3.0), _kernel(4.0)
    _commit(full, double, [3e-3, 1e-3, 2e-3], llvm)
    _commit(full, triple, [5e-4, 7e-4], llvm)
    _commit(full, failed, [1e10], llvm)  # MetaSchedule's mark of a candidate that did not run
    first, read = read_best(tmp_path)
    assert read is not None and first is read  # no copy yet: the files were read in full, and copied
    copies = list((tmp_path / COPIES).iterdir())
    assert len(copies) == 1 and (copies[0] / COMPLETE).is_file()
    copy, read = read_best(tmp_path)
    assert read is None and len(copy.get_all_tuning_records()) == 2  # one per kernel that ran
    for mod, fastest in ((double, 1e-3), (triple, 5e-4)):
        assert _best(copy, mod, llvm) == _best(full, mod, llvm) == pytest.approx(fastest)
    files = [(copies[0] / name).read_bytes() for name in ("database_workload.json", "database_tuning_record.json")]
    assert copy.query_tuning_record(failed, llvm, "main") is None
    assert [(copies[0] / name).read_bytes() for name in ("database_workload.json", "database_tuning_record.json")
            ] == files  # a query writes nothing, so the copy stays what it was made as


def test_a_change_to_the_full_files_makes_a_new_copy(tmp_path, llvm):
    from taso_relay.cost.lowering import open_database

    _commit(open_database(tmp_path), _kernel(2.0), [1e-3], llvm)
    read_database(tmp_path)
    old = next((tmp_path / COPIES).iterdir())
    _commit(open_database(tmp_path), _kernel(2.0), [4e-4], llvm)  # another process tunes it further
    assert _best(read_database(tmp_path), _kernel(2.0), llvm) == pytest.approx(4e-4)
    assert _best(read_database(tmp_path), _kernel(2.0), llvm) == pytest.approx(4e-4)  # from the new copy
    assert [p.name for p in (tmp_path / COPIES).iterdir()] != [old.name] and not old.exists()


@pytest.mark.parametrize("damage", ["unfinished", "short"])
def test_a_copy_that_is_not_whole_is_not_read_but_replaced(tmp_path, llvm, damage):
    from taso_relay.cost.lowering import open_database

    _commit(open_database(tmp_path), _kernel(2.0), [1e-3, 2e-3], llvm)
    _commit(open_database(tmp_path), _kernel(3.0), [5e-4], llvm)
    read_database(tmp_path)
    copy = next((tmp_path / COPIES).iterdir())
    if damage == "unfinished":  # files but no mark: a reader's empty files after the copy was removed
        os.remove(copy / COMPLETE)
        (copy / "database_tuning_record.json").write_text("")
    else:  # marked, but records missing
        lines = (copy / "database_tuning_record.json").read_text().splitlines(keepends=True)
        (copy / "database_tuning_record.json").write_text(lines[0])
    database, read = read_best(tmp_path)
    assert read is not None and _best(database, _kernel(2.0), llvm) == pytest.approx(1e-3)
    again, read = read_best(tmp_path)  # a whole copy took its place
    assert read is None and len(again.get_all_tuning_records()) == 2
    assert _best(again, _kernel(3.0), llvm) == pytest.approx(5e-4)


def test_a_database_another_writer_appended_to_is_not_copied(tmp_path, llvm):
    """A copy made from a database this process holds must not lack another writer's records."""
    from taso_relay.cost.lowering import open_database

    _commit(open_database(tmp_path), _kernel(2.0), [1e-3], llvm)
    held = open_database(tmp_path)
    assert synced_stamp(tmp_path, held) is not None
    _commit(open_database(tmp_path), _kernel(2.0), [4e-4], llvm)  # another process, without the lock
    assert synced_stamp(tmp_path, held) is None
    assert read_best(tmp_path, held, None)[0] is held and not (tmp_path / COPIES).exists()
    assert _best(read_database(tmp_path), _kernel(2.0), llvm) == pytest.approx(4e-4)  # read afresh


def test_the_tuned_model_reads_the_copy_and_tunes_into_the_full_files(tmp_path, llvm):
    from taso_relay.cost.lowering import open_database
    from taso_relay.cost.tuned import TunedCost

    _commit(open_database(tmp_path / "db"), _kernel(2.0), [3e-3, 1e-3], llvm)
    read_database(tmp_path / "db")  # an earlier process made the copy
    model = TunedCost(llvm, trials=0, work_dir=tmp_path / "db", cache=False)
    database = model.database()
    assert len(database.get_all_tuning_records()) == 1 and model._full is None  # the copy, nothing more read
    assert _best(database, _kernel(2.0), llvm) == pytest.approx(1e-3)
    assert len(model._full_database().get_all_tuning_records()) == 2  # what tuning would append to
