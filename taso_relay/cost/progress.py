"""Progress bars for long measurement and tuning: tqdm on a terminal, silent elsewhere."""
from __future__ import annotations

import os
import sys
from typing import Iterable, TypeVar

T = TypeVar("T")


def default_enabled() -> bool:
    """On when stderr is a terminal, off in tests and pipes; TASO_RELAY_PROGRESS=0/1 forces it."""
    forced = os.environ.get("TASO_RELAY_PROGRESS")
    if forced is not None:
        return forced not in ("0", "", "false", "no")
    if "PYTEST_CURRENT_TEST" in os.environ:
        return False
    return sys.stderr.isatty()


def progress(items: Iterable[T], total: int | None = None, desc: str = "", enabled: bool | None = None,
             unit: str = "kernel"):
    """Wrap `items` in a tqdm bar when enabled (and tqdm is installed); else return them as they are."""
    enabled = default_enabled() if enabled is None else enabled
    if not enabled:
        return _Quiet(items)
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        return _Quiet(items)
    return tqdm(items, total=total, desc=desc, unit=unit, leave=False, dynamic_ncols=True)


class _Quiet:
    """The no-bar stand-in: iterates and accepts set_postfix_str."""

    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items)

    def set_postfix_str(self, *_a, **_k):
        pass

    def close(self):
        pass
