"""Rule generation after TASO: enumerate small graphs, fingerprint, pair, prune, generalise.

Entry points: `generate(settings, ...)` in run.py, and the `rules generate` /
`rules stats` commands (cli.py). Imports no tvm.
"""
from .config import ALL_OPS, Settings

__all__ = ["ALL_OPS", "Settings"]
