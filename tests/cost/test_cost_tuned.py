"""The tuned model: MetaSchedule per kernel, a kept database reused by later runs and the final build."""
from __future__ import annotations

import pytest

import cost_graphs
from cost_graphs import with_values

pytest.importorskip("tvm")

from taso_relay.cost.runner import TimerSettings  # noqa: E402
from taso_relay.cost.tuned import TunedCost  # noqa: E402
from taso_relay.graph import GraphBuilder  # noqa: E402

FAST = TimerSettings(repeat=3, warmup=1)


def tiny_matmul():
    b = GraphBuilder()
    x = b.input("x", (32, 32))
    return b.build([b.op("relu", b.op("matmul", x, b.weight("w", (32, 32))))])


def test_zero_trials_tunes_nothing_and_keys_by_budget(tmp_path, target):
    m = TunedCost(target, trials=0, work_dir=tmp_path / "db", cache=tmp_path / "c.sqlite", timer=FAST)
    assert m.graph_cost(cost_graphs.conv_bias_relu()) > 0
    assert m.tunings == 0 and m.compiles == 1 and (tmp_path / "db").is_dir()
    assert "/trials=0/" in m.method and m.method.startswith("tuned/")


def test_tasks_per_run_below_one_is_refused(tmp_path, target):
    with pytest.raises(ValueError, match="tasks_per_run"):
        TunedCost(target, trials=0, work_dir=tmp_path / "db", cache=False, tasks_per_run=0)


def test_default_database_lives_in_the_user_cache(_private_cache_dir, target):
    m = TunedCost(target, trials=0, cache=False)
    assert m.work_dir.parent == _private_cache_dir / "tuning"


@pytest.mark.slow
def test_tiny_tuning_run_is_reused_and_applied_to_the_final_build(tmp_path, target):
    import tvm
    from tvm import relax

    from taso_relay.bridge import module_from_graph

    graph = tiny_matmul()
    db = tmp_path / "db"
    first = TunedCost(target, trials=4, work_dir=db, cache=tmp_path / "c.sqlite", ms_cost_model="random",
                      timer=FAST)
    cost = first.graph_cost(graph)
    assert cost > 0 and first.tunings == 1
    assert (db / "database_tuning_record.json").stat().st_size > 0
    assert any((copy / "complete").is_file() for copy in (db / "best").iterdir())  # the best records, for readers
    # a fresh process-level model with no cost cache: the record is reused, nothing is tuned again
    second = TunedCost(target, trials=4, work_dir=db, cache=False, ms_cost_model="random", timer=FAST)
    assert second.graph_cost(graph) > 0 and second.tunings == 0
    assert second._full is None  # it read the copy alone
    # the final build of a model containing the kernel picks its schedule up, through the stock pipeline too
    mod = module_from_graph(with_values(graph))
    with tvm.target.Target(target):
        tuned = relax.get_pipeline("static_shape_tuning", total_trials=0, target=target, work_dir=str(db))(mod)
    prims = [f for f in tuned.functions.values() if isinstance(f, tvm.tirx.PrimFunc)]
    assert prims and all(f.attrs.get("tirx.is_scheduled", False) for f in prims)
    assert first.compile_tuned(mod) is not None


def test_foreign_log_handlers_are_detached_before_tuning():
    """An unnamed handler on MetaSchedule's logger made its next tuning fail in the same process."""
    import logging

    from taso_relay.cost.tuned import MS_LOGGER, drop_foreign_log_handlers

    logger = logging.getLogger(MS_LOGGER)
    own, foreign = logging.NullHandler(), logging.NullHandler()
    own.set_name(MS_LOGGER + ".console")
    logger.addHandler(own)
    logger.addHandler(foreign)
    try:
        drop_foreign_log_handlers()
        assert own in logger.handlers and foreign not in logger.handlers
    finally:
        logger.removeHandler(own)
        logger.removeHandler(foreign)


@pytest.mark.slow
def test_the_kernels_of_a_graph_are_tuned_in_one_run(tmp_path, target, monkeypatch):
    """Each MetaSchedule run pays for its builder processes and cost model: a graph's new kernels
    go to one run, and a kernel met twice is tuned once."""
    from tvm.s_tir import meta_schedule as ms

    runs = []
    real = ms.tune.tune_tasks

    def counting(**kwargs):
        runs.append(len(kwargs["tasks"]))
        return real(**kwargs)

    monkeypatch.setattr(ms.tune, "tune_tasks", counting)
    b = GraphBuilder()
    x = b.input("x", (16, 32))
    y = b.op("relu", b.op("matmul", x, b.weight("w1", (32, 32))))
    y = b.op("sigmoid", b.op("matmul", y, b.weight("w2", (32, 64))))
    y = b.op("relu", b.op("matmul", y, b.weight("w3", (64, 64))))
    graph = b.build([b.op("relu", b.op("matmul", y, b.weight("w4", (64, 64))))])  # w3's kernel again
    model = TunedCost(target, trials=2, work_dir=tmp_path / "db", cache=False, ms_cost_model="random",
                      timer=FAST)
    assert model.graph_cost(graph) > 0
    assert runs == [3] and model.tunings == 3
    # two modules holding the same kernels: each tuned once, in one run
    from taso_relay.bridge import module_from_graph
    from cost_graphs import with_values

    other = GraphBuilder()
    x = other.input("x", (8, 16))
    twice = [other.op("relu", other.op("matmul", x, other.weight(f"v{i}", (16, 16)))) for i in range(2)]
    mod = module_from_graph(with_values(other.build(twice)))
    model.tune_modules([mod, mod])
    assert runs == [3, 1] and model.tunings == 4


def test_the_database_is_read_again_only_when_its_files_change(tmp_path, target):
    import tvm
    from tvm import te

    from taso_relay.cost.lowering import open_database

    m = TunedCost(target, trials=0, work_dir=tmp_path / "db", cache=False)
    first = m.database()
    assert m.database() is first  # unchanged files: the records already read
    a = te.placeholder((8,), name="a")
    mod = tvm.IRModule({"main": te.create_prim_func([a, te.compute((8,), lambda i: a[i] * 2.0)])})
    open_database(tmp_path / "db").commit_workload(mod)  # another process adds a workload
    again = m.database()
    assert again is not first and again.has_workload(mod) and not first.has_workload(mod)


@pytest.mark.slow
def test_an_interrupted_tuning_keeps_the_runs_that_finished(tmp_path, target, monkeypatch):
    """MetaSchedule saves a run's records only at the end of its first round over all its tasks;
    tuning in runs of `tasks_per_run` kernels means an interruption loses only the current run."""
    from tvm.s_tir import meta_schedule as ms

    runs = []
    real = ms.tune.tune_tasks

    def interrupted_second(**kwargs):
        runs.append(len(kwargs["tasks"]))
        if len(runs) == 2:
            raise KeyboardInterrupt
        return real(**kwargs)

    monkeypatch.setattr(ms.tune, "tune_tasks", interrupted_second)
    b = GraphBuilder()
    y = b.input("x", (16, 32))
    for i, width in enumerate((32, 48, 64)):
        y = b.op("relu", b.op("matmul", y, b.weight(f"w{i}", ((32, 32, 48)[i], width))))
    graph = b.build([y])
    kw = dict(trials=2, work_dir=tmp_path / "db", cache=False, ms_cost_model="random", timer=FAST)
    with pytest.raises(KeyboardInterrupt):
        TunedCost(target, tasks_per_run=2, **kw).graph_cost(graph)
    assert runs == [2, 1]
    monkeypatch.setattr(ms.tune, "tune_tasks", real)
    again = TunedCost(target, tasks_per_run=2, **kw)
    assert again.graph_cost(graph) > 0
    assert again.tunings == 1  # the first run's two kernels were kept


def test_a_cpu_target_without_cores_is_tuned_for_this_machines(tmp_path):
    """MetaSchedule refuses a CPU target with no num-cores; {"kind": "llvm"} (the CLI's default, and the
    target a user writes) tunes for the cores this process may use, and a tiny run goes through."""
    import os

    from taso_relay.cost.lowering import with_cores

    cores = len(os.sched_getaffinity(0))
    m = TunedCost({"kind": "llvm"}, trials=2, work_dir=tmp_path / "db", cache=False, ms_cost_model="random",
                  timer=FAST)
    assert int(m.target.attrs["num-cores"]) == cores and '"num-cores"' in m.target_key
    assert m.graph_cost(tiny_matmul()) > 0 and m.tunings == 1
    assert int(with_cores({"kind": "llvm", "num-cores": 1}).attrs["num-cores"]) == 1  # a given count stays
    assert with_cores({"kind": "cuda"}).kind.name == "cuda" and "num-cores" not in with_cores({"kind": "cuda"}).attrs
    assert "num-cores" not in with_cores({"kind": "llvm", "mtriple": "aarch64-linux-gnu"}).attrs  # not this CPU


def _one_op_module(op, *types):
    from tvm import relax

    bb = relax.BlockBuilder()
    params = [relax.Var(f"p{i}", relax.TensorType(shape, dtype)) for i, (shape, dtype) in enumerate(types)]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(op(*params))
        bb.emit_func_output(out)
    return bb.get()


def _gather():
    from tvm import relax

    return _one_op_module(lambda table, idx: relax.op.take(table, idx, axis=0),
                          ((1000, 64), "float32"), ((1, 16), "int64"))


def _valid_times(database):
    return [float(r.run_secs[0]) for r in database.get_all_tuning_records() if float(r.run_secs[0]) < 1e9]


def test_a_gather_is_tuned_with_its_indices_in_range(tmp_path, target):
    """MetaSchedule's own runner fills integer inputs with random values: an embedding lookup reads out
    of bounds, its worker dies and the kernel gets no schedule. Ours fills them in range."""
    m = TunedCost(target, trials=2, work_dir=tmp_path / "db", cache=False, ms_cost_model="random")
    assert len(_valid_times(m.tune_modules([_gather()]))) >= 1 and m.tunings == 1


def test_a_kernel_whose_every_candidate_failed_is_not_tuned_again_by_the_same_model(tmp_path, target):
    """A kernel without a valid record was tuned again by every later call (the judge on a transformer:
    one MetaSchedule run per graph it priced). The same model leaves one whose candidates all failed
    alone; a later one tries once more (the failure may have been a timeout on a busy machine)."""
    from tvm.s_tir import meta_schedule as ms

    kw = dict(trials=2, work_dir=tmp_path / "db", cache=False, ms_cost_model="random")
    m = TunedCost(target, ms_runner=ms.runner.LocalRunner(), **kw)  # the stock runner: the gather fails
    database = m.tune_modules([_gather()])
    assert database.get_all_tuning_records() and not _valid_times(database) and m.tunings == 1
    m.tune_modules([_gather()])
    assert m.tunings == 1
    later = TunedCost(target, **kw)  # our runner: the same kernel now tunes
    assert _valid_times(later.tune_modules([_gather()])) and later.tunings == 1


def test_integer_inputs_of_tuning_candidates_are_in_range():
    """Ones: an index into any table of two rows or more, and never a zero divisor."""
    import tvm

    from taso_relay.cost.metaschedule_parts import _make_alloc_function

    infos = [["TENSOR", "int64", [4]], ["TENSOR", "int32", [2, 3]], ["TENSOR", "bool", [5]],
             ["TENSOR", "float32", [3]]]
    for ints, ints32, flags, floats in _make_alloc_function()(tvm.cpu(), infos, 2):
        assert (ints.numpy() == 1).all() and (ints32.numpy() == 1).all() and ints32.numpy().shape == (2, 3)
        assert set(flags.numpy().tolist()) <= {False, True} and floats.numpy().dtype == "float32"


def test_a_kernel_with_its_design_space_used_up_stops_at_once(tmp_path, target):
    """MetaSchedule's evolutionary search answers five empty batches before it ends a kernel whose
    candidates are all measured, each one a new evolution (minutes on a large fused kernel)."""
    import glob

    from tvm import relax

    relu = _one_op_module(relax.op.nn.relu, ((8,), "float32"))
    m = TunedCost(target, trials=4, work_dir=tmp_path / "db", cache=False, ms_cost_model="random")
    assert len(_valid_times(m.tune_modules([relu]))) == 1  # one schedule in its space: measured
    log = open(glob.glob(str(tmp_path / "db" / "logs" / "*task_scheduler.log"))[0]).read()
    assert log.count("picks Task") <= 2 and "Sending 0 sample" not in log
