"""The two kinds of failure the command line tells apart."""
from __future__ import annotations


class InputError(Exception):
    """Bad input from the user (a missing or malformed file, a dynamic shape, an unknown target...).

    The command prints the message as one line and exits with status 2.
    """
