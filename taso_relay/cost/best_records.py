"""A copy of a MetaSchedule JSON database that keeps only each kernel's best record, for reading.

MetaSchedule keeps every candidate it measured (64 per kernel at 64 trials) and replays each one's
trace when it opens the database: full Inception-v3's 10,751 records (204 kernels) took 36 s to
open, so a tuned `TASOPass` or `taso-relay compile --work-dir` that tuned nothing spent a third of
its time reading. Applying a database and the tuned judge only ever ask for a kernel's best record
(`query_tuning_record` is `get_top_k(workload, 1)`), so they read this copy: 204 records, 1 s.

Tuning still appends to the full files, MetaSchedule's own. A copy is named after those files' sizes
and modification times (`database_stamp`), so a change to them (another process tuning,
`taso-relay tune`) makes the next reader write a new copy; older copies are removed.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

COPIES = "best"  # the copies' directory, inside the database's work dir
COMPLETE = "complete"  # written last in a copy: a copy without it was interrupted
FILES = ("database_workload.json", "database_tuning_record.json")


def database_stamp(work_dir: Path) -> tuple:
    """What tells whether a JSON database's files changed: their sizes and modification times."""
    stamp = []
    for name in FILES:
        try:
            st = (Path(work_dir) / name).stat()
            stamp.append((st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            stamp.append(None)
    return tuple(stamp)


def read_database(work_dir, full=None):
    """A database with the best record of each kernel of work_dir's database as its files are now
    (read_best's first half)."""
    return read_best(work_dir, full)[0]


def read_best(work_dir, full=None) -> tuple:
    """(a database with the best record of each kernel of work_dir's database as its files are now,
    the full database where it was read, else None).

    full: that database, if the caller has read it already: a copy is made from it, and it is what
    is returned. Without it, an existing copy is opened, or the files are read (and copied).
    Queried for a kernel it lacks, a JSON database writes the kernel down in its own files: the copy
    takes that, and never a record (tuning goes to the full database)."""
    from .lowering import open_database

    work_dir = Path(work_dir)
    stamp = database_stamp(work_dir)
    if None in stamp:  # no database yet: MetaSchedule makes the empty files
        full = full if full is not None else open_database(work_dir)
        return full, full
    copy = work_dir / COPIES / _name(stamp)
    if full is None and (copy / COMPLETE).is_file():
        try:
            return open_database(copy), None
        except Exception:  # noqa: BLE001 - a damaged copy: the full files are still there
            pass
    if full is None:
        full = open_database(work_dir)
    if database_stamp(work_dir) == stamp:  # not changed while it was read: what was read is this stamp's
        try:
            write_copy(full, copy)
        except OSError:
            pass  # a read-only work dir: read in full next time too
    return full, full


def write_copy(full, copy: Path) -> None:
    """Each workload's best record in `full` (a loaded database), written to the directory `copy`
    (through a temporary directory renamed into place, so a reader never sees half a copy)."""
    from tvm.s_tir import meta_schedule as ms

    from .lowering import open_database

    if (copy / COMPLETE).is_file():
        return
    copy.parent.mkdir(parents=True, exist_ok=True)
    tmp = copy.parent / f".{copy.name}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    out = open_database(tmp)
    seen = set()
    for record in full.get_all_tuning_records():
        workload = record.workload
        if workload in seen:
            continue
        seen.add(workload)
        for best in full.get_top_k(workload, 1):  # none where no candidate ran
            out.commit_tuning_record(ms.database.TuningRecord(
                best.trace, out.commit_workload(workload.mod), best.run_secs, best.target, best.args_info))
    (tmp / COMPLETE).write_text("")
    try:
        tmp.rename(copy)
    except OSError:  # another process put its copy there first: the same records
        shutil.rmtree(tmp, ignore_errors=True)
    for old in copy.parent.iterdir():  # older copies, and temporary ones a killed process left a day ago
        if old.name != copy.name and (not old.name.startswith(".") or _age_s(old) > 86400):
            shutil.rmtree(old, ignore_errors=True)


def _age_s(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def _name(stamp: tuple) -> str:
    return hashlib.blake2b(repr(stamp).encode(), digest_size=8).hexdigest()
