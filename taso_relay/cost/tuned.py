"""The tuned model: each distinct kernel tuned with MetaSchedule, then timed.

For a kernel not in the cost cache: build it (as the measured model does),
lower it to its fused PrimFunc, and tune that PrimFunc with MetaSchedule for
`trials` trials unless the tuning database already holds a record for it; then
compile with the database applied and time it. The database is a MetaSchedule
JSON database in `work_dir` (default: <user cache>/tuning/<target digest>),
kept across runs, so:

* earlier records are reused: a kernel tuned once (by any run, or by
  `static_shape_tuning` itself) is never tuned again;
* the final model reuses them: compile it with `compile_tuned(mod)`, or with
  the stock pipeline pointed at the same directory,

      mod = relax.get_pipeline("static_shape_tuning", total_trials=0,
                               target=target, work_dir=model.work_dir)(mod)
      ex = tvm.compile(mod, target)

  whose fused PrimFuncs are structurally equal to the kernels tuned here
  (same lowering), so MetaScheduleApplyDatabase finds their schedules. The
  graph search and kernel tuning thus work together: the search ranks graphs
  by tuned kernel times, and the winner compiles with those very schedules.

Tuning holds an exclusive lock on work_dir, so concurrent processes tune a
kernel once and read each other's records.
"""
from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from .best_records import database_stamp, read_best, synced_stamp
from .cache import file_lock
from .kernel import Kernel
from .lowering import LOWERING_IDS, lower, open_database, reusing_lowerings, target_key, with_cores
from .measured import MeasuredCost, kernel_module
from .metaschedule_parts import local_runner, stop_when_exhausted
from .paths import default_tuning_dir
from .progress import progress


MS_LOGGER = "tvm.s_tir.meta_schedule"
LOG = logging.getLogger(__name__)


def drop_foreign_log_handlers() -> None:
    """Detach handlers MetaSchedule did not make from its global logger.

    Before each tuning MetaSchedule rebuilds its logging config from the names of that
    logger's handlers and fails on one it cannot name ('NoneType' object has no
    attribute 'format'): pytest's log capture attaches such handlers after a first
    tuning in the process, and a user's handler would do the same. Its own console
    and file handlers stay.
    """
    logger = logging.getLogger(MS_LOGGER)
    for handler in list(logger.handlers):
        if not (handler.get_name() or "").startswith(MS_LOGGER):
            logger.removeHandler(handler)


def _make_builder_function():
    """MetaSchedule's default build without its eager `import tvm.s_tir.tensor_intrin`.

    That import registers every tensor intrinsic of every architecture and takes 15-40 s;
    the LocalBuilder restarts its worker processes for every batch, so on a busy machine
    each batch hit the builder's timeout. Float kernels on CPU need none of them; the
    import happens only if a build asks for an intrinsic. A nested function so that
    cloudpickle sends it by value (the workers need not import taso_relay).
    """

    def build(mod, target, _params):
        from tvm.driver import build as tvm_build
        from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

        mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
        try:
            return tvm_build(mod, target=target)
        except Exception as exc:  # noqa: BLE001
            if "intrin" not in str(exc).lower():
                raise
            import tvm.s_tir.tensor_intrin  # noqa: F401

            return tvm_build(mod, target=target)

    return build


def local_builder(timeout_sec: float = 120.0, max_workers: int | None = None):
    from tvm.s_tir import meta_schedule as ms

    return ms.builder.LocalBuilder(max_workers=max_workers, timeout_sec=timeout_sec,
                                   f_build=_make_builder_function())


def metaschedule_rpc_runner(rpc_runner, timeout_sec: float = 120.0):
    """A MetaSchedule RPCRunner on the same tracker and key as a `remote.RPCRunner`."""
    from tvm.s_tir import meta_schedule as ms

    config = ms.runner.RPCConfig(tracker_host=rpc_runner.tracker_host, tracker_port=rpc_runner.tracker_port,
                                 tracker_key=rpc_runner.key, session_timeout_sec=timeout_sec)
    return ms.runner.RPCRunner(rpc_config=config)


class StructuralSet:
    """PrimFuncs kept by structural equality (a hash bucket, then structural_equal within it)."""

    def __init__(self):
        self._buckets: dict[int, list] = {}

    def __contains__(self, func) -> bool:
        import tvm_ffi

        return any(tvm_ffi.structural_equal(func, other)
                   for other in self._buckets.get(tvm_ffi.structural_hash(func), ()))

    def add(self, func) -> bool:
        """Keep `func`; False (and nothing kept) when an equal one is here already."""
        import tvm_ffi

        bucket = self._buckets.setdefault(tvm_ffi.structural_hash(func), [])
        if any(tvm_ffi.structural_equal(func, other) for other in bucket):
            return False
        bucket.append(func)
        return True


class TunedCost(MeasuredCost):
    """Kernels tuned with MetaSchedule (`trials` per kernel), timed like MeasuredCost.

    work_dir: the MetaSchedule database directory (default under the user cache).
    trials: trial budget per distinct kernel. num_trials_per_iter: MetaSchedule batch size.
    ms_cost_model: "xgb" (MetaSchedule's default) or "random".
    builder / ms_runner: MetaSchedule Builder and Runner (default: local, with a build function
      that skips the slow tensor-intrinsic import; pass an RPCRunner to tune on a remote device).
    verbose: MetaSchedule's task tables on the console too (they always go to work_dir/logs).
    tasks_per_run: kernels tuned per MetaSchedule run (its records are saved as each run ends).
    """

    name = "tuned"

    def __init__(self, target=None, *, trials: int = 64, work_dir: str | os.PathLike | None = None,
                 num_trials_per_iter: int | None = None, ms_cost_model: str = "xgb", ms_seed: int | None = 0,
                 builder=None, ms_runner="local", verbose: bool = False, tasks_per_run: int = 16, **kwargs):
        kwargs["lowering"] = "tuning"  # static_shape_tuning's passes: the final build must match them
        super().__init__(with_cores(target), **kwargs)
        self.trials = int(trials)
        self.work_dir = Path(work_dir) if work_dir else default_tuning_dir() / tuning_key(self.target)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.num_trials_per_iter = num_trials_per_iter or min(64, max(self.trials, 1))
        self.ms_cost_model = ms_cost_model
        self.ms_seed = ms_seed
        self.builder = builder
        self.ms_runner = ms_runner
        self.verbose = verbose
        if int(tasks_per_run) < 1:
            raise ValueError(f"tasks_per_run must be at least 1, got {tasks_per_run}")
        self.tasks_per_run = int(tasks_per_run)
        if ms_runner == "local" and getattr(self.runner, "tracker_host", None) is not None:
            self.ms_runner = metaschedule_rpc_runner(self.runner)  # tune on the device we time on
        self.tunings = 0  # tasks tuned by this instance (records reused do not count)
        self._database = self._database_stamp = None  # best records (read)
        self._full = self._full_stamp = None  # every record (tuned into)
        self._failed = StructuralSet()  # kernels this model tuned that got no valid record

    @property
    def method(self) -> str:
        # A kernel's time is that of its schedule in this database: another database (another
        # tuning run) may have found a faster or slower one, so timings are kept per database.
        db = hashlib.blake2b(str(self.work_dir.resolve()).encode(), digest_size=4).hexdigest()
        return f"tuned/{LOWERING_IDS['tuning']}/trials={self.trials}/db={db}"

    def _bar_label(self) -> str:
        return f"tuning kernels ({self.trials} trials each)"

    def database(self):
        """The tuning database as it is on disk now, each kernel's best record only
        (cost/best_records.py), read again only when the files changed.

        Reading is slow: quick NASNet's 7,732 records took about 10 s to load, and the judge built
        each of its 174 kernels against the database, so it spent most of its time re-reading it."""
        stamp = database_stamp(self.work_dir)
        if self._database is None or stamp != self._database_stamp:
            known = self._full if self._full is not None and stamp == self._full_stamp else None
            self._database, full = read_best(self.work_dir, known, stamp if known is not None else None)
            self._database_stamp = stamp if None not in stamp else database_stamp(self.work_dir)
            if full is not None:  # read in full anyway: tuning can append to it
                self._full, self._full_stamp = full, self._database_stamp
        return self._database

    def _full_database(self):
        """MetaSchedule's own database, every record: what tuning appends to (under the work dir's lock,
        which this package's tuning takes). Read again whenever the files changed, so that the workload
        numbers of the records it appends follow what another process appended before."""
        stamp = database_stamp(self.work_dir)
        if self._full is None or stamp != self._full_stamp:
            self._full = open_database(self.work_dir)
            self._full_stamp = stamp if None not in stamp else database_stamp(self.work_dir)
        return self._full

    def search_model(self):
        """Tuning each kernel the search meets would take minutes per graph: the analytic model of
        the same lowering searches, and this one judges what it proposes."""
        from .analytic import AnalyticCost

        return AnalyticCost(lowering=self.lowering)

    # ---- tuning -----------------------------------------------------------------------------
    def tune_module(self, mod):
        """Tune every fused PrimFunc of a Relax module that has no record yet; returns the database."""
        return self.tune_modules([mod])

    def tune_modules(self, mods):
        """Tune the fused PrimFuncs of several Relax modules in one MetaSchedule run; returns the database.

        One run, not one per module: each run pays for its builder processes and cost model, so
        tuning the kernels of a graph one by one took about twice as long. But at most
        `tasks_per_run` kernels per run: MetaSchedule writes a run's records only once every task
        in it has had its first batch (with 64 trials, at its very end), so an interrupted run
        of all of a model's kernels lost hours of tuning; now it loses one run's.
        """
        from tvm.s_tir import meta_schedule as ms

        lowered = [lower(mod, self.target, lowering="tuning") for mod in mods]
        with file_lock(self.work_dir / ".lock"):
            database = self.database()
            fresh, seen = [], StructuralSet()
            for mod in lowered:
                for t in ms.relax_integration.extract_tasks(mod, self.target):
                    func = t.dispatched[0]
                    if t.mod.attrs.get("tirx.is_scheduled", False) or database.query_tuning_record(
                            func, self.target, "main") is not None:
                        continue
                    if func in self._failed:
                        continue  # this model tuned it and no candidate ran: it would fail again
                    if seen.add(func):  # once per run, however many modules share it
                        fresh.append(t)
            if fresh and self.trials > 0:
                if not self.verbose:  # the console handler takes this level; the log files keep everything
                    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
                drop_foreign_log_handlers()
                contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
                    fresh, str(self.work_dir), strategy=stop_when_exhausted(), seed=self.ms_seed)
                if contexts:
                    database = self._full_database()
                    # a MetaSchedule run can take minutes: say what is running while it does
                    LOG.info("tuning %d kernels, %d trials each, into %s", len(contexts), self.trials, self.work_dir)
                    step = self.tasks_per_run
                    runs = range(0, len(contexts), step)
                    bar = progress(runs, total=len(runs), enabled=self.progress_bar, unit="run",
                                   desc=f"tuning {len(contexts)} kernels ({self.trials} trials each)")
                    for start in bar:
                        chunk = contexts[start:start + step]
                        ms.tune.tune_tasks(tasks=chunk, task_weights=weights[start:start + step],
                                           work_dir=str(self.work_dir),
                                           max_trials_global=self.trials * len(chunk),
                                           max_trials_per_task=self.trials,
                                           num_trials_per_iter=self.num_trials_per_iter, database=database,
                                           cost_model=self.ms_cost_model,
                                           builder=self.builder or local_builder(),
                                           runner=local_runner() if self.ms_runner == "local" else self.ms_runner)
                        self.tunings += len(chunk)
                        for context in chunk:  # remembered for this model's lifetime only: a timeout on a
                            # busy machine fails a kernel too, and a later process may tune it again
                            if database.query_tuning_record(context.mod, self.target, "main") is None:
                                self._failed.add(context.mod)
                    bar.close()
                    # the records went into `database` as well as its files: no need to read them again,
                    # unless a writer without the lock (static_shape_tuning) appended some meanwhile
                    synced = synced_stamp(self.work_dir, database)
                    if synced is None:
                        self._full = self._full_stamp = self._database = self._database_stamp = None
                    else:  # and a copy of the best records for later readers
                        self._database, _ = read_best(self.work_dir, database, synced)
                        self._full_stamp = self._database_stamp = synced
        return database

    def _compute(self, kernels):
        """Tune every kernel not in the cost cache in one run, then build and time each."""
        hits = self._cached(lambda c: c.get_many(self.target_key, self.device, self.method,
                                                 [k.key for k in kernels]), {})
        missing = [k for k in kernels if hits.get(k.key) is None]
        if len(missing) > 1 and self.trials > 0:
            mods = []
            for k in missing:
                try:
                    mods.append(kernel_module(k, self.seed, self.opaque)[0])
                except Exception:  # noqa: BLE001 - measuring it reports the failure
                    continue
            self.tune_modules(mods)
        # Right after a tuning run PSI's 10-second average still holds its load, so a cached time taken
        # on contended CPUs is seldom measured again in this batch; a later batch on quiet CPUs does it.
        return super()._compute(kernels)

    def build(self, kernel: Kernel):
        import tvm

        mod, inputs = kernel_module(kernel, self.seed, self.opaque)
        with reusing_lowerings():  # tuning lowered it to find its kernel
            database = self.tune_module(mod)
            lowered = lower(mod, self.target, database, "tuning")
        self.compiles += 1
        return tvm.compile(lowered, self.target), inputs

    def compile_tuned(self, mod):
        """Compile a whole model with the schedules in this model's database (tunes nothing)."""
        import tvm

        return tvm.compile(lower(mod, self.target, self.database(), "tuning"), self.target)


def tuning_key(target) -> str:
    """The directory name used for a target's default tuning database."""
    return hashlib.blake2b(target_key(target).encode(), digest_size=6).hexdigest()
