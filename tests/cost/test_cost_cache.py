"""The SQLite cost cache: round trip, corruption recovery, concurrent writers."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from taso_relay.cost import CacheCorruptWarning, CostCache

ROOT = Path(__file__).resolve().parents[2]


def test_round_trip(tmp_path):
    cache = CostCache(tmp_path / "c.sqlite")
    assert cache.get("T", "local", "m", "w1") is None
    cache.put("T", "local", "m", "w1", 1.5e-3, 1e-5, 10, "conv2d+relu")
    e = cache.get("T", "local", "m", "w1")
    assert (e.seconds, e.std, e.repeats, e.label) == (1.5e-3, 1e-5, 10, "conv2d+relu")
    assert e.tvm_version and e.measured_at > 0
    assert cache.get("T", "rpc:pi", "m", "w1") is None  # other device
    assert cache.get("T2", "local", "m", "w1") is None  # other target
    cache.put("T", "local", "m", "w1", 2e-3)  # replaced
    assert cache.get("T", "local", "m", "w1").seconds == 2e-3
    assert len(cache) == 1 and bool(CostCache(tmp_path / "empty.sqlite"))


def test_get_many_and_entries(tmp_path):
    cache = CostCache(tmp_path / "c.sqlite")
    cache.put_many([("T", "local", "measured/x", f"w{i}", i * 1e-3, 0.0, 5, "k") for i in range(1200)])
    got = cache.get_many("T", "local", "measured/x", [f"w{i}" for i in range(0, 1300, 3)])
    assert len(got) == 400 and got["w300"].seconds == pytest.approx(0.3)
    assert len(cache.entries(method="measured")) == 1200 and cache.entries(method="tuned") == []
    assert cache.clear("other") == 0 and cache.clear() == 1200


def test_persists_across_instances(tmp_path):
    CostCache(tmp_path / "c.sqlite").put("T", "local", "m", "w", 1.0)
    assert CostCache(tmp_path / "c.sqlite").get("T", "local", "m", "w").seconds == 1.0


def test_default_path_is_in_the_user_cache(_private_cache_dir):
    assert CostCache().path == _private_cache_dir / "costs.sqlite"


@pytest.mark.parametrize("garbage", [b"this is not a database" * 100, b"SQLite format 3\x00" + b"\xff" * 5000])
def test_corrupt_file_is_moved_aside_and_rebuilt(tmp_path, garbage):
    path = tmp_path / "c.sqlite"
    CostCache(path).put("T", "local", "m", "w", 1.0)
    path.write_bytes(garbage)
    for side in (tmp_path / "c.sqlite-wal", tmp_path / "c.sqlite-shm"):
        side.unlink(missing_ok=True)
    cache = CostCache(path)
    with pytest.warns(CacheCorruptWarning, match="corrupt"):
        assert cache.get("T", "local", "m", "w") is None
    aside = list(tmp_path.glob("c.sqlite.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == garbage
    cache.put("T", "local", "m", "w", 2.0)
    assert CostCache(path).get("T", "local", "m", "w").seconds == 2.0


def test_corruption_while_open_is_recovered(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = CostCache(path)
    cache.put("T", "local", "m", "w", 1.0)
    cache.close()
    with open(path, "r+b") as fh:  # clobber the header and first pages of the file under it
        fh.write(b"\x00garbage" * 2000)
    with pytest.warns(CacheCorruptWarning):
        cache.put("T", "local", "m", "w2", 3.0)
    assert CostCache(path).get("T", "local", "m", "w2").seconds == 3.0


def test_pickles_for_worker_processes(tmp_path):
    cache = CostCache(tmp_path / "c.sqlite")
    cache.put("T", "local", "m", "w", 1.0)
    clone = pickle.loads(pickle.dumps(cache))
    assert clone.get("T", "local", "m", "w").seconds == 1.0


WRITER = textwrap.dedent("""
    import sys
    from taso_relay.cost.cache import CostCache
    path, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cache = CostCache(path)
    for i in range(n):
        cache.put("T", "local", "m", f"{who}-{i}", float(i))
        cache.put("T", "local", "m", f"shared-{i}", float(i))
        assert cache.get("T", "local", "m", f"{who}-{i}").seconds == float(i)
    print("ok", len(cache))
""")


def test_concurrent_processes_share_the_file(tmp_path):
    path = tmp_path / "c.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"p{k}", "150"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.startswith("ok")
    cache = CostCache(path)
    assert len(cache) == 3 * 150 + 150
    assert not list(tmp_path.glob("*.corrupt-*"))
