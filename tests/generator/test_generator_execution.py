"""(c) a resumed run equals an uninterrupted one; (d) a Dask run equals the local run;
determinism across worker counts; the CLI; enumeration completeness against brute force."""
from __future__ import annotations

import itertools
import subprocess
import sys

import pytest
from gen_helpers import SC, W2, X2, small

from taso_relay.generator import fingerprint as fpm
from taso_relay.generator.enumerate import Tensor, engine_for, run_task, task_ids
from taso_relay.generator.pairing import decode, rename, renamings, structure_key
from taso_relay.generator.run import Interrupted, generate
from taso_relay.generator.templates import node_attrs
from taso_relay.subst import load_rules

SETTINGS = small(["matmul", "add", "relu", "transpose", "smul", "concat", "split"], 2, (X2, W2, SC))


def _run(tmp_path, name, **kw):
    out = tmp_path / f"{name}.json"
    generate(SETTINGS, out, checkpoint_dir=tmp_path / f"{name}-ck", progress=False, log=lambda *a: None, **kw)
    return out.read_bytes()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("ref"), "ref", workers=1)


def test_resumed_run_equals_uninterrupted(tmp_path, reference):
    assert len(task_ids(SETTINGS)) > 5
    with pytest.raises(Interrupted):
        _run(tmp_path, "resume", workers=1, stop_after=3)
    done = list((tmp_path / "resume-ck").glob("task_*.npz"))
    assert len(done) == 3
    assert _run(tmp_path, "resume", workers=1) == reference


def test_parallel_run_equals_serial(tmp_path, reference):
    assert _run(tmp_path, "par", workers=2) == reference


def test_tasks_on_threads_of_one_process_equal_a_serial_run():
    """A dask worker runs tasks on several threads; each thread gets its own engine (its value
    cache is cleared per task), so the results equal a serial run's."""
    from concurrent.futures import ThreadPoolExecutor

    tasks = task_ids(SETTINGS) * 3
    serial = [run_task(SETTINGS, t) for t in tasks]
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(lambda t: run_task(SETTINGS, t), tasks))
    for a, b in zip(serial, threaded):
        assert a.task == b.task and a.counts == b.counts
        assert (a.fps == b.fps).all() and (a.enc == b.enc).all()


def test_dask_local_cluster_equals_local_run(tmp_path, reference):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        assert _run(tmp_path, "dask", client=client) == reference


def test_rule_file_has_ids_text_provenance_and_report(tmp_path, reference):
    path = tmp_path / "f.json"
    path.write_bytes(reference)
    rules = load_rules(path)
    assert rules and len({r.id for r in rules}) == len(rules)
    for r in rules:
        assert r.id.startswith("t") and "-" in r.id
        assert "=>" in r.text
        assert r.provenance["generator"] == "taso_relay.generator"
        assert r.provenance["settings"] == SETTINGS.digest
        assert r.verification["status"] == "UNVERIFIED"


def test_cli_generate_and_stats(tmp_path):
    out = tmp_path / "cli.json"
    cmd = [sys.executable, "-m", "taso_relay.generator", "generate", "--max-ops", "2", "--ops", "matmul,transpose",
           "--out", str(out), "--workers", "1", "--checkpoint-dir", str(tmp_path / "ck"), "--no-progress"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "graphs enumerated" in res.stdout
    assert (tmp_path / "cli.report.json").exists()
    res = subprocess.run([sys.executable, "-m", "taso_relay.generator", "stats", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "rules" in res.stdout and "generation report" in res.stdout
    bad = subprocess.run([sys.executable, "-m", "taso_relay.generator", "stats", str(tmp_path / "missing.json")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "no such rule file" in bad.stderr and "Traceback" not in bad.stderr


def test_add_rules_commands_wires_into_a_parser():
    import argparse

    from taso_relay.generator.cli import add_rules_commands

    parser = argparse.ArgumentParser(prog="taso-relay")
    add_rules_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["rules", "generate", "--max-ops", "3", "--workers", "2", "--scheduler", "tcp://h:8786"])
    assert args.max_ops == 3 and args.workers == 2 and args.scheduler == "tcp://h:8786" and callable(args.func)
    assert parser.parse_args(["rules", "stats", "x.json"]).file == "x.json"


def _classes_of(eng, rows):
    """Graphs up to renaming inputs: used copies moved to the first copies, then the least naming."""
    out = set()
    first = {}
    for i in range(eng.P):
        first.setdefault(eng.role_of[i], i)
    for row in rows:
        g = decode(eng, row)
        by_role = {}
        for i in sorted(g.pool_inputs):
            by_role.setdefault(eng.role_of[i], []).append(i)
        low = {i: first[r] + k for r, used in by_role.items() for k, i in enumerate(used)}
        g = rename(g, low, eng.P)
        out.add(min(structure_key(eng, rename(g, perm, eng.P)) for perm in renamings(eng, g)))
    return out


def _brute_force_rows(settings):
    """Every operator sequence over every input copy: no canonical order, no symmetry breaking."""
    eng = engine_for(settings)
    P, p, K = eng.P, settings.prime, settings.max_ops
    dist, _ = fpm.pool_values(settings)
    tens = [eng.pool[i] for i in range(P)]
    vals = [fpm.digest(v) for v in dist]
    arrays = list(dist)
    ops, rows = [], []

    def dfs():
        if ops:
            used = {i for _, idxs in ops for i in idxs}
            outs = [i for i in range(P, len(tens)) if i not in used]
            if 0 < len(outs) <= settings.max_outputs:
                rows.append([v for tid, idxs in ops for v in (tid, *idxs, *([-1] * (2 - len(idxs))))])
        if len(ops) == K:
            return
        n = len(tens)
        for t in eng.templates:
            combos = [()] if t.arity == 0 else [(a,) for a in range(n)] if t.arity == 1 else [
                (a, b) for a, b in itertools.permutations(range(n), 2) if not t.commutative or a < b]
            for combo in combos:
                ins = [tens[i] for i in combo]
                if (t.tid, combo) in ops or not t.check(*ins):
                    continue
                meta = t.infer(*ins)
                attrs = node_attrs(t, [x.shape for x in ins], [m for m, _ in meta])
                outs = t.mod([arrays[i] for i in combo], attrs, p)
                ids = [fpm.digest(v) for v in outs]
                if any(i in vals for i in ids) or len(set(ids)) < len(ids):
                    continue
                for i, v, (shape, split) in zip(ids, outs, meta):
                    tens.append(Tensor(dval=i, cval=i, shape=shape, split=split, weight=all(x.weight for x in ins),
                                       input_weight=False, pool=-1, role=-1, copy=-1, producer=-1, rkey=(), ekey=()))
                    vals.append(i)
                    arrays.append(v)
                ops.append((t.tid, combo))
                dfs()
                ops.pop()
                for _ in outs:
                    tens.pop(), vals.pop(), arrays.pop()

    dfs()
    return rows


@pytest.mark.parametrize("k", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_enumeration_is_complete_up_to_renaming(k):
    """The canonical enumeration reaches every graph the brute force does, up to renaming inputs."""
    settings = small(["add", "relu", "matmul", "concat", "split", "transpose"], k, (X2, W2))
    eng = engine_for(settings)
    rows = [row for t in task_ids(settings) for row in run_task(settings, t).enc]
    brute_rows = _brute_force_rows(settings)
    assert _classes_of(eng, brute_rows) == _classes_of(eng, rows)
    assert len(rows) < len(brute_rows) / 2  # canonical order and symmetry breaking pay


def test_rules_stats_on_a_missing_file_is_bad_input(tmp_path, capsys):
    from taso_relay.cli import main

    code = main(["rules", "stats", str(tmp_path / "missing.json")])
    assert code == 2
    err = capsys.readouterr().err
    assert "no such rule file" in err and "Traceback" not in err
