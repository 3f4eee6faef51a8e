"""Symbolic sizes for generalisation: dimensions as terms, equalities by union-find.

Every dimension of every tensor in a rule is a term: an input dimension
(`dim(x1, 2)`), a literal, a source attribute variable component
(`?s1[0]`), an unnamed target attribute (free), or a composite: the sum of
two sizes (concat) or a strided output size. Operators' shape rules add
equalities; congruence closure makes equal composites of equal arguments one
class. Each class renders as an expression over the rule's inputs and
variables, which is what attribute templates and constraints are written in.
"""
from __future__ import annotations

import random
from dataclasses import dataclass


class Inconsistent(ValueError):
    """Two terms with different example values were asked to be equal."""


@dataclass(frozen=True)
class Term:
    kind: str          # in | lit | var | free | add | cout
    a: object = None   # in: (input order, name, axis); lit: value; var: (var name, index); add/cout: term id
    b: object = None   # add/cout: term id
    value: int = 0     # example value
    tag: str = ""      # sampling category: kernel | stride | ""


_PREF = {"in": 0, "lit": 1, "var": 2, "add": 3, "cout": 3, "free": 9}


class Sizes:
    def __init__(self):
        self.terms: list[Term] = []
        self.parent: list[int] = []
        self.index: dict = {}

    def copy(self) -> "Sizes":
        s = Sizes()
        s.terms, s.parent, s.index = list(self.terms), list(self.parent), dict(self.index)
        return s

    # ---- terms ------------------------------------------------------------------------------
    def _term(self, t: Term, key=None) -> int:
        key = key if key is not None else (t.kind, t.a, t.b)
        hit = self.index.get(key)
        if hit is not None:
            return hit
        self.terms.append(t)
        self.parent.append(len(self.parent))
        self.index[key] = len(self.terms) - 1
        return len(self.terms) - 1

    def dim(self, order: int, name: str, axis: int, value: int, tag: str = "") -> int:
        return self._term(Term("in", (order, name, axis), None, value, tag))

    def lit(self, value: int) -> int:
        return self._term(Term("lit", int(value), None, int(value)))

    def var(self, name: str, index: int, value: int, tag: str = "") -> int:
        return self._term(Term("var", (name, index), None, value, tag))

    def free(self, label: str, value: int, tag: str = "") -> int:
        return self._term(Term("free", label, None, value, tag))

    def add(self, a: int, b: int) -> int:
        return self._term(Term("add", a, b, self.terms[a].value + self.terms[b].value))

    def cout(self, h: int, s: int) -> int:
        return self._term(Term("cout", h, s, (self.terms[h].value - 1) // self.terms[s].value + 1))

    # ---- classes -------------------------------------------------------------------------------
    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self.terms[ra].value != self.terms[rb].value:
            raise Inconsistent(f"{self.terms[ra]} != {self.terms[rb]}")
        self.parent[max(ra, rb)] = min(ra, rb)

    def close(self) -> None:
        """Congruence closure: composites of equal arguments are equal."""
        changed = True
        while changed:
            changed = False
            seen: dict = {}
            for i, t in enumerate(self.terms):
                if t.kind in ("add", "cout"):
                    key = (t.kind, self.find(t.a), self.find(t.b))
                    j = seen.setdefault(key, i)
                    if self.find(j) != self.find(i):
                        self.union(i, j)
                        changed = True

    def members(self, i: int) -> list[int]:
        r = self.find(i)
        return [j for j in range(len(self.terms)) if self.find(j) == r]

    def classes(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for j in range(len(self.terms)):
            out.setdefault(self.find(j), []).append(j)
        return out

    # ---- rendering ----------------------------------------------------------------------------
    def _rank(self, j: int):
        t = self.terms[j]
        return (_PREF[t.kind], t.a if t.kind in ("in", "var") else 0, j)

    def rep(self, i: int, allow=("in", "lit", "var", "add", "cout")) -> int | None:
        best = None
        for j in sorted(self.members(i), key=self._rank):
            if self.terms[j].kind in allow and self.render_term(j, allow, _depth=1) is not None:
                best = j
                break
        return best

    def render(self, i: int, allow=("in", "lit", "var", "add", "cout")) -> str | None:
        """An expression for term i's class, or None if it has no expressible member."""
        j = self.rep(i, allow)
        return None if j is None else self.render_term(j, allow)

    def render_term(self, j: int, allow, _depth: int = 0) -> str | None:
        if _depth > 12:
            return None
        t = self.terms[j]
        if t.kind == "in":
            return f"dim({t.a[1]}, {t.a[2]})"
        if t.kind == "lit":
            return str(t.a)
        if t.kind == "var":
            return f"?{t.a[0]}[{t.a[1]}]"
        if t.kind == "free" or t.kind not in allow:
            return None
        a = self._render_arg(t.a, allow, _depth)
        b = self._render_arg(t.b, allow, _depth)
        if a is None or b is None:
            return None
        return f"{a} + {b}" if t.kind == "add" else f"({a} - 1) // {b} + 1"  # args come parenthesised

    def render_own(self, j: int) -> str | None:
        """Term j itself, never another member of its class (composites through their own arguments)."""
        t = self.terms[j]
        if t.kind in ("in", "lit", "var"):
            return self.render_term(j, ())
        if t.kind not in ("add", "cout"):
            return None
        a, b = self.render_own(t.a), self.render_own(t.b)
        if a is None or b is None:
            return None
        a, b = (f"({x})" if self.terms[k].kind in ("add", "cout") else x for x, k in ((a, t.a), (b, t.b)))
        return f"{a} + {b}" if t.kind == "add" else f"({a} - 1) // {b} + 1"

    def _render_arg(self, i: int, allow, depth: int) -> str | None:
        for j in sorted(self.members(i), key=self._rank):
            if self.terms[j].kind not in allow:
                continue
            text = self.render_term(j, allow, depth + 1)
            if text is not None:
                return f"({text})" if self.terms[j].kind in ("add", "cout") else text
        return None

    # ---- sampling ------------------------------------------------------------------------------
    def sample(self, rng: random.Random, parity: str = "odd") -> dict[int, int] | None:
        """A value for every class, consistent with composites; None if inconsistent."""
        classes = self.classes()
        value: dict[int, int] = {}
        used: set = set()
        pending = set(classes)
        while pending:
            progress = False
            for r in sorted(pending):
                mem = classes[r]
                lits = [self.terms[j].value for j in mem if self.terms[j].kind == "lit"]
                comps = [j for j in mem if self.terms[j].kind in ("add", "cout")]
                ready = [j for j in comps if self.find(self.terms[j].a) in value and self.find(self.terms[j].b) in value]
                if lits:
                    value[r] = lits[0]
                elif ready:
                    t = self.terms[ready[0]]
                    a, b = value[self.find(t.a)], value[self.find(t.b)]
                    value[r] = a + b if t.kind == "add" else (a - 1) // b + 1
                elif not comps:
                    tags = {self.terms[j].tag for j in mem}
                    example = self.terms[r].value
                    if "stride" in tags:
                        v = rng.choice((1, 2))
                    elif "kernel" in tags:  # away from the example size, so a size-specific rule fails
                        pool = [k for k in ((1, 3, 5) if parity == "odd" else (2, 4)) if k != example]
                        v = rng.choice(pool)
                    else:
                        choices = [c for c in range(2, 8) if c not in used and c != example] or list(range(2, 8))
                        v = rng.choice(choices)
                        used.add(v)
                    value[r] = v
                else:
                    continue
                pending.discard(r)
                progress = True
                break
            if not progress:  # composites waiting on each other: sample one freely
                r = min(pending)
                value[r] = rng.randint(2, 9)
                pending.discard(r)
        for r, mem in classes.items():
            for j in mem:
                t = self.terms[j]
                if t.kind == "add" and value[self.find(t.a)] + value[self.find(t.b)] != value[r]:
                    return None
                if t.kind == "cout":
                    h, s = value[self.find(t.a)], value[self.find(t.b)]
                    if s <= 0 or (h - 1) // s + 1 != value[r]:
                        return None
        return value
