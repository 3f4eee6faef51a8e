"""Enumerate every small graph over the operator templates and the input pool.

A graph is a set of operator applications; the tensors are the pool and the
operators' outputs; its outputs are the operator outputs nothing consumes.
Each graph is generated once, in a canonical order, without ever storing the
graphs seen so far:

* Operator order: an operator is appended only if its role key (its
  expression with input names erased to roles) is >= the keys of every
  operator after its last direct dependency. This admits exactly the greedy
  topological orders by key, so a set of operators is built in one order
  (ties, which need identical keys, are deduplicated with a small set).
* Input order (symmetry breaking): copies of a role are used in order of first
  use (x1 before x2), so graphs equal up to renaming inputs are generated once.
  Fingerprints are taken on the *collapsed* pool (copies of a role share one
  value) so renamed partners still meet; pairing.py recovers the renaming.
* TASO's restrictions: no duplicated tensors (an operator may not recompute a
  value already present) or operators, a graph-input weight is never a conv's
  data input, enlarge applies to inputs only, split cuts only where a concat
  joined, at most `max_outputs` outputs.

Work is partitioned by the first operator (a task), so tasks are independent
and deterministic; `run_task` returns fingerprints and compact encodings.
"""
from __future__ import annotations

import threading
from bisect import bisect_left
from dataclasses import dataclass, field

import numpy as np

from . import fingerprint as fpm
from .config import Settings
from .templates import Template, build_templates, node_attrs


class Tensor:
    __slots__ = ("dval", "cval", "shape", "split", "weight", "input_weight", "pool", "role", "copy",
                 "producer", "rkey", "ekey")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


@dataclass
class Seed:
    """An operator application on pool tensors only (a candidate first operator)."""

    tid: int
    inputs: tuple
    rkey: tuple
    ekey: tuple


@dataclass
class TaskResult:
    task: int
    fps: np.ndarray                     # int64 collapsed fingerprint per recorded graph
    enc: np.ndarray                     # int16 [n, 3*max_ops]: (template, in0, in1) per op, -1 padded
    counts: dict = field(default_factory=dict)


class Engine:
    """Per-process state for one Settings: pool, templates, seeds, value caches."""

    def __init__(self, settings: Settings):
        self.s = settings
        self.p = settings.prime
        self.templates: list[Template] = build_templates(settings)
        dist, coll = fpm.pool_values(settings)
        self.pool: list[Tensor] = []
        self.names: list[str] = []
        self.role_of: list[int] = []
        for r_idx, role in enumerate(settings.roles):
            for c in range(role.copies):
                j = len(self.pool)
                self.pool.append(Tensor(
                    dval=fpm.digest(dist[j]), cval=fpm.digest(coll[j]), shape=tuple(role.shape),
                    split=(None,) * len(role.shape), weight=role.kind == "weight",
                    input_weight=role.kind == "weight", pool=j, role=r_idx, copy=c, producer=-1,
                    rkey=(-1, r_idx), ekey=(-1, j)))
                self.names.append(f"{role.name}{c + 1}")
                self.role_of.append(r_idx)
        self.P = len(self.pool)
        self.pool_dist = {t.dval: dist[t.pool] for t in self.pool}
        self.pool_coll = {t.cval: coll[t.pool] for t in self.pool}
        self.seeds = self._seeds()
        self.seed_rkeys = [sd.rkey for sd in self.seeds]
        self.tasks = [k for k, sd in enumerate(self.seeds) if self._first_use_ok(sd.inputs, [0] * len(settings.roles))]
        self._partner_cache: dict = {}
        self.reset_cache()

    # ---- values ---------------------------------------------------------------------
    def reset_cache(self):
        self.memo: dict = {}
        self.dvals: dict = dict(self.pool_dist)
        self.cvals: dict = dict(self.pool_coll)

    def compute(self, t: Template, ins: list[Tensor], attrs: dict, keep: bool):
        """Output (dval, cval) pairs of applying t; arrays are kept if `keep` (non-leaf)."""
        key = (t.tid, tuple(x.dval for x in ins), attrs.get("sizes"))
        hit = self.memo.get(key)
        if hit is not None and (not keep or hit[1]):
            return hit[0]
        douts = t.mod([self.dvals[x.dval] for x in ins], attrs, self.p)
        couts = t.mod([self.cvals[x.cval] for x in ins], attrs, self.p)
        ids = tuple((fpm.digest(d), fpm.digest(c)) for d, c in zip(douts, couts))
        if keep:
            for (di, ci), d, c in zip(ids, douts, couts):
                self.dvals.setdefault(di, d)
                self.cvals.setdefault(ci, c)
        self.memo[key] = (ids, keep)
        return ids

    # ---- seeds and tasks ----------------------------------------------------------------
    def _seeds(self) -> list[Seed]:
        seeds = []
        pool = self.pool
        for t in self.templates:
            if t.arity == 0:
                combos = [()]
            elif t.arity == 1:
                combos = [(a,) for a in range(self.P)]
            else:
                combos = [(a, b) for a in range(self.P) for b in range(self.P)
                          if a != b and (not t.commutative or a < b)]
            for combo in combos:
                if not t.check(*[pool[a] for a in combo]):
                    continue
                rkey = (t.tid,) + sum((pool[a].rkey for a in combo), ())
                ekey = (t.tid,) + sum((pool[a].ekey for a in combo), ())
                seeds.append(Seed(t.tid, combo, rkey, ekey))
        seeds.sort(key=lambda sd: (sd.rkey, sd.ekey))
        return seeds

    def _first_use_ok(self, pool_inputs, used: list[int]) -> bool:
        m = list(used)
        for a in pool_inputs:
            r, c = self.role_of[a], self.pool[a].copy
            if c < m[r]:
                continue
            if c == m[r]:
                m[r] += 1
                continue
            return False
        return True

    def pool_partners(self, t: Template, slot: int, x: Tensor) -> list[int]:
        """Pool tensors that may fill the other slot of binary `t` when op output x is in `slot`."""
        key = (t.tid, slot, x.shape)
        hit = self._partner_cache.get(key)
        if hit is None:
            hit = []
            for q in self.pool:
                args = (x, q) if slot == 0 else (q, x)
                if t.commutative and slot == 0:
                    continue  # commutative: pool tensors always come first
                if t.check(*args):
                    hit.append(q.pool)
            self._partner_cache[key] = hit
        return hit


# One engine per thread: run_task clears the engine's value cache, so two tasks sharing one
# (a dask worker with several threads) lost each other's values (a KeyError, seen in CI).
_LOCAL = threading.local()


def engine_for(settings: Settings) -> Engine:
    engines = getattr(_LOCAL, "engines", None)
    if engines is None:
        engines = _LOCAL.engines = {}
    eng = engines.get(settings.digest)
    if eng is None:
        engines.clear()
        eng = engines[settings.digest] = Engine(settings)
    return eng


def task_ids(settings: Settings) -> list[int]:
    """The independent tasks: one per canonical first operator."""
    return list(range(len(engine_for(settings).tasks)))


class _Search:
    """Depth-first search below one first operator."""

    def __init__(self, eng: Engine, hook=None):
        self.e = eng
        self.K = eng.s.max_ops
        self.maxo = eng.s.max_outputs
        self.tensors: list[Tensor] = list(eng.pool)
        self.uses: list[int] = [0] * eng.P
        self.ops: list[tuple] = []        # (tid, input idxs, rkey, ekey, first out idx, n outs)
        self.used = [0] * len(eng.s.roles)
        self.values: set = {t.dval for t in eng.pool}
        self.ekeys: set = set()
        self.open = 0
        self.ties = 0
        self.seen_tied: set = set()
        self.fps: list[int] = []
        self.enc: list[tuple] = []
        self.counts = {"graphs": 0, "expanded": 0, "skipped_input_order": 0, "skipped_duplicate_tensor": 0,
                       "skipped_duplicate_operator": 0, "duplicates_removed": 0}

    # -- push / pop ----------------------------------------------------------------------
    def try_op(self, t: Template, idxs: tuple, dep: int, smax: list) -> None:
        e = self.e
        tens = self.tensors
        ins = [tens[i] for i in idxs]
        # input order: pool copies in order of first use
        m = self.used
        new_used = None
        for x in ins:
            if x.pool < 0:
                continue
            r, c = x.role, x.copy
            cur = m[r] if new_used is None else new_used[r]
            if c < cur:
                continue
            if c == cur:
                if new_used is None:
                    new_used = list(m)
                new_used[r] += 1
                continue
            self.counts["skipped_input_order"] += 1
            return
        rkey = (t.tid,) + sum((x.rkey for x in ins), ())
        tie = False
        bound = smax[dep]
        if bound is not None:
            if rkey < bound:
                return
            tie = rkey == bound
        ekey = (t.tid,) + sum((x.ekey for x in ins), ())
        if ekey in self.ekeys:
            self.counts["skipped_duplicate_operator"] += 1
            return
        outs_meta = t.infer(*ins)
        in_shapes = [x.shape for x in ins]
        attrs = node_attrs(t, in_shapes, [s for s, _ in outs_meta])
        depth = len(self.ops) + 1
        ids = e.compute(t, ins, attrs, keep=depth < self.K)
        dvs = [d for d, _ in ids]
        if any(d in self.values for d in dvs) or len(set(dvs)) != len(dvs):
            self.counts["skipped_duplicate_tensor"] += 1
            return
        # push
        first = len(tens)
        k_out = len(ids)
        multi = k_out > 1
        for k, ((dv, cv), (shape, split)) in enumerate(zip(ids, outs_meta)):
            tens.append(Tensor(dval=dv, cval=cv, shape=shape, split=split,
                               weight=all(x.weight for x in ins) if ins else True, input_weight=False,
                               pool=-1, role=-1, copy=-1, producer=depth,
                               rkey=rkey + (-2, k) if multi else rkey, ekey=ekey + (-2, k) if multi else ekey))
            self.uses.append(0)
            self.values.add(dv)
        opened = 0
        for i in set(idxs):
            if i >= e.P and self.uses[i] == 0:
                opened -= 1
            self.uses[i] += 1
        self.open += k_out + opened
        old_used = self.used
        if new_used is not None:
            self.used = new_used
        self.ops.append((t.tid, idxs, rkey, ekey, first, k_out))
        self.ekeys.add(ekey)
        self.ties += tie
        self.visit()
        # pop
        self.ties -= tie
        self.ekeys.discard(ekey)
        self.ops.pop()
        self.used = old_used
        self.open -= k_out + opened
        for i in set(idxs):
            self.uses[i] -= 1
        for _ in range(k_out):
            self.values.discard(tens.pop().dval)
            self.uses.pop()

    # -- one search node -------------------------------------------------------------------
    def visit(self) -> None:
        n = len(self.ops)
        if self.open <= self.maxo:
            self.record()
        if n >= self.K or self.open - (self.K - n) > self.maxo:
            return
        self.counts["expanded"] += 1
        e = self.e
        tens = self.tensors
        # smax[d]: largest role key among operators d+1..n (1-based); None when d == n
        smax: list = [None] * (n + 1)
        best = None
        for d in range(n - 1, -1, -1):
            rk = self.ops[d][2]
            best = rk if best is None or rk > best else best
            smax[d] = best
        # (a) operators on pool tensors only
        start = bisect_left(e.seed_rkeys, smax[0])
        for sd in e.seeds[start:]:
            self.try_op(e.templates[sd.tid], sd.inputs, 0, smax)
        # (b) operators that read at least one operator output
        op_out = list(range(e.P, len(tens)))
        for t in e.templates:
            if t.arity == 1:
                for i in op_out:
                    if t.check(tens[i]):
                        self.try_op(t, (i,), tens[i].producer, smax)
            elif t.arity == 2:
                for i in op_out:
                    x = tens[i]
                    dep = x.producer
                    for q in e.pool_partners(t, 1, x):  # pool tensor in slot 0
                        self.try_op(t, (q, i), dep, smax)
                    if not t.commutative:
                        for q in e.pool_partners(t, 0, x):  # pool tensor in slot 1
                            self.try_op(t, (i, q), dep, smax)
                    for j in op_out:
                        if j == i or (t.commutative and j < i):
                            continue
                        y = tens[j]
                        if t.check(x, y):
                            self.try_op(t, (i, j), max(dep, y.producer), smax)

    def record(self) -> None:
        outs = [t.cval for i, t in enumerate(self.tensors) if i >= self.e.P and self.uses[i] == 0]
        if not outs:
            return
        if self.ties:
            h = hash(frozenset(self.ekeys))
            if h in self.seen_tied:
                self.counts["duplicates_removed"] += 1
                return
            self.seen_tied.add(h)
        self.counts["graphs"] += 1
        self.fps.append(fpm.combine(outs))
        row = []
        for tid, idxs, *_ in self.ops:
            row.append(tid)
            row.extend(idxs)
            row.extend([-1] * (2 - len(idxs)))
        self.enc.append(tuple(row))


def run_task(settings: Settings, task: int) -> TaskResult:
    """Enumerate every graph whose canonical first operator is task number `task`."""
    eng = engine_for(settings)
    eng.reset_cache()
    sd = eng.seeds[eng.tasks[task]]
    search = _Search(eng)
    search.try_op(eng.templates[sd.tid], sd.inputs, 0, [None])
    width = 3 * settings.max_ops
    enc = np.full((len(search.enc), width), -1, dtype=np.int16)
    for r, row in enumerate(search.enc):
        enc[r, :len(row)] = row
    eng.reset_cache()
    return TaskResult(task, np.asarray(search.fps, dtype=np.int64), enc, search.counts)
