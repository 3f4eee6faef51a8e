"""Execution: tasks on a local process pool or a Dask cluster, checkpoints, the whole pipeline.

Each enumeration task's result is written to the checkpoint directory as soon
as it arrives (`task_NNNNN.npz`, written atomically), so an interrupted run
resumes by skipping finished tasks. Results are merged in task order, so the
outcome does not depend on how (or where, or in how many pieces) tasks ran.
"""
from __future__ import annotations

import json
import os
import platform
import resource
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from .config import Settings
from .enumerate import TaskResult, run_task, task_ids


class Interrupted(RuntimeError):
    """Raised by the `stop_after` test hook to simulate an interrupted run."""


def default_checkpoint_dir(settings: Settings) -> Path:
    base = os.environ.get("TASO_RELAY_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "taso_relay")
    return Path(base) / "generator" / f"k{settings.max_ops}-{settings.digest}"


# ---- checkpoints ------------------------------------------------------------------------

def _task_file(directory: Path, task: int) -> Path:
    return directory / f"task_{task:05d}.npz"


def _save(directory: Path, r: TaskResult) -> None:
    path = _task_file(directory, r.task)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, fps=r.fps, enc=r.enc, counts=np.array(json.dumps(r.counts, sort_keys=True)))
    os.replace(tmp, path)


def _load(directory: Path, task: int) -> TaskResult | None:
    path = _task_file(directory, task)
    try:
        with np.load(path, allow_pickle=False) as z:
            return TaskResult(task, z["fps"], z["enc"], json.loads(str(z["counts"])))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError):
        print(f"warning: checkpoint {path} is unreadable; recomputing that task", file=sys.stderr)
        return None


def _prepare_dir(directory: Path, settings: Settings, fresh: bool) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    manifest = directory / "settings.json"
    want = json.dumps(settings.to_dict(), sort_keys=True)
    if manifest.exists() and (fresh or manifest.read_text() != want):
        for f in list(directory.glob("task_*.npz")) + list(directory.glob("chunk_*.json")):
            f.unlink()
    manifest.write_text(want)


# ---- execution ----------------------------------------------------------------------------

def _call(args):
    fn, rest = args[0], args[1:]
    return fn(*rest)


def execute(fn, arglists: list, accept, *, workers=None, client=None, scheduler=None) -> None:
    """Run fn(*args) for each args on a local pool or Dask; accept(result) as each one finishes."""
    if not arglists:
        return
    if client is not None or scheduler:
        try:
            from distributed import Client, as_completed
        except ImportError:  # pragma: no cover
            raise RuntimeError("--scheduler needs dask[distributed]: pip install 'taso_relay[distributed]'") from None
        own = client is None
        if own:
            client = Client(scheduler)
        try:
            futures = [client.submit(fn, *a, pure=False) for a in arglists]
            for fut in as_completed(futures):
                accept(fut.result())
        finally:
            if own:
                client.close()
        return
    workers = workers or os.cpu_count() or 1
    if workers <= 1 or len(arglists) == 1:
        for a in arglists:
            accept(fn(*a))
        return
    import multiprocessing as mp
    ctx = mp.get_context("fork" if platform.system() == "Linux" else "spawn")
    with ctx.Pool(workers) as pool:
        for r in pool.imap_unordered(_call, [(fn,) + tuple(a) for a in arglists], chunksize=1):
            accept(r)


def enumerate_all(settings: Settings, *, workers: int | None = None, scheduler: str | None = None,
                  client=None, checkpoint_dir: str | os.PathLike | None = None, fresh: bool = False,
                  progress: bool = True, stop_after: int | None = None, log: Callable = print) -> list[TaskResult]:
    """Run every enumeration task (skipping checkpointed ones); results in task order.

    workers: local processes (default: all cores; 1 runs in this process).
    scheduler / client: a Dask scheduler address or a distributed.Client to run tasks on.
    stop_after: test hook; raise Interrupted after this many newly finished tasks.
    """
    tasks = task_ids(settings)
    directory = Path(checkpoint_dir) if checkpoint_dir else default_checkpoint_dir(settings)
    _prepare_dir(directory, settings, fresh)
    results: dict[int, TaskResult] = {}
    for t in tasks:
        r = _load(directory, t)
        if r is not None:
            results[t] = r
    todo = [t for t in tasks if t not in results]
    if results:
        log(f"resuming: {len(results)} of {len(tasks)} enumeration tasks already done ({directory})")
    bar = _bar(len(tasks), len(results), progress, "enumerate")
    finished = 0

    def accept(r: TaskResult):
        nonlocal finished
        _save(directory, r)
        results[r.task] = r
        bar.update(1)
        finished += 1
        if stop_after is not None and finished >= stop_after:
            raise Interrupted(f"stopped after {finished} tasks (test hook)")

    try:
        execute(run_task, [(settings, t) for t in todo], accept, workers=workers, client=client, scheduler=scheduler)
    finally:
        bar.close()
    return [results[t] for t in tasks]


class _NoBar:
    def update(self, n):
        pass

    def close(self):
        pass


def _bar(total, initial, progress, desc):
    if not progress:
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return _NoBar()
    return tqdm(total=total, initial=initial, desc=desc, unit="task", file=sys.stderr)


def peak_memory_mb() -> dict:
    """Peak resident memory (MiB) of this process and of its largest finished child process."""
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2 ** 20
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale / 2 ** 20
    return {"main_process": round(own, 1), "largest_worker": round(kids, 1)}


def timer():
    start = time.perf_counter()
    return lambda: round(time.perf_counter() - start, 2)


def merge_buckets(results: Iterable[TaskResult]) -> tuple[list[list[tuple[int, np.ndarray]]], dict]:
    """Group graphs by collapsed fingerprint; keep buckets of two or more, in a fixed order."""
    results = list(results)
    fps = np.concatenate([r.fps for r in results]) if results else np.zeros(0, np.int64)
    uniq, counts = np.unique(fps, return_counts=True)
    repeated = uniq[counts > 1]
    buckets: dict[int, list] = {}
    for r in results:
        rows = np.nonzero(np.isin(r.fps, repeated))[0]
        for row in rows:
            buckets.setdefault(int(r.fps[row]), []).append(r.enc[row])
    stats = {"graphs": int(fps.size), "distinct_fingerprints": int(uniq.size),
             "buckets": len(buckets), "largest_bucket": int(counts.max()) if counts.size else 0}
    return [buckets[k] for k in sorted(buckets)], stats


# ---- the whole pipeline ------------------------------------------------------------------

N_CHUNKS = 64  # fixed, so stage-two checkpoints resume whatever the number of workers


def _chunks(buckets: list, n: int) -> list[list]:
    """Contiguous ranges of buckets with about equal work (pairs grow as size squared)."""
    work = [len(b) * len(b) for b in buckets]
    total = sum(work) or 1
    out, cur, acc, k = [], [], 0, 1
    for b, w in zip(buckets, work):
        cur.append(b)
        acc += w
        if acc >= total * k / n and len(out) < n - 1:
            out.append(cur)
            cur, k = [], k + 1
    out.append(cur)
    return out


def _chunk_file(directory: Path, i: int) -> Path:
    return directory / f"chunk_{i:03d}_of_{N_CHUNKS}.json"


def generate(settings: Settings, out: str | os.PathLike | None = None, *, workers: int | None = None,
             scheduler: str | None = None, client=None, checkpoint_dir: str | os.PathLike | None = None,
             fresh: bool = False, progress: bool = True, stop_after: int | None = None,
             log: Callable = print) -> dict:
    """Enumerate, pair, prune, check and generalise; write the rule file and its report.

    Returns the report (also written beside `out` as NAME.report.json).
    """
    from ..subst.rule_io import rule_from_dict, save_rules
    from .pipeline import process_chunk
    from .report import build_report, write_report

    clock = timer()
    directory = Path(checkpoint_dir) if checkpoint_dir else default_checkpoint_dir(settings)
    results = enumerate_all(settings, workers=workers, scheduler=scheduler, client=client,
                            checkpoint_dir=directory, fresh=fresh, progress=progress, stop_after=stop_after, log=log)
    t_enum = clock()
    buckets, bstats = merge_buckets(results)
    enum_counts: dict = {}
    for r in results:
        for k, v in r.counts.items():
            enum_counts[k] = enum_counts.get(k, 0) + v
    chunks = _chunks(buckets, N_CHUNKS)
    done: dict[int, dict] = {}
    for i in range(len(chunks)):
        try:
            done[i] = json.loads(_chunk_file(directory, i).read_text())
        except (OSError, ValueError):
            pass
    bar = _bar(len(chunks), len(done), progress, "pair+generalise")

    def accept(res: dict):
        path = _chunk_file(directory, res["chunk"])
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(res))
        os.replace(tmp, path)
        done[res["chunk"]] = json.loads(json.dumps(res))
        bar.update(1)

    try:
        execute(process_chunk, [(settings, i, chunks[i]) for i in range(len(chunks)) if i not in done],
                accept, workers=workers, client=client, scheduler=scheduler)
    finally:
        bar.close()
    t_pairs = clock()
    stats: dict = {}
    rules: dict = {}
    equivalences = set()
    for i in range(len(chunks)):
        res = done[i]
        for k, v in res["stats"].items():
            stats[k] = stats.get(k, 0) + v
        for record in res["records"]:
            for item in record:
                if item is not None and item["id"] not in rules:
                    rules[item["id"]] = item
                    equivalences.add(item["provenance"]["equivalence"])
    ordered = sorted(rules.values(), key=lambda d: (max(len(d["source"]), len(d["target"])),
                                                      len(d["source"]) + len(d["target"]), d["id"]))
    rule_objs = [rule_from_dict(d) for d in ordered]
    counts = {"graphs": enum_counts.get("graphs", 0), **{k: stats.get(k, 0) for k in (
        "candidates", "exact", "renaming", "common_subgraph", "common_final_op", "independent_parts", "float_check")},
        "rules_directed": len(rule_objs), "equivalences": len(equivalences)}
    report = build_report(settings, counts, enum_counts, bstats, stats,
                          {"enumerate": t_enum, "pair_and_generalise": round(t_pairs - t_enum, 2), "total": clock()},
                          peak_memory_mb(), {"workers": workers or os.cpu_count(), "scheduler": scheduler or (
                              "client" if client is not None else None), "tasks": len(results), "chunks": len(chunks),
                              "checkpoints": str(directory)})
    if out is not None:
        meta = {"generator": {"name": "taso_relay.generator", "version": settings.version,
                              "settings": settings.to_dict(), "digest": settings.digest, "counts": counts}}
        save_rules(out, rule_objs, meta)
        write_report(out, report)
    report["rules"] = rule_objs
    return report
