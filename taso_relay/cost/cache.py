"""The on-disk cost cache: one SQLite file shared by every process of the user.

Rows are keyed by (target, device, method, workload):
  target    canonical JSON of the TVM target
  device    "local", or "rpc:<key>" for a remote device
  method    how the kernel was lowered and timed (e.g. "measured/decompose+zero/v1")
  workload  the kernel's workload key (Kernel.key)
and hold the median time in seconds, its standard deviation, the number of
repeats, when it was measured and with which TVM version. How contended the CPUs
were meanwhile (contention.py) lies in a table of its own, `stamps`, which holds
the row's measured_at beside it: a version of this package from before the stamp
reads and writes `costs` as it always did, and a time it writes over a stamped
one leaves a stamp that no longer matches, so it reads as unknown (NULL).

Concurrency: WAL journal, a busy timeout, and INSERT OR REPLACE, so several
processes (parallel searches, a CLI listing entries) read and write the same
file safely. A corrupt file (not a database, malformed pages) is moved aside to
<file>.corrupt-<timestamp> under an exclusive lock, with a warning, and an empty
cache is created in its place: costs are re-measured, never silently wrong.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from .paths import default_db_path

SCHEMA = """
CREATE TABLE IF NOT EXISTS costs (
    target TEXT NOT NULL,
    device TEXT NOT NULL,
    method TEXT NOT NULL,
    workload TEXT NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    seconds REAL NOT NULL,
    std REAL NOT NULL DEFAULT 0,
    repeats INTEGER NOT NULL DEFAULT 0,
    measured_at REAL NOT NULL,
    tvm_version TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (target, device, method, workload)
);
CREATE TABLE IF NOT EXISTS stamps (
    target TEXT NOT NULL,
    device TEXT NOT NULL,
    method TEXT NOT NULL,
    workload TEXT NOT NULL,
    measured_at REAL NOT NULL,
    contention REAL,
    PRIMARY KEY (target, device, method, workload)
);
"""
KEY = ("target", "device", "method", "workload")
COLUMNS = KEY + ("label", "seconds", "std", "repeats", "measured_at", "tvm_version")
# Files written by the package's first stamped version hold the stamp in a column of `costs` instead:
# read there where `stamps` has none (that version may still be writing them).
STAMP, OLD_STAMP = "s.contention", "COALESCE(s.contention, c.contention)"


def select(stamp: str = STAMP) -> str:
    return (f"SELECT {', '.join('c.' + c for c in COLUMNS)}, {stamp} FROM costs c LEFT JOIN stamps s ON "
            + " AND ".join(f"s.{c} = c.{c}" for c in KEY + ("measured_at",)))


CORRUPT_MARKERS = ("not a database", "malformed", "file is encrypted", "disk image", "unsupported file format",
                   "database corrupt")


class CacheCorruptWarning(UserWarning):
    """The cost cache file was unreadable and has been moved aside and rebuilt."""


@dataclass(frozen=True)
class Entry:
    target: str
    device: str
    method: str
    workload: str
    label: str
    seconds: float
    std: float
    repeats: int
    measured_at: float
    tvm_version: str
    contention: float | None = None


_TVM_VERSION: str | None = None


def tvm_version() -> str:
    global _TVM_VERSION
    if _TVM_VERSION is None:
        try:
            from importlib.metadata import version

            _TVM_VERSION = version("apache-tvm")
        except Exception:  # noqa: BLE001 - metadata missing (source build)
            _TVM_VERSION = ""
    return _TVM_VERSION


def _is_corrupt(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.DatabaseError) and any(m in text for m in CORRUPT_MARKERS)


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on `path` (created if needed); a no-op where fcntl is missing."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class CostCache:
    """SQLite-backed cache of kernel times; safe across threads and processes."""

    def __init__(self, path: str | os.PathLike | None = None, timeout: float = 60.0):
        self.path = Path(path) if path else default_db_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._select = select()
        self._lock = threading.RLock()

    # ---- connection and recovery -------------------------------------------------------
    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), timeout=self.timeout, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.executescript(SCHEMA)
            columns = {row[1] for row in conn.execute("PRAGMA table_info(costs)")}
            self._select = select(OLD_STAMP if "contention" in columns else STAMP)
            row = conn.execute("PRAGMA quick_check").fetchone()
            if row is None or row[0] != "ok":
                raise sqlite3.DatabaseError(f"database disk image is malformed (quick_check: {row})")
        except BaseException:
            conn.close()
            raise
        return conn

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        self._conn = None  # a connection inherited through fork is never reused
        try:
            conn = self._open()
        except sqlite3.DatabaseError as exc:
            if not _is_corrupt(exc):
                raise
            conn = self._recover(exc)
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _recover(self, exc: BaseException) -> sqlite3.Connection:
        """Move a corrupt file aside (once, whichever process gets the lock first) and start afresh."""
        self.close()
        with file_lock(self.lock_path):
            try:  # another process may have rebuilt it while we waited
                return self._open()
            except sqlite3.DatabaseError as again:
                if not _is_corrupt(again):
                    raise
            stamp = time.strftime("%Y%m%d-%H%M%S")
            aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{os.getpid()}")
            if self.path.exists():
                os.replace(self.path, aside)
            for suffix in ("-wal", "-shm"):
                side = self.path.with_name(self.path.name + suffix)
                with contextlib.suppress(FileNotFoundError):
                    side.unlink()
            warnings.warn(f"cost cache {self.path} was corrupt ({exc}); moved it to {aside.name} and started "
                          f"an empty cache (kernels will be measured again)", CacheCorruptWarning, stacklevel=4)
            return self._open()

    def _run(self, fn):
        """Run fn(conn) under the thread lock; on corruption, recover once and retry."""
        with self._lock:
            try:
                return fn(self._connection())
            except sqlite3.DatabaseError as exc:
                if not _is_corrupt(exc):
                    raise
                self._conn = self._recover(exc)
                self._pid = os.getpid()
                return fn(self._conn)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
            self._conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self):  # picklable for worker processes: they reconnect
        return {"path": self.path, "timeout": self.timeout}

    def __setstate__(self, state):
        self.__init__(state["path"], state["timeout"])

    # ---- queries -------------------------------------------------------------------------
    def get(self, target: str, device: str, method: str, workload: str) -> Entry | None:
        return self.get_many(target, device, method, [workload]).get(workload)

    def get_many(self, target: str, device: str, method: str, workloads: Iterable[str]) -> dict[str, Entry]:
        keys = list(dict.fromkeys(workloads))
        out: dict[str, Entry] = {}

        def query(conn):
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"{self._select} WHERE c.target=? AND c.device=? AND c.method=? AND c.workload IN ({marks})",
                    (target, device, method, *chunk)).fetchall()
                for row in rows:
                    e = Entry(*row)
                    out[e.workload] = e
            return out

        return self._run(query)

    def put(self, target: str, device: str, method: str, workload: str, seconds: float, std: float = 0.0,
            repeats: int = 0, label: str = "", contention: float | None = None, keep_faster: bool = False) -> None:
        """keep_faster: where the row holds a faster time, keep that time (with this timing's stamp)."""
        self.put_many([(target, device, method, workload, seconds, std, repeats, label, contention)],
                      keep_faster=keep_faster)

    def put_many(self, rows: Iterable[tuple], keep_faster: bool = False) -> None:
        """rows: (target, device, method, workload, seconds, std, repeats, label[, contention]).

        keep_faster: a row that holds a faster time keeps it (with when and by which TVM it was
        measured), read and written in one transaction so that two processes timing the same kernel
        again cannot replace each other's faster time. The kept time takes the new stamp: a time taken
        on contended CPUs that a later timing does not beat was not slowed by the contention.
        """
        version = tvm_version()
        now = time.time()
        data = []
        for t, d, m, w, s, sd, n, lab, *rest in rows:
            share = rest[0] if rest else None
            data.append([t, d, m, w, lab, float(s), float(sd), int(n), now, version,
                         None if share is None else float(share)])

        def write(conn):
            conn.execute("BEGIN IMMEDIATE")
            try:
                rows = [list(row) for row in data]  # a retry after recovery starts from the new timings
                if keep_faster:
                    for row in rows:
                        old = conn.execute("SELECT seconds, std, repeats, measured_at, tvm_version FROM costs "
                                           "WHERE target=? AND device=? AND method=? AND workload=?",
                                           row[:4]).fetchone()
                        if old is not None and old[0] < row[5]:
                            row[5:10] = old
                conn.executemany(f"INSERT OR REPLACE INTO costs ({', '.join(COLUMNS)}) VALUES "
                                 f"({','.join('?' * len(COLUMNS))})", [row[:10] for row in rows])
                conn.executemany("INSERT OR REPLACE INTO stamps VALUES (?, ?, ?, ?, ?, ?)",
                                 [row[:4] + row[8:9] + row[10:] for row in rows])
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # SQLite ends it itself on some errors (a full disk)
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise

        self._run(write)

    def entries(self, target: str | None = None, method: str | None = None) -> list[Entry]:
        sql, args = "", []
        where = []
        if target is not None:
            where.append("c.target = ?")
            args.append(target)
        if method is not None:
            where.append("c.method LIKE ?")
            args.append(method + "%")
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY c.measured_at"
        # the select is the connection's (which column holds the stamp), known once it is open
        return self._run(lambda conn: [Entry(*row) for row in conn.execute(self._select + sql, args).fetchall()])

    def __bool__(self) -> bool:  # an empty cache is still a cache
        return True

    def __len__(self) -> int:
        return self._run(lambda conn: conn.execute("SELECT COUNT(*) FROM costs").fetchone()[0])

    def clear(self, target: str | None = None) -> int:
        def wipe(conn):
            if target is None:
                conn.execute("DELETE FROM stamps")
                return conn.execute("DELETE FROM costs").rowcount
            conn.execute("DELETE FROM stamps WHERE target = ?", (target,))
            return conn.execute("DELETE FROM costs WHERE target = ?", (target,)).rowcount

        return self._run(wipe)
