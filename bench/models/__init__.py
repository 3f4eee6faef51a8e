"""Benchmark model suite: ONNX graphs built in Python with seeded random weights.

Every builder has the signature ``build(quick=False, seed=0) -> onnx.ModelProto``
and returns an opset-17, batch-1, float32 model with exactly one static-shape
graph input named ``input`` and shape-inferred outputs.  ``quick=True`` gives a
smaller variant of the same architecture for fast tests (each module's
docstring says what it changes).  See README.md for sizes.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx

from . import bert, inception_v3, nasnet_mobile, nasrnn, resnet50, resnext50, squeezenet, vgg19

MODELS: dict[str, Callable[..., onnx.ModelProto]] = {
    "resnet50": resnet50.build,
    "resnext50": resnext50.build,
    "inception_v3": inception_v3.build,
    "squeezenet": squeezenet.build,
    "nasnet_mobile": nasnet_mobile.build,
    "bert": bert.build,
    "nasrnn": nasrnn.build,
    "vgg19": vgg19.build,
}


def build(name: str, quick: bool = False, seed: int = 0) -> onnx.ModelProto:
    """Builds the registered model ``name`` (see ``MODELS`` for the keys)."""
    try:
        builder = MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {sorted(MODELS)}") from None
    return builder(quick=quick, seed=seed)
