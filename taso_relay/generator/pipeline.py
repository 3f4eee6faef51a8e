"""Stage two, per bucket: candidates -> exact -> pruning -> float re-check -> rules.

Buckets are independent (renaming-equivalent pairs share a bucket), so they
are processed in chunks on the same executor as the enumeration, and merged
in bucket order: the first concrete pair that yields a rule names it.
"""
from __future__ import annotations

import hashlib
from collections import Counter

from ..subst.rule_io import rule_to_dict
from . import prune
from .config import Settings
from .enumerate import engine_for
from .generalize import generalize, with_id
from .pairing import Evaluator, describe, float_check, process_bucket

# Stage names in the order they are applied, as they appear in reports.
PAIR_STAGES = ("candidates", "exact", "renaming", "common_subgraph", "common_final_op",
               "independent_parts", "float_check")


def process_chunk(settings: Settings, chunk: int, buckets: list) -> dict:
    eng = engine_for(settings)
    ev = Evaluator(eng)
    stats: Counter = Counter()
    records = []
    for bucket in buckets:
        pairs = process_bucket(eng, bucket, stats, ev)
        pairs = prune.dedup_renamings(eng, pairs)
        stats["renaming"] += len(pairs)
        pairs = [p for p in pairs if not prune.common_subgraph(eng, p)]
        stats["common_subgraph"] += len(pairs)
        pairs = [p for p in pairs if not prune.common_final_op(eng, p)]
        stats["common_final_op"] += len(pairs)
        pairs = [p for p in pairs if not prune.independent_parts(eng, p)]
        stats["independent_parts"] += len(pairs)
        for p in pairs:
            if not float_check(eng, p, settings.float_seeds):
                continue
            stats["float_check"] += 1
            found = (describe(eng, p.g1, [a for a, _ in p.mapping]) + "  ==  "
                     + describe(eng, p.g2, [b for _, b in p.mapping]))
            directed = []
            for reverse in (False, True):
                rule, level = generalize(eng, p, reverse, seed=settings.seed)
                if rule is None:
                    stats["not_generalised"] += 1
                    directed.append(None)
                else:
                    stats[f"level:{level}"] += 1
                    directed.append((with_id(rule, {}), level))
            ids = sorted(r.id for r, _ in filter(None, directed))
            eq = "e-" + hashlib.blake2b("|".join(ids).encode(), digest_size=4).hexdigest() if ids else None
            out = []
            for item in directed:
                if item is None:
                    out.append(None)
                    continue
                rule, level = item
                prov = {"generator": "taso_relay.generator", "max_ops": settings.max_ops,
                        "settings": settings.digest, "generalisation": level, "equivalence": eq,
                        "found_as": found}
                out.append(rule_to_dict(with_id(rule, prov)))
            records.append(out)
    return {"chunk": chunk, "stats": dict(stats), "records": records}
