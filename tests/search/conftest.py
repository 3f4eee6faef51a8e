"""The search tests share helpers with the matcher tests (tests/subst/rewrite_helpers.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "subst"))
