"""The `taso-relay` command (also `python -m taso_relay`).

    taso-relay optimize MODEL.onnx [--target JSON] [--cost analytic|measured|tuned] [--time-limit S]
                        [--report out.json] [--emit-relax out.py] [--emit-onnx out.onnx] [--draw out.svg]
    taso-relay compile MODEL.onnx -o model.so [--target JSON] [--tune-trials N] [--no-taso]
    taso-relay run model.so --inputs in.npz [--outputs out.npz] [--print-time]
    taso-relay tune MODEL.onnx --trials N --work-dir DIR
    taso-relay rules generate|stats|verify ...;  taso-relay cost show ...;  taso-relay demo

One module per subcommand under taso_relay/commands/. Errors print one line
(a traceback only with --verbose): status 2 for bad input (a missing or
malformed model, a dynamic shape, an unknown target), 1 for an internal failure.
--json prints machine-readable results on stdout.
"""
from __future__ import annotations

import argparse
import sys
import traceback
import warnings

from .commands import COMMANDS
from .commands.demo import EXAMPLE  # noqa: F401 - the bundled example (tests and docs refer to it here)
from .onnx_io.errors import InputError

EXIT_INPUT, EXIT_INTERNAL = 2, 1


class CliError(InputError):
    """A user-facing failure: printed as one line, status 2."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: `taso-relay: error: ...` and status 2."""

    def error(self, message):
        self.exit(EXIT_INPUT, f"taso-relay: error: {message} (see {self.prog} --help)\n")


GLOBAL_FLAGS = (
    (("-v", "--verbose"), "show tracebacks on errors"),
    (("--json",), "print machine-readable results (JSON) on stdout"),
    (("-q", "--quiet"), "no progress bars"),
)


def _add_global_flags(parser: argparse.ArgumentParser, top: bool) -> None:
    """The global flags on the top parser and, without overriding it, after every (nested) subcommand."""
    have = {s for a in parser._actions for s in a.option_strings}
    for flags, help_text in GLOBAL_FLAGS:
        flags = tuple(f for f in flags if f not in have)
        if flags:
            parser.add_argument(*flags, dest=flags[-1].lstrip("-").replace("-", "_"), action="store_true",
                                default=False if top else argparse.SUPPRESS,
                                help=help_text if top else argparse.SUPPRESS)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                _add_global_flags(child, top=False)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="taso-relay", description="TASO-style graph superoptimizer for TVM Relax: optimize, "
                                                   "compile, tune and run ONNX models.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    _add_global_flags(parser, top=True)
    return parser


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """Warnings as one line each (the full form with --verbose)."""
    print(f"taso-relay: warning: {_one_line(message)}", file=sys.stderr)


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, already printed as one line)
        return int(exc.code or 0)
    handler = getattr(args, "run", None) or getattr(args, "func", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_INPUT
    with warnings.catch_warnings():
        if not args.verbose:
            warnings.showwarning = _show_warning
        warnings.filterwarnings("once")
        try:
            return int(handler(args) or 0)
        except KeyboardInterrupt:
            print("taso-relay: interrupted", file=sys.stderr)
            return 130
        except Exception as exc:  # one line unless asked for more
            status = EXIT_INPUT if isinstance(exc, InputError) else EXIT_INTERNAL
            if args.verbose:
                traceback.print_exc()
                if getattr(exc, "detail", None):
                    print(exc.detail.rstrip(), file=sys.stderr)
            kind = getattr(exc, "kind", None) or ("error" if status == EXIT_INPUT else "internal error")
            message = _one_line(exc)
            if status == EXIT_INTERNAL and not getattr(exc, "kind", None):
                message = f"{type(exc).__name__}: {message}"
            print(f"taso-relay: {kind}: {message}", file=sys.stderr)
            if getattr(args, "json", False):
                import json
                print(json.dumps({"ok": False, "exit": status, "error": message}))
            return status
