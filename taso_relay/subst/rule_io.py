"""Reading and writing rule files (rules/*.json).

A rule file is a JSON object: {"format": 1, "generator": {...}, "rules": [...]}.
Each rule carries its one-line text form beside the structured form, so a
person can read the file and a diff shows what changed. A corrupt file is an
error that names the file and the offending rule, never a traceback deep in
the matcher.
"""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Sequence

from ..graph.types import GraphError
from .rule import PatternInput, PatternNode, Rule

FORMAT = 1


class RuleFileError(ValueError):
    """A rule file cannot be read; the message names the file and the reason."""


def rule_to_dict(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "text": rule.text,
        "inputs": [{"name": i.name, "kind": i.kind} for i in rule.inputs],
        "source": [_node_to_dict(n) for n in rule.source],
        "target": [_node_to_dict(n) for n in rule.target],
        "outputs": [list(pair) for pair in rule.outputs],
        "constraints": list(rule.constraints),
        "example": _jsonable(rule.example),
        "provenance": _jsonable(rule.provenance),
        "verification": _jsonable(rule.verification),
        "numerics": _jsonable(rule.numerics),
    }


def _node_to_dict(node: PatternNode) -> dict[str, Any]:
    return {"id": node.id, "op": node.op, "inputs": list(node.inputs), "attrs": _jsonable(dict(node.attrs))}


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _tuplify(value):
    if isinstance(value, list):
        return tuple(_tuplify(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuplify(v) for k, v in value.items()}
    return value


def rule_from_dict(data: dict[str, Any]) -> Rule:
    return Rule(
        id=str(data["id"]),
        inputs=tuple(PatternInput(i["name"], i.get("kind", "any")) for i in data["inputs"]),
        source=tuple(_node_from_dict(n) for n in data["source"]),
        target=tuple(_node_from_dict(n) for n in data["target"]),
        outputs=tuple((str(a), str(b)) for a, b in data["outputs"]),
        constraints=tuple(data.get("constraints", ())),
        example=_tuplify(data.get("example", {})),
        provenance=data.get("provenance", {}),
        verification=data.get("verification", {}),
        numerics=data.get("numerics", {}),
    )


def _node_from_dict(data: dict[str, Any]) -> PatternNode:
    return PatternNode(str(data["id"]), str(data["op"]), tuple(str(r) for r in data["inputs"]),
                       _tuplify(dict(data.get("attrs", {}))))


class Unreadable(NamedTuple):
    """A rule file entry this version cannot use, kept verbatim with its place in the file."""

    position: int
    entry: Any
    why: str


def unreadable_reasons(unreadable: Sequence[Unreadable], shown: int = 3) -> str:
    """The first few reasons, e.g. "rule x: source node 'a' uses operator 'foo', ...; and 4 more"."""
    more = f"; and {len(unreadable) - shown} more" if len(unreadable) > shown else ""
    return "; ".join(u.why for u in unreadable[:shown]) + more


@dataclass
class RuleFile:
    """A rule file as read: the rules this version can use, and the entries it cannot (kept verbatim,
    by position, so that a command writing the file back loses none of them)."""

    path: Path
    rules: list[Rule]
    unreadable: list[Unreadable] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> str:
        """One line naming the unreadable entries, e.g. for a reference rule set with other operators."""
        return (f"{self.path}: {len(self.unreadable)} of {len(self.rules) + len(self.unreadable)} rules cannot be "
                f"used here and are skipped ({unreadable_reasons(self.unreadable)})")


def read_rule_file(path: str | os.PathLike) -> RuleFile:
    """Read a rule file; rules this version cannot use (an operator or attribute the graph form lacks,
    a malformed entry) are set aside with the reason. A file that is not a rule file is an error."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise RuleFileError(f"{path}: no such rule file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RuleFileError(f"{path}: not a readable JSON rule file ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rules"), list):
        raise RuleFileError(f"{path}: expected an object with a 'rules' list")
    if "rule_file" in doc:  # a verification report lists verdicts under 'rules' (taken for rules, it was rewritten)
        raise RuleFileError(f"{path}: a verification report (of {doc['rule_file']}), not a rule file")
    if doc.get("format", FORMAT) != FORMAT:
        raise RuleFileError(f"{path}: rule format {doc.get('format')} is not supported (expected {FORMAT})")
    read = RuleFile(path, [], meta={k: v for k, v in doc.items() if k not in ("format", "rules")})
    for k, item in enumerate(doc["rules"]):
        try:
            read.rules.append(rule_from_dict(item))
        except (KeyError, TypeError, ValueError, AttributeError, GraphError) as exc:
            rid = item.get("id", f"#{k}") if isinstance(item, dict) else f"#{k}"
            why = str(exc) if str(exc).startswith(f"rule {rid}") else f"rule {rid}: {exc}"
            read.unreadable.append(Unreadable(k, item, why))
    return read


def load_rules(path: str | os.PathLike, *, status: str | None = None, strict: bool = True) -> list[Rule]:
    """Load a rule file; `status="PROVED"` keeps only proven rules.

    strict: a rule this version cannot use is an error naming it; otherwise it is skipped with a
    warning (a reference rule set may use operators the graph form does not have)."""
    read = read_rule_file(path)
    if read.unreadable:
        if strict:
            raise RuleFileError(f"{read.path}: {read.unreadable[0].why}")
        warnings.warn(read.summary(), stacklevel=2)
    rules = read.rules
    if status is not None:
        rules = [r for r in rules if r.status == status]
    return rules


def save_rules(path: str | os.PathLike, rules: Iterable[Rule | dict], meta: dict[str, Any] | None = None) -> None:
    """Write atomically (temp file + rename) so an interrupted write loses nothing. Entries that are
    not Rules (unreadable ones, see RuleFile) are written as they were read."""
    path = Path(path)
    doc = {"format": FORMAT, **(_jsonable(meta or {})),
           "rules": [rule_to_dict(r) if isinstance(r, Rule) else r for r in rules]}
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    os.replace(tmp, path)


def shipped_rules_dir() -> Path:
    """The rule files shipped with the package (works from a checkout and when installed)."""
    here = Path(__file__).resolve().parent.parent / "rules_data"
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[2] / "rules"


def default_rules(status: str | None = "PROVED") -> list[Rule]:
    """All shipped rule files, proven rules only by default."""
    rules: list[Rule] = []
    directory = shipped_rules_dir()
    for path in sorted(directory.glob("*.json")):
        if path.name.endswith(".report.json"):
            continue
        rules.extend(load_rules(path, status=status))
    return rules
