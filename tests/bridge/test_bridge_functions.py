"""Function-level shapes of Relax the bridge must keep: outputs, tuples, lowered calls, and refusals."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import tvm
from bridge_onnx_models import MODELS, import_onnx, resnet_block
from tvm import relax
from tvm.script import relax as R

from taso_relay.bridge import graph_from_function, roundtrip
from taso_relay.bridge.execute import random_inputs


@tvm.script.ir_module
class Outputs:
    @R.function
    def main(x: R.Tensor((2, 6), "float32"), y: R.Tensor((2, 6), "float32")):
        with R.dataflow():
            a = R.nn.relu(x)
            s = R.split(R.add(a, y), 3, axis=1)
            b = s[1]
            c = R.multiply(b, b)
            dead = R.exp(c)  # unused: kept, not dropped by the bridge
            R.output(a, c)
        return (a, (c, y), x)


@tvm.script.ir_module
class Symbolic:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        with R.dataflow():
            y = R.nn.relu(x)
            R.output(y)
        return y


def two_symbols(match_cast: bool):
    """relu of x (batch, time, 4), its result matched to its own type where `match_cast`."""
    batch, time = tvm.tirx.Var("batch", "int64"), tvm.tirx.Var("time", "int64")
    x = relax.Var("x", relax.TensorType((batch, time, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.relu(x))
            if match_cast:
                y = bb.match_cast(y, relax.TensorType((batch, time, 4), "float32"))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return bb.get()


@tvm.script.ir_module
class NotDataflow:
    @R.function
    def main(x: R.Tensor((2, 4), "float32")):
        y = R.nn.relu(x)
        return y


@tvm.script.ir_module
class WithMatchCast:
    @R.function
    def main(x: R.Tensor((2, 4), "float32")):
        with R.dataflow():
            y = R.match_cast(x, R.Tensor((2, 4), "float32"))
            z = R.nn.relu(y)
            R.output(z)
        return z


@tvm.script.ir_module
class ShapeParam:
    @R.function
    def main(x: R.Tensor((2, 4), "float32"), s: R.Shape([2, 4])):
        with R.dataflow():
            z = R.nn.relu(x)
            R.output(z)
        return z


@tvm.script.ir_module
class NoBindings:
    @R.function
    def main(x: R.Tensor((2, 4), "float32")):
        return x


@tvm.script.ir_module
class Calls:
    @R.function
    def helper(x: R.Tensor((2, 4), "float32")) -> R.Tensor((2, 4), "float32"):
        with R.dataflow():
            y = R.nn.relu(x)
            R.output(y)
        return y

    @R.function
    def main(x: R.Tensor((2, 4), "float32")):
        cls = Calls
        with R.dataflow():
            a = cls.helper(x)
            b = R.add(a, x)
            R.output(b)
        return b


def test_outputs_tuples_and_params_round_trip_exactly(run_module, rng):
    func = Outputs["main"]
    imported = graph_from_function(func)
    counts = imported.graph.op_counts()
    assert counts["split"] == 1 and counts["exp"] == 1 and "opaque" not in counts
    again = roundtrip(func)
    tvm.ir.assert_structural_equal(again, func)
    inputs = random_inputs(func.params, rng)
    for w, g in zip(run_module(Outputs, inputs), run_module(tvm.IRModule({"main": again}), inputs)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("mod, reason", [
    (Symbolic, "symbolic dimension 'n'"),
    (NotDataflow, "bindings outside a dataflow block"),
    (WithMatchCast, "'y' gets its shape from a match_cast \\(of a value\\)"),
    (ShapeParam, "parameter 's' is not a tensor"),
    # every symbol in the pinning hint at once, not one per try
    (two_symbols(False), "symbolic dimension 'batch' .*BindSymbolicVars\\(\\{'batch': 1, 'time': 1\\}\\)"),
    # a match_cast stands after pinning too: said first
    (two_symbols(True), "'lv1' gets its shape from a match_cast"),
], ids=["symbolic", "not_dataflow", "match_cast", "shape_param", "two_symbols", "match_cast_before_symbols"])
def test_unsupported_function_warns_and_is_left_alone(mod, reason):
    with pytest.warns(UserWarning, match=f"leaving function 'main' unchanged: .*{reason}"):
        assert graph_from_function(mod["main"]) is None
    with pytest.warns(UserWarning, match=reason):
        assert roundtrip(mod["main"]).same_as(mod["main"])


def test_symbolic_batch_from_onnx_warns_and_is_left_alone():
    mod = import_onnx(resnet_block(batch="N"))
    with pytest.warns(UserWarning, match="symbolic dimension"):
        assert graph_from_function(mod["main"]) is None


def test_function_without_bindings_is_skipped_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert graph_from_function(NoBindings["main"]) is None


def test_lowered_module_round_trips_with_call_tir_opaque(run_module, rng):
    """After LegalizeOps every call is call_tir (a GlobalVar and a tuple of arguments): all opaque."""
    mod = relax.transform.LegalizeOps()(import_onnx(MODELS["inception_block"]()))
    imported = graph_from_function(mod["main"])
    counts = imported.graph.op_counts()
    assert counts["opaque"] >= 6 and "conv2d" not in counts
    assert {imported.graph.nodes[i].attr("label") for i in imported.graph.nodes_of("opaque")} == {"relax.call_tir"}
    again = roundtrip(mod["main"])
    tvm.ir.assert_structural_equal(again, mod["main"])
    lowered = mod.clone()
    lowered["main"] = again
    inputs = random_inputs(mod["main"].params, rng)
    np.testing.assert_array_equal(run_module(lowered, inputs)[0], run_module(mod, inputs)[0])


def test_call_to_another_relax_function_is_opaque(run_module, rng):
    imported = graph_from_function(Calls["main"])
    assert imported.graph.op_counts() == {"input": 1, "opaque": 1, "add": 1}
    again = roundtrip(Calls["main"])
    tvm.ir.assert_structural_equal(again, Calls["main"])
    mod = Calls.clone()
    mod["main"] = again
    inputs = random_inputs(Calls["main"].params, rng)
    np.testing.assert_array_equal(run_module(mod, inputs)[0], run_module(Calls, inputs)[0])
