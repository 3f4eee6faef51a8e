"""Generator settings and the input pool (TASO's small tensors).

Everything the enumeration produces is a function of `Settings` alone, so two
runs with equal settings (locally, resumed, or on a Dask cluster) produce the
same rules. `Settings.digest` names the checkpoint directory.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

from ..graph.ops.modular import DEFAULT_PRIME

# Bump when a change to the generator changes what a task computes (invalidates checkpoints).
GENERATOR_VERSION = 2

# TASO's operator set, as template families (see templates.py).
ALL_OPS = (
    "matmul", "add", "mul", "smul", "relu", "transpose", "conv", "conv_relu", "concat", "split",
    "enlarge", "max_pool", "avg_pool", "const_iconv", "const_imat", "const_ones", "const_avgk",
)


@dataclass(frozen=True)
class Role:
    """One kind of pool tensor: `copies` interchangeable tensors of one shape."""

    name: str          # prefix of the tensor names: x1, x2, ...
    shape: tuple
    kind: str          # "weight" (foldable) or "any" (activation)
    copies: int


# TASO's pool (generator.cc), with the kernel shapes the issue asks for. N=2, C=4, H=5, W=6:
# roles that must chain (C in and out of convs and matmuls) share sizes, the others differ.
DEFAULT_ROLES = (
    Role("x", (2, 4), "any", 3),          # 2-D activations
    Role("w", (4, 4), "weight", 3),       # 2-D weights
    Role("i", (2, 4, 5, 6), "any", 3),    # 4-D activations (NCHW)
    Role("k", (4, 4, 3, 3), "weight", 3),  # 3x3 conv weights
    Role("p", (4, 4, 1, 1), "weight", 3),  # 1x1 conv weights
    Role("r", (4, 4, 1, 3), "weight", 3),  # 1x3 conv weights
    Role("d", (4, 1, 3, 3), "weight", 2),  # depthwise 3x3 weights
    Role("c", (), "weight", 1),           # scalar
)


@dataclass(frozen=True)
class Settings:
    max_ops: int = 3
    max_outputs: int = 2
    ops: tuple = ALL_OPS
    roles: tuple = DEFAULT_ROLES
    seed: int = 2019
    prime: int = DEFAULT_PRIME
    concat_axes_4d: tuple = (0, 1, 2, 3)
    conv_kernels: tuple = ((3, 3), (1, 1), (1, 3))
    enlarge_to: tuple = (3, 3)
    pool_kernel: tuple = (3, 3)
    float_seeds: tuple = (11, 12)  # fresh float64 inputs for the re-check
    version: int = GENERATOR_VERSION
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        unknown = set(self.ops) - set(ALL_OPS)
        if unknown:
            raise ValueError(f"unknown operator families {sorted(unknown)}; known: {', '.join(ALL_OPS)}")
        if not 1 <= self.max_ops <= 6:
            raise ValueError("max_ops must be between 1 and 6")
        object.__setattr__(self, "ops", tuple(o for o in ALL_OPS if o in set(self.ops)))
        object.__setattr__(self, "roles", tuple(
            r if isinstance(r, Role) else Role(r[0], tuple(r[1]), r[2], r[3]) for r in self.roles))

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("extra")
        d["roles"] = [[r["name"], list(r["shape"]), r["kind"], r["copies"]] for r in d["roles"]]
        return _lists(d)

    @classmethod
    def from_dict(cls, d: dict) -> "Settings":
        d = dict(d)
        d["roles"] = tuple(Role(n, tuple(s), k, c) for n, s, k, c in d["roles"])
        for key in ("ops", "concat_axes_4d", "enlarge_to", "pool_kernel", "float_seeds"):
            if key in d:
                d[key] = tuple(d[key])
        if "conv_kernels" in d:
            d["conv_kernels"] = tuple(tuple(k) for k in d["conv_kernels"])
        return cls(**d)

    @property
    def digest(self) -> str:
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def _lists(value):
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    return value
