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
from pathlib import Path
from typing import Any, Iterable

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


def load_rules(path: str | os.PathLike, *, status: str | None = None) -> list[Rule]:
    """Load a rule file; `status="PROVED"` keeps only proven rules."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise RuleFileError(f"{path}: no such rule file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RuleFileError(f"{path}: not a readable JSON rule file ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rules"), list):
        raise RuleFileError(f"{path}: expected an object with a 'rules' list")
    if doc.get("format", FORMAT) != FORMAT:
        raise RuleFileError(f"{path}: rule format {doc.get('format')} is not supported (expected {FORMAT})")
    rules = []
    for k, item in enumerate(doc["rules"]):
        try:
            rules.append(rule_from_dict(item))
        except (KeyError, TypeError, ValueError) as exc:
            rid = item.get("id", f"#{k}") if isinstance(item, dict) else f"#{k}"
            raise RuleFileError(f"{path}: rule {rid} is malformed: {exc}") from None
    if status is not None:
        rules = [r for r in rules if r.status == status]
    return rules


def save_rules(path: str | os.PathLike, rules: Iterable[Rule], meta: dict[str, Any] | None = None) -> None:
    """Write atomically (temp file + rename) so an interrupted write loses nothing."""
    path = Path(path)
    doc = {"format": FORMAT, **(_jsonable(meta or {})), "rules": [rule_to_dict(r) for r in rules]}
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
