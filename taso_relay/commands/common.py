"""What the subcommands share: model and target arguments, step progress, JSON output."""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import warnings
from pathlib import Path

from ..onnx_io.errors import InputError
from ..search.report import json_ready

COST_MODELS = ("analytic", "measured", "tuned")


# ---- arguments -------------------------------------------------------------------------------
def description(doc: str) -> str:
    """A subcommand's description from its module docstring: the text after `taso-relay ...: `."""
    text = doc.strip().splitlines()[0].split(": ", 1)[-1]
    return text[:1].upper() + text[1:]


def seconds(text: str) -> float:
    """A number of seconds >= 0 (argparse type: a bad one exits 2 with the usage line)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text} s: must be 0 or more")
    return value


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", type=Path, metavar="MODEL.onnx", help="the ONNX model")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME:D1,D2,...",
                   help="pin the shape of an input with dynamic dimensions (repeatable), e.g. x:1,3,224,224")
    add_target_argument(p)


def add_target_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default=None, metavar="JSON",
                   help='TVM target: a JSON dict such as \'{"kind": "llvm", "num-cores": 2}\' or a kind name '
                        '("llvm", "cuda"); default: the host CPU')


def add_taso_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cost", choices=COST_MODELS, default=None,
                   help="cost model of the search: analytic (no compilation), measured (TVM default lowering, "
                        "timed on the target) or tuned (MetaSchedule, --max-trials-per-task per kernel, default 64; "
                        "compile then builds from that database); default: the pass's own choice")
    p.add_argument("--time-limit", type=seconds, default=None, metavar="S",
                   help="seconds the search may take per function (default: the pass's own, 8); it also stops "
                        "after 100 expansions in a row without a cheaper graph (TASOPass(patience=...))")
    p.add_argument("--rules", action="append", default=None, metavar="FILE",
                   help="rule file whose PROVED rules the search uses instead of the shipped ones (repeatable; "
                        "'shipped' names the shipped files, e.g. --rules shipped --rules mine.json); prove a "
                        "file's rules first with `taso-relay rules verify FILE`")
    p.add_argument("--layout", choices=("auto", "nhwc", "none"), default=None,
                   help="also offer the search's result with every conv in NHWC and the transposes between them "
                        "cancelled (proved rules, rules/layout/), kept where the cost model prices it cheaper "
                        "(default auto: nhwc with --cost tuned, whose MetaSchedule kernels run NHWC convs faster "
                        "on x86; none otherwise)")
    p.add_argument("--verify-speed", action=argparse.BooleanOptionalAction, default=None,
                   help="time the original and the rewritten model on the target (compiled with the cost model's "
                        "lowering) and keep the rewrite only if it is measured faster; costs a build of each and "
                        "about 10 s of timing (at least 3 runs of each), only when the search changed the graph "
                        "(default: on for TVM's default lowering and --cost tuned, on a target this machine runs)")


# ---- targets -----------------------------------------------------------------------------------
def parse_target(spec: str | None):
    """A tvm Target from a JSON dict string or a kind name; InputError with one line otherwise."""
    import tvm

    if spec is None or not str(spec).strip():
        from ..bridge.execute import default_target
        return default_target()
    text = str(spec).strip()
    if text.startswith("{"):
        try:
            config = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"--target is not valid JSON: {exc.msg} at column {exc.colno}") from None
        if not isinstance(config, dict) or "kind" not in config:
            raise InputError('--target JSON needs a "kind", e.g. {"kind": "llvm"}')
    else:
        if " " in text or text.startswith("-"):
            raise InputError(f"unknown target '{text}': give a kind name (llvm, cuda, ...) or a JSON dict "
                             '(TVM no longer reads "llvm -mcpu=..." strings)')
        config = {"kind": text}
    kinds = set(tvm.target.Target.list_kinds())
    if config["kind"] not in kinds:
        shown = ", ".join(k for k in ("llvm", "cuda", "rocm", "vulkan", "metal", "opencl", "c") if k in kinds)
        raise InputError(f"unknown target kind '{config['kind']}' (known kinds include {shown})")
    try:
        return tvm.target.Target(config)
    except Exception as exc:  # noqa: BLE001 - TVM's message, one line
        raise InputError(f"invalid target {json.dumps(config)}: {first_line(exc)}") from None


def tuning_target(target):
    """The target MetaSchedule tunes and the library is built for: a CPU target gets num-cores (this
    machine's usable cores) where it names none, as MetaSchedule requires."""
    from ..cost.lowering import with_cores

    return with_cores(target)


def target_json(target) -> dict:
    """A target as its JSON dict (what --target accepts), for reports and the library's sidecar file."""
    try:
        export = target.export()
        return {k: _plain(v) for k, v in dict(export).items()}
    except Exception:  # noqa: BLE001
        return {"kind": target.kind.name}


def _plain(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in dict(value).items()}
    if isinstance(value, (list, tuple)) or hasattr(value, "__len__") and not isinstance(value, str):
        try:
            return [_plain(v) for v in value]
        except TypeError:
            pass
    return str(value)


def target_summary(target) -> str:
    info = target_json(target)
    extras = ", ".join(f"{k}={v}" for k, v in info.items()
                       if k in ("mcpu", "num-cores", "arch", "mtriple") and v not in (None, "", -1))
    return info.get("kind", target.kind.name) + (f" ({extras})" if extras else "")


# ---- models --------------------------------------------------------------------------------------
def prepare_model(args, steps=None):
    """Load, check, fold and import the model named by args (InputError on bad input)."""
    from ..onnx_io import parse_input_shapes, prepare

    shapes = parse_input_shapes(getattr(args, "input_shape", None))
    if steps:
        steps.step(f"importing {Path(args.model).name}")
    with quiet_output():
        return prepare(args.model, shapes)


def make_pass(args, target):
    """TASOPass with the command's --cost and --time-limit (given as names; the pass decides what they mean)."""
    from ..passes import TASOPass

    kwargs = {"target": target}
    if getattr(args, "cost", None) is not None:
        kwargs["cost"] = args.cost
        if args.cost == "tuned" and getattr(args, "work_dir", None) is not None:
            # the search's judge tunes into the database the final build reads: the schedules it
            # timed are the ones the library gets, and no kernel is tuned twice
            kwargs["cost"] = judge_cost(args, target)
    if getattr(args, "time_limit", None) is not None:
        kwargs["time_limit"] = float(args.time_limit)
    if getattr(args, "rules", None):
        kwargs["rules"] = getattr(args, "rule_index", None) or rule_index(args.rules)
    if getattr(args, "layout", None) is not None:
        kwargs["layout"] = None if args.layout == "none" else args.layout
    if getattr(args, "verify_speed", None) is not None:  # unset: the pass decides (TASOOptimizer.verifies_speed)
        kwargs["verify_speed"] = bool(args.verify_speed)
    if getattr(args, "keep_build", False):  # `compile`: the speed check's build of the result is the library's
        kwargs["keep_build"] = True
    if getattr(args, "trials", 0) or getattr(args, "work_dir", None) is not None:
        kwargs["lowering"] = "tuning"  # `compile --tune-trials`: the kernels are built by MetaSchedule's pipeline
    return TASOPass(**kwargs)


def check_rules(args) -> None:
    """Read --rules before the model: a bad rule file is a one-line error before any work."""
    if getattr(args, "rules", None):
        args.rule_index = rule_index(args.rules)


def rule_index(files):
    """The rules of --rules, read before the search starts; a file that is not a rule file (or has no
    proven rule) is the command's error, not the search's."""
    from ..passes import resolve_rules
    from ..subst import RuleFileError

    try:
        index = resolve_rules(files)
    except RuleFileError as exc:
        raise InputError(str(exc)) from None
    if not index.matchers:
        raise InputError(f"no rule with a current proof in {', '.join(map(str, files))}: prove them with "
                         "`taso-relay rules verify FILE`")
    return index


def judge_cost(args, target):
    """The command's tuned judge (TunedCost on --work-dir), made once: the pass and the build's
    last tuning share it, and with it the database it has read."""
    judge = getattr(args, "judge_cost", None)
    if judge is None:
        from ..cost import TunedCost
        judge = args.judge_cost = TunedCost(target, trials=judge_trials(args), work_dir=args.work_dir)
    return judge


def judge_trials(args) -> int:
    """Trials per kernel for the tuned judge: --max-trials-per-task, else 64."""
    return getattr(args, "max_trials_per_task", None) or 64


def run_pass(taso, mod):
    """Apply the pass; its warnings are returned (the report lists them), not printed."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_output():
            optimized = taso(mod)
    return optimized, [str(w.message) for w in caught]


def describe_tensors(tensors) -> str:
    return ", ".join(f"{t.name} {t.dtype}{list(t.shape)}" for t in tensors)


# ---- output ---------------------------------------------------------------------------------------
def first_line(exc: BaseException) -> str:
    """The exception's first line; for one with no message (a bare assert in TVM's topi), the name and the
    source line that raised it, where it is."""
    text = str(exc).strip()
    if text:
        return text.splitlines()[0]
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    if not frames or not frames[-1].line:
        return type(exc).__name__
    last = frames[-1]
    where = "/".join(Path(last.filename).parts[-3:])
    return f"{type(exc).__name__} in {where}, {last.name}: {last.line.strip()}"


@contextlib.contextmanager
def quiet_output():
    """Swallow what TVM prints on stdout from Python (e.g. its importer's 'Error converting operator')."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        yield buffer


def print_json(data) -> None:
    print(_dumps(data))


def _dumps(data) -> str:
    """Strict JSON (no Infinity/NaN, which JSON readers refuse): values are made plain first, then non-finite
    floats become null."""
    plain = json.loads(json.dumps(data, default=_json_default))
    return json.dumps(json_ready(plain), indent=2, allow_nan=False)


def _json_default(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, Path):
        return str(value)
    return str(value)


def write_json(path, data) -> None:
    Path(path).write_text(_dumps(data) + "\n")


def output_path(path) -> Path:
    """A path to write: its folder must exist (a clear error rather than a traceback later)."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise InputError(f"cannot write {path}: no such directory {path.parent}")
    if path.is_dir():
        raise InputError(f"cannot write {path}: it is a directory")
    return path


class Steps:
    """A progress bar over the named steps of a command (on stderr, only when it is a terminal)."""

    def __init__(self, total: int, enabled: bool = True, desc: str = "taso-relay"):
        self.bar = None
        self.desc = desc
        if enabled and sys.stderr.isatty():
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=total, desc=desc, unit="step", leave=False, file=sys.stderr,
                                bar_format="{desc}: {n_fmt}/{total_fmt} {postfix} [{elapsed}]")
            except ImportError:
                self.bar = None
        self.started = False

    def step(self, what: str) -> None:
        if self.bar is None:
            return
        if self.started:
            self.bar.update(1)
        self.started = True
        self.bar.set_postfix_str(what)

    def close(self) -> None:
        if self.bar is not None:
            if self.started:
                self.bar.update(1)
            self.bar.close()
            self.bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def steps_for(args, total: int) -> Steps:
    return Steps(total, enabled=not getattr(args, "json", False) and not getattr(args, "quiet", False))
