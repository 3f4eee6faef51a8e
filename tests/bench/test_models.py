"""Tests for the benchmark model suite in bench/models.

Quick variants (fast): ONNX checker, structure (one static ``input``, opset 17,
inferred static output shapes), an onnxruntime run with finite outputs, and a
TVM Relax import + compile + run that must match onnxruntime.
Full-size variants (``slow``): the same checks; each takes seconds to a
few tens of seconds because TVM's default CPU lowering is unscheduled.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

# Make the repository root importable however pytest was invoked.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.models import MODELS, build  # noqa: E402
from bench.models._builder import OPSET  # noqa: E402

CLASSES = [1, 1000]
# name -> (full output shape, quick output shape)
EXPECTED_OUTPUT = {
    "resnet50": (CLASSES, CLASSES),
    "resnext50": (CLASSES, CLASSES),
    "inception_v3": (CLASSES, CLASSES),
    "squeezenet": (CLASSES, CLASSES),
    "nasnet_mobile": (CLASSES, CLASSES),
    "bert": ([1, 128, 768], [1, 32, 768]),
    "nasrnn": ([1, 512], [1, 128]),
    "vgg19": (CLASSES, CLASSES),
}
NAMES = sorted(MODELS)
RTOL = ATOL = 1e-4
INPUT_SEED = 1234


def static_shape(value_info: onnx.ValueInfoProto) -> list[int]:
    dims = value_info.type.tensor_type.shape.dim
    assert dims and all(d.HasField("dim_value") for d in dims), f"{value_info.name} not static"
    return [d.dim_value for d in dims]


def random_input(model: onnx.ModelProto) -> np.ndarray:
    shape = static_shape(model.graph.input[0])
    return np.random.default_rng(INPUT_SEED).standard_normal(shape).astype(np.float32)


def run_ort(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (out,) = sess.run(None, {"input": x})
    return out


def run_tvm(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    mod = from_onnx(model, keep_params_in_input=False)
    ex = tvm.compile(mod, tvm.target.Target({"kind": "llvm"}))
    vm = relax.VirtualMachine(ex, tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


def check_onnx(name: str, model: onnx.ModelProto, quick: bool) -> None:
    onnx.checker.check_model(model)
    assert [o.domain for o in model.opset_import] == [""]
    assert model.opset_import[0].version == OPSET
    assert [i.name for i in model.graph.input] == ["input"]
    static_shape(model.graph.input[0])
    assert [o.name for o in model.graph.output] == ["output"]
    assert static_shape(model.graph.output[0]) == EXPECTED_OUTPUT[name][quick]
    assert len(model.graph.value_info) > 0, "shape inference did not fill value_info"


def check_ort(name: str, model: onnx.ModelProto, quick: bool) -> tuple[np.ndarray, np.ndarray]:
    x = random_input(model)
    out = run_ort(model, x)
    assert list(out.shape) == EXPECTED_OUTPUT[name][quick]
    assert np.isfinite(out).all()
    return x, out


@functools.lru_cache(maxsize=None)
def quick_case(name: str) -> tuple[onnx.ModelProto, np.ndarray, np.ndarray]:
    """Quick model, its input and the onnxruntime reference, built once per session."""
    model = build(name, quick=True)
    x, ref = check_ort(name, model, quick=True)
    return model, x, ref


def test_registry_keys():
    assert set(MODELS) == set(EXPECTED_OUTPUT)
    with pytest.raises(KeyError):
        build("no_such_model")


def test_seed_makes_weights_reproducible():
    a, b = build("squeezenet", quick=True), build("squeezenet", quick=True)
    assert a.SerializeToString() == b.SerializeToString()
    c = MODELS["squeezenet"](quick=True, seed=1)
    assert c.graph.initializer[0].raw_data != a.graph.initializer[0].raw_data


@pytest.mark.parametrize("name", NAMES)
def test_quick_onnx_and_ort(name):
    model, _, _ = quick_case(name)
    check_onnx(name, model, quick=True)


@pytest.mark.parametrize("name", NAMES)
def test_quick_tvm_matches_ort(name):
    model, x, ref = quick_case(name)
    np.testing.assert_allclose(run_tvm(model, x), ref, rtol=RTOL, atol=ATOL)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_full_model(name):
    model = build(name)
    check_onnx(name, model, quick=False)
    x, ref = check_ort(name, model, quick=False)
    np.testing.assert_allclose(run_tvm(model, x), ref, rtol=RTOL, atol=ATOL)
