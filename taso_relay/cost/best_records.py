"""A copy of a MetaSchedule JSON database that keeps only each kernel's best record, for reading.

MetaSchedule keeps every candidate it measured (64 per kernel at 64 trials) and replays each one's
trace when it opens the database: full Inception-v3's 10,751 records (204 kernels) took 36 s to
open, so a tuned `TASOPass` or `taso-relay compile --work-dir` that tuned nothing spent a third of
its time reading. Applying a database and the tuned judge only ever ask for a kernel's best record
(`query_tuning_record` is `get_top_k(workload, 1)`), so they read this copy: 204 records, 1 s.

Only tuning writes to a database (a query for a kernel it lacks writes nothing), and it appends to
the full files, MetaSchedule's own. A copy is named after those files' sizes, modification times
and inodes (`database_stamp`), so a change to them (another process tuning, `taso-relay tune`)
makes the next reader write a new copy; the other copies are then removed. A copy that
cannot be opened, or holds another number of records than it says, is not used but removed.
"""
from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from pathlib import Path

COPIES = "best"  # the copies' directory, inside the database's work dir
COMPLETE = "complete"  # written last in a copy, with its number of records
FILES = ("database_workload.json", "database_tuning_record.json")


def database_stamp(work_dir: Path) -> tuple:
    """What tells whether a JSON database's files changed: their sizes, modification times, inodes."""
    stamp = []
    for name in FILES:
        try:
            st = (Path(work_dir) / name).stat()
            stamp.append((st.st_size, st.st_mtime_ns, st.st_ino))
        except FileNotFoundError:
            stamp.append(None)
    return tuple(stamp)


def read_database(work_dir, full=None, full_stamp: tuple | None = None):
    """A database with the best record of each kernel of work_dir's database (read_best's first half)."""
    return read_best(work_dir, full, full_stamp)[0]


def read_best(work_dir, full=None, full_stamp: tuple | None = None) -> tuple:
    """(a database with the best record of each kernel of work_dir's database as its files are now,
    the full database where it was read or given, else None).

    full: that database, if the caller holds it, read or tuned into when the files had `full_stamp`.
    It is what is returned; a copy is made from it only if the files still have that stamp (another
    writer's records would be missing from it). Without it, an existing copy is opened, or the files
    are read (and copied)."""
    from .lowering import open_database

    work_dir = Path(work_dir)
    stamp = database_stamp(work_dir)
    if None in stamp:  # no database yet: MetaSchedule makes the empty files
        full = full if full is not None else open_database(work_dir)
        return full, full
    copy = work_dir / COPIES / _name(stamp)
    if full is None:
        found = _open_copy(copy)
        if found is not None:
            return found, None
        from .progress import progress  # tens of seconds on a large database (every trace replayed): say so

        records = _record_lines(work_dir)
        for _ in progress(range(1), total=1, unit="database",
                          desc=f"reading {records or 0:,} tuning records (once: later reads take the best of each)"):
            full, full_stamp = open_database(work_dir), stamp
    if database_stamp(work_dir) == stamp == full_stamp:  # what `full` holds is what the files hold
        write_copy(full, copy)
    return full, full


def write_copy(full, copy: Path) -> bool:
    """Each workload's best record in `full` (a loaded database), written to the directory `copy`
    through a temporary directory renamed into place, so a reader never sees half a copy. Whether
    a copy is there now; a failure (a read-only or full disk) only leaves the copy unwritten."""
    from tvm.s_tir import meta_schedule as ms

    from .lowering import open_database

    if (copy / COMPLETE).is_file():
        return True
    tmp = None
    try:
        copy.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=copy.parent, prefix=f".{copy.name}."))
        out, seen, count = open_database(tmp), set(), 0
        for record in full.get_all_tuning_records():
            workload = record.workload
            if workload in seen:
                continue
            seen.add(workload)
            for best in full.get_top_k(workload, 1):  # none where no candidate ran
                out.commit_tuning_record(ms.database.TuningRecord(
                    best.trace, out.commit_workload(workload.mod), best.run_secs, best.target, best.args_info))
                count += 1
        (tmp / COMPLETE).write_text(str(count))
        if copy.exists() and not (copy / COMPLETE).is_file():
            shutil.rmtree(copy, ignore_errors=True)  # a copy that was found unusable
        try:
            tmp.rename(copy)
        except OSError:  # another process put its copy of the same files there first
            shutil.rmtree(tmp, ignore_errors=True)
        tmp = None
    except Exception:  # noqa: BLE001 - TVM's file errors are not OSError; the copy is only a saving
        return False
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    _remove_older(copy)
    return (copy / COMPLETE).is_file()


def synced_stamp(work_dir, full) -> tuple | None:
    """The files' stamp, where they hold exactly the records of `full` (a database read or tuned into
    by this process); None where another writer appended records meanwhile."""
    stamp = database_stamp(Path(work_dir))
    lines = _record_lines(work_dir)
    return stamp if None not in stamp and lines is not None and lines == len(full) else None


def _record_lines(work_dir) -> int | None:
    """Tuning records in the database's file (one per line); None where it cannot be read."""
    try:
        with open(Path(work_dir) / FILES[1], "rb") as fh:
            return sum(1 for line in fh if line.strip())
    except OSError:
        return None


def _open_copy(copy: Path):
    """The copy's database, or None where it is not whole: one with its mark that does not open or
    holds another number of records is removed here; one without its mark, by the next write_copy."""
    from tvm.s_tir import meta_schedule as ms

    try:
        expected = int((copy / COMPLETE).read_text())
    except (OSError, ValueError):
        return None
    try:  # not open_database: a copy removed meanwhile must not come back as empty files
        database = ms.database.JSONDatabase(path_workload=str(copy / FILES[0]), path_tuning_record=str(copy / FILES[1]),
                                            allow_missing=False, module_equality="structural")
        if len(database) == expected:
            return database
    except Exception:  # noqa: BLE001 - removed meanwhile, or written by another TVM
        pass
    shutil.rmtree(copy, ignore_errors=True)
    return None


def _remove_older(copy: Path) -> None:
    """Where `copy` is of the files as they are now: every other copy, and temporary ones a killed
    process left a day ago. A copy of files changed since (a slow writer's) removes nothing."""
    if copy.name != _name(database_stamp(copy.parent.parent)):
        return
    try:
        others = [p for p in copy.parent.iterdir() if p.name != copy.name]
    except OSError:
        return
    now = time.time()
    for other in others:
        try:
            age = now - other.stat().st_mtime
        except OSError:
            continue
        if not other.name.startswith(".") or age > 86400:
            shutil.rmtree(other, ignore_errors=True)


def _name(stamp: tuple) -> str:
    return hashlib.blake2b(repr(stamp).encode(), digest_size=8).hexdigest()
