"""The benchmark models, through ``bench.models`` (owned by the model builders).

``bench.models`` is expected to export ``MODELS`` (names) and
``build(name, quick=False) -> onnx.ModelProto``.  While that package is still
being finished, fall back to importing ``bench.models.<name>`` and calling its
``build(quick=...)``, so the harness keeps working either way.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import onnx

# The suite in the order the table shows it; used only when bench.models has no MODELS.
FALLBACK_MODELS = ("resnet50", "resnext50", "squeezenet", "inception_v3", "bert", "nasrnn")
# --quick: a subset at reduced sizes (each model's own quick=True variant).
QUICK_MODELS = ("squeezenet", "resnet50", "bert", "nasrnn")


def _package():
    """``bench.models`` if it imports (it may be mid-edit), else None."""
    try:
        return importlib.import_module("bench.models")
    except ImportError:
        return None


def available_models() -> list[str]:
    pkg = _package()
    names = getattr(pkg, "MODELS", None)
    if names:
        return list(names)
    return [n for n in FALLBACK_MODELS if _has_module(n)]


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(f"bench.models.{name}") is not None
    except ImportError:
        return False


def build_model(name: str, quick: bool = False) -> onnx.ModelProto:
    """The suite's model `name`, or an ONNX file named by its path (``*.onnx``: a model nobody here wrote,
    e.g. a bench/corpus export; one static input, `quick` ignored)."""
    if name.endswith(".onnx"):
        return onnx.load(name)
    pkg = _package()
    if hasattr(pkg, "build") and getattr(pkg, "MODELS", None):
        return pkg.build(name, quick=quick)
    return importlib.import_module(f"bench.models.{name}").build(quick=quick)


def label(name: str) -> str:
    """How results name a model: an ONNX file by its stem."""
    return Path(name).stem if name.endswith(".onnx") else name


def input_shape(model: onnx.ModelProto) -> tuple[str, list[int], str]:
    """Name, static shape and numpy dtype of the model's single input."""
    inp = model.graph.input[0]
    tt = inp.type.tensor_type
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).name
    return inp.name, [d.dim_value for d in tt.shape.dim], dtype
