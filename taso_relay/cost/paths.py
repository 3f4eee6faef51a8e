"""Where the cost model keeps its files: the user cache directory.

$TASO_RELAY_CACHE_DIR if set, else $XDG_CACHE_HOME/taso_relay, else
~/.cache/taso_relay (the platformdirs convention on Linux; macOS and Windows
users can point the variable anywhere).
"""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    explicit = os.environ.get("TASO_RELAY_CACHE_DIR")
    if explicit:
        base = Path(explicit).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "taso_relay"
    base.mkdir(parents=True, exist_ok=True)
    return base


def default_db_path() -> Path:
    return cache_dir() / "costs.sqlite"


def default_peaks_path() -> Path:
    return cache_dir() / "peaks.json"


def default_tuning_dir() -> Path:
    return cache_dir() / "tuning"
