"""Graph -> ONNX (opset 17), and a numeric check of the result with onnxruntime.

Every graph-form operator maps to one or a few standard ONNX operators, so an
optimized graph runs outside TVM. An opaque node keeps a Relax call; those
with an ONNX form are written by `opaque.py`, and a graph with any other
cannot be exported (`ExportError` names their operators): `export_module`
then falls back to the prepared input model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..graph import INT_HIGH, Graph
from ..graph.ops.linear import KERNEL_TO_OIHW
from ..graph.ops.norm import group_norm_grouping
from ..graph.ops.shuffle import SHUFFLES, shuffle_spelling
from ..graph.ops.sources import constant_value
from .opaque import OPAQUE_EMITTERS, resize_attrs
from .writer import ExportError, Writer, elem_type, onnx_package as _onnx

OPSET = 17
IR_VERSION = 8


# ---- operators ----------------------------------------------------------------------------------
def _unary(w: Writer, op: str, x: str, dtype: str) -> str:
    simple = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "erf": "Erf", "exp": "Exp", "log": "Log",
              "sqrt": "Sqrt", "neg": "Neg", "abs": "Abs"}
    if op in simple:
        return w.one(simple[op], [x])
    if op == "rsqrt":
        return w.one("Reciprocal", [w.one("Sqrt", [x])])
    if op == "silu":
        return w.one("Mul", [x, w.one("Sigmoid", [x])])
    half, one = w.scalar(0.5, dtype), w.scalar(1.0, dtype)
    if op == "gelu":
        inner = w.one("Erf", [w.one("Mul", [x, w.scalar(1.0 / math.sqrt(2.0), dtype)])])
    elif op == "gelu_tanh":
        cube = w.one("Mul", [w.one("Mul", [x, x]), x])
        poly = w.one("Add", [x, w.one("Mul", [cube, w.scalar(0.044715, dtype)])])
        inner = w.one("Tanh", [w.one("Mul", [poly, w.scalar(math.sqrt(2.0 / math.pi), dtype)])])
    else:
        raise ExportError(f"no ONNX form for unary operator '{op}'")
    return w.one("Mul", [w.one("Mul", [x, half]), w.one("Add", [inner, one])])


def _activation(w: Writer, y: str, activation: str, dtype: str) -> str:
    return y if activation in ("none", "", None) else _unary(w, activation, y, dtype)


def _conv2d(w, a, xs, ins, outs):
    x, k = xs
    if a["data_layout"] == "NHWC":
        x = w.one("Transpose", [x], perm=[0, 3, 1, 2])
    elif a["data_layout"] != "NCHW":
        raise ExportError(f"conv2d data layout {a['data_layout']}")
    if a["kernel_layout"] != "OIHW":
        k = w.one("Transpose", [k], perm=list(KERNEL_TO_OIHW[a["kernel_layout"]]))
    y = w.one("Conv", [x, k], strides=list(a["strides"]), pads=list(a["padding"]),
              dilations=list(a["dilation"]), group=int(a["groups"]))
    if a["data_layout"] == "NHWC":
        y = w.one("Transpose", [y], perm=[0, 2, 3, 1])
    return [_activation(w, y, a["activation"], outs[0].dtype)]


def _conv2d_transpose(w, a, xs, ins, outs):
    # graph padding (top, left, bottom, right): ONNX's order too (begins, then ends)
    return [w.one("ConvTranspose", list(xs), strides=list(a["strides"]), pads=list(a["padding"]),
                  output_padding=list(a["output_padding"]), dilations=list(a["dilation"]), group=int(a["groups"]))]


def _pool(kind):
    def emit(w, a, xs, ins, outs):
        x = xs[0]
        if a["layout"] == "NHWC":
            x = w.one("Transpose", [x], perm=[0, 3, 1, 2])
        common = dict(kernel_shape=list(a["kernel"]), strides=list(a["strides"]), pads=list(a["padding"]),
                      ceil_mode=int(bool(a["ceil_mode"])))
        if kind == "max_pool2d":
            y = w.one("MaxPool", [x], dilations=list(a["dilation"]), **common)
        else:
            if tuple(a["dilation"]) != (1, 1):
                raise ExportError("avg_pool2d with dilation (needs ONNX opset 19)")
            y = w.one("AveragePool", [x], count_include_pad=int(bool(a["count_include_pad"])), **common)
        if a["layout"] == "NHWC":
            y = w.one("Transpose", [y], perm=[0, 2, 3, 1])
        return [y]
    return emit


def _resize2d(w, a, xs, ins, outs):
    x, attrs = xs[0], resize_attrs(a["method"], a["coordinates"], a["rounding"])
    if a["layout"] == "NHWC":
        x = w.one("Transpose", [x], perm=[0, 3, 1, 2])
    n, c = (ins[0].shape[i] for i in ((0, 1) if a["layout"] == "NCHW" else (0, 3)))
    y = w.one("Resize", [x, "", "", w.ints([n, c, *a["size"]])], **attrs)
    if a["layout"] == "NHWC":
        y = w.one("Transpose", [y], perm=[0, 2, 3, 1])
    return [y]


def _shuffle(op: str):
    """A pixel shuffle as ONNX's own DepthToSpace or SpaceToDepth where one says it (NCHW, a square block;
    SpaceToDepth has only the DCR order), so that other runtimes see the operator; every other shuffle as the
    reshape, transpose, reshape it is defined as."""
    def write(w, a, xs, ins, outs):
        if op in SHUFFLES and a["layout"] == "NCHW" and len(set(a["block"])) == 1:
            if op == "depth_to_space":
                return [w.one("DepthToSpace", [xs[0]], blocksize=int(a["block"][0]), mode=a["mode"])]
            if a["mode"] == "DCR":
                return [w.one("SpaceToDepth", [xs[0]], blocksize=int(a["block"][0]))]
        split, perm, _ = shuffle_spelling(op, ins[0].shape, a)
        parts = w.one("Transpose", [w.one("Reshape", [xs[0], w.ints(list(split))])], perm=list(perm))
        return [w.one("Reshape", [parts, w.ints(list(outs[0].shape))])]
    return write


def _batch_norm(w, a, xs, ins, outs):
    if a["axis"] != 1:
        raise ExportError(f"batch_norm over axis {a['axis']} (ONNX normalises axis 1)")
    return [w.one("BatchNormalization", xs, epsilon=float(a["epsilon"]))]


def _layer_norm(w, a, xs, ins, outs):
    rank, axes = ins[0].rank, tuple(a["axes"])
    if axes != tuple(range(rank - len(axes), rank)):
        raise ExportError(f"layer_norm over non-trailing axes {list(axes)}")
    x, gamma, beta = xs
    dtype = outs[0].dtype
    if not a["scale"]:
        gamma = w.const(np.ones(ins[1].shape, dtype))
    if not a["center"]:
        beta = w.const(np.zeros(ins[2].shape, dtype))
    return [w.one("LayerNormalization", [x, gamma, beta], axis=axes[0], epsilon=float(a["epsilon"]))]


def _group_normalized(w, x: str, shape, groups: int, axis: int, eps: str) -> str:
    """x normalized over each group of channels and every position, in the grouped shape: the spelling both
    group norms are defined by (graph/ops/norm.py); ONNX's own GroupNormalization is opset 18 (per channel
    from 21), where these files are 17."""
    grouped, axes = group_norm_grouping(shape, groups, axis)
    split = w.one("Reshape", [x, w.ints(grouped)])
    centred = w.one("Sub", [split, w.one("ReduceMean", [split], axes=list(axes), keepdims=1)])
    var = w.one("ReduceMean", [w.one("Mul", [centred, centred])], axes=list(axes), keepdims=1)
    return w.one("Div", [centred, w.one("Sqrt", [w.one("Add", [var, eps])])])


def _exported_group_norm(w, a, xs, ins, outs):
    x, eps, scale, bias = xs
    normed = _group_normalized(w, x, ins[0].shape, ins[2].shape[0], a["axis"], eps)
    affine = w.one("Add", [w.one("Mul", [normed, scale]), bias])
    return [w.one("Reshape", [affine, w.ints(ins[0].shape)])]


def _group_norm(w, a, xs, ins, outs):
    x, gamma, beta = xs
    shape, axis = ins[0].shape, a["axis"]
    eps = w.scalar(a["epsilon"], outs[0].dtype)
    normed = w.one("Reshape", [_group_normalized(w, x, shape, a["groups"], axis, eps), w.ints(shape)])
    per_channel = w.ints([-1 if i == axis else 1 for i in range(1, len(shape))])
    return [w.one("Add", [w.one("Mul", [normed, w.one("Reshape", [gamma, per_channel])]),
                          w.one("Reshape", [beta, per_channel])])]


def _strided_slice(w, a, xs, ins, outs):
    n = len(a["axes"])
    steps = list(a["strides"]) or [1] * n
    return [w.one("Slice", [xs[0], w.ints(a["begin"]), w.ints(a["end"]), w.ints(a["axes"]), w.ints(steps)])]


def _pad(w, a, xs, ins, outs):
    widths = list(a["pad_width"])
    pads = widths[0::2] + widths[1::2]
    return [w.one("Pad", [xs[0], w.ints(pads), w.scalar(a["value"], outs[0].dtype)], mode="constant")]


def _mirror_pad(w, a, xs, ins, outs):
    widths = a["pad_width"]
    return [w.one("Pad", [xs[0], w.ints(list(widths[0::2]) + list(widths[1::2]))], mode=a["mode"])]


def _enlarge(w, a, xs, ins, outs):
    """Zero borders by Concat, not Pad: onnxruntime's PadFusion wrongly fuses a Pad into a Conv's weight input."""
    (o, i, h, wd), dtype = ins[0].shape, outs[0].dtype
    kh, kw = a["kernel"]
    ph, pw = (kh - h) // 2, (kw - wd) // 2
    y = xs[0]
    if ph:
        zeros = w.const(np.zeros((o, i, ph, wd), dtype), "zeros")
        y = w.one("Concat", [zeros, y, zeros], axis=2)
    if pw:
        zeros = w.const(np.zeros((o, i, kh, pw), dtype), "zeros")
        y = w.one("Concat", [zeros, y, zeros], axis=3)
    return [y if (ph or pw) else w.one("Identity", [y])]


def _subpixel_kernel(w, a, xs, ins, outs):
    """graph/ops/subpixel.py's gather: a zero tap appended by Concat (as in _enlarge), the taps by Gather, the
    phases moved to the output channels."""
    from ..graph.ops.subpixel import subpixel_taps

    (c, o, kh, kw), dtype = ins[0].shape, outs[0].dtype
    (sh, sw), (ph, pw) = a["strides"], a["padding"]
    th, tw = subpixel_taps(kh, sh, ph), subpixel_taps(kw, sw, pw)
    y = w.one("Concat", [xs[0], w.const(np.zeros((c, o, 1, kw), dtype), "zeros")], axis=2)
    y = w.one("Concat", [y, w.const(np.zeros((c, o, kh + 1, 1), dtype), "zeros")], axis=3)
    y = w.one("Gather", [w.one("Gather", [y, w.ints(th.reshape(-1))], axis=2), w.ints(tw.reshape(-1))], axis=3)
    y = w.one("Reshape", [y, w.ints((c, o, sh, th.shape[1], sw, tw.shape[1]))])
    y = w.one("Transpose", [y], perm=[1, 2, 4, 0, 3, 5])
    return [w.one("Reshape", [y, w.ints(outs[0].shape)])]


def _reduce(kind):
    def emit(w, a, xs, ins, outs):
        axes, keep = list(a["axes"]) or list(range(ins[0].rank)), int(bool(a["keepdims"]))
        if kind == "sum":
            return [w.one("ReduceSum", [xs[0], w.ints(axes)], keepdims=keep)]
        if kind == "variance":  # ONNX has none: the mean of squared deviations
            deviation = w.one("Sub", [xs[0], w.one("ReduceMean", [xs[0]], axes=axes, keepdims=1)])
            return [w.one("ReduceMean", [w.one("Mul", [deviation, deviation])], axes=axes, keepdims=keep)]
        op = {"mean": "ReduceMean", "max": "ReduceMax", "min": "ReduceMin"}[kind]
        return [w.one(op, [xs[0]], axes=axes, keepdims=keep)]
    return emit


def _identity_if_empty(op_type):
    def emit(w, a, xs, ins, outs):
        if not a["axes"]:
            return [w.one("Identity", xs)]
        return [w.one(op_type, [xs[0], w.ints(a["axes"])])]
    return emit


BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "maximum": "Max", "minimum": "Min"}
UNARY = ("relu", "sigmoid", "tanh", "gelu", "gelu_tanh", "erf", "exp", "log", "sqrt", "rsqrt", "neg", "abs", "silu")

EMITTERS = {
    "conv2d": _conv2d,
    "conv2d_transpose": _conv2d_transpose,
    "matmul": lambda w, a, xs, ins, outs: [_activation(w, w.one("MatMul", xs), a["activation"], outs[0].dtype)],
    "max_pool2d": _pool("max_pool2d"),
    "avg_pool2d": _pool("avg_pool2d"),
    "resize2d": _resize2d,
    "channel_shuffle": _shuffle("channel_shuffle"),
    "depth_to_space": _shuffle("depth_to_space"),
    "space_to_depth": _shuffle("space_to_depth"),
    "batch_norm": _batch_norm,
    "layer_norm": _layer_norm,
    "exported_group_norm": _exported_group_norm,
    "group_norm": _group_norm,
    "softmax": lambda w, a, xs, ins, outs: [w.one("Softmax", xs, axis=int(a["axis"]))],
    "concat": lambda w, a, xs, ins, outs: [w.one("Concat", xs, axis=int(a["axis"]))],
    "split": lambda w, a, xs, ins, outs: w.op("Split", [xs[0], w.ints(a["sizes"])], len(a["sizes"]),
                                               axis=int(a["axis"])),
    "transpose": lambda w, a, xs, ins, outs: [w.one("Transpose", xs, perm=list(a["perm"]))],
    "reshape": lambda w, a, xs, ins, outs: [w.one("Reshape", [xs[0], w.ints(a["shape"])])],
    "broadcast_to": lambda w, a, xs, ins, outs: [w.one("Expand", [xs[0], w.ints(a["shape"])])],
    "strided_slice": _strided_slice,
    "squeeze": _identity_if_empty("Squeeze"),
    "expand_dims": _identity_if_empty("Unsqueeze"),
    "pad": _pad,
    "mirror_pad": _mirror_pad,
    "enlarge": _enlarge,
    "subpixel_kernel": _subpixel_kernel,
    "cast": lambda w, a, xs, ins, outs: [w.one("Cast", xs, to=elem_type(a["dtype"]))],
    "isnan": lambda w, a, xs, ins, outs: [w.one("IsNaN", xs)],
    "leaky_relu": lambda w, a, xs, ins, outs: [w.one("LeakyRelu", xs, alpha=float(a["alpha"]))],
    "where": lambda w, a, xs, ins, outs: [w.one("Where", xs)],
    "clip": lambda w, a, xs, ins, outs: [w.one("Clip", [xs[0], w.scalar(a["min"], outs[0].dtype),
                                                        w.scalar(a["max"], outs[0].dtype)])],
    **{name: _reduce(name) for name in ("sum", "mean", "max", "min", "variance")},
    **{name: (lambda op: lambda w, a, xs, ins, outs: [_unary(w, op, xs[0], outs[0].dtype)])(name)
       for name in UNARY},
    **{name: (lambda op: lambda w, a, xs, ins, outs: [w.one(op, xs)])(op_type) for name, op_type in BINARY.items()},
}


# ---- whole graphs ---------------------------------------------------------------------------------
def flat_outputs(result, exports) -> list[int]:
    """Graph output indices in the order the Relax function returns them (tuples flattened)."""
    from ..bridge.records import ExportRef

    if isinstance(result, ExportRef):
        return flat_outputs(exports[result.index].structure, exports)
    if isinstance(result, tuple):
        return [i for item in result for i in flat_outputs(item, exports)]
    return [int(result)]


def export_graph(graph: Graph, signature, input_names: Sequence[str], output_names: Sequence[str],
                 name: str = "taso_relay", module=None):
    """An ONNX ModelProto computing what `graph` computes; inputs and outputs carry the given names.

    module: the IRModule the graph was read from, whose PrimFuncs its opaque call_tirs call."""
    from onnx import helper

    opaque = sorted({graph.nodes[i].attr("label") or "opaque" for i in graph.nodes_of("opaque")} - set(OPAQUE_EMITTERS))
    if opaque:
        raise ExportError(f"the graph has opaque operators with no ONNX form: {', '.join(opaque)}")
    if len(input_names) != len(signature.input_names):
        raise ExportError(f"{len(signature.input_names)} graph inputs but {len(input_names)} ONNX input names")
    input_of = dict(zip(signature.input_names, input_names))
    order = flat_outputs(signature.result, signature.exports)
    if len(order) != len(output_names):
        raise ExportError(f"the function returns {len(order)} tensors but the model has {len(output_names)} outputs")

    w = Writer(reserved=(*input_names, *output_names))
    w.module = module
    values: list[list[str]] = []
    known: dict[int, list[np.ndarray]] = {}  # nodes computed from weights and constants only
    graph_inputs = []
    for i, node in enumerate(graph.nodes):
        a = node.attr_dict
        if node.op == "input":
            onnx_name = input_of.get(a["name"], a["name"])
            graph_inputs.append(helper.make_tensor_value_info(onnx_name, elem_type(a["dtype"]), list(a["shape"])))
            values.append([onnx_name])
        elif node.op in ("weight", "constant"):
            value = (_weight_value(graph, a) if node.op == "weight"
                     else constant_value(a["kind"], tuple(a["shape"]), a["dtype"]))
            known[i] = [value]
            values.append([w.const(value, "w" if node.op == "weight" else a["kind"])])
        elif (folded := _fold(graph, node, known)) is not None:
            # Like TVM's FoldConstant: weight transforms (enlarge, transpose, ...) become initializers.
            known[i] = folded
            values.append([w.const(v, "folded") for v in folded])
        else:
            xs = [values[r.node][r.index] for r in node.inputs]
            ins = [graph.type_of(r) for r in node.inputs]
            if node.op == "opaque":
                call = graph.payloads[a["ref"]].call
                values.append(OPAQUE_EMITTERS[a["label"]](w, call, xs, ins, list(node.types)))
                continue
            emit = EMITTERS.get(node.op)
            if emit is None:
                raise ExportError(f"graph operator '{node.op}' has no ONNX form")
            values.append(emit(w, a, xs, ins, list(node.types)))
    outputs, named = [], set()
    for onnx_name, k in zip(output_names, order):
        ref = graph.outputs[k]
        value = values[ref.node][ref.index]
        if onnx_name not in named and value != onnx_name:  # a tensor listed twice, an input returned: named once
            if onnx_name in input_names:
                raise ExportError(f"output '{onnx_name}' is also an input, but the graph computes it")
            w.nodes.append(helper.make_node("Identity", [value], [onnx_name], name=w.name("out")))
        named.add(onnx_name)
        t = graph.type_of(ref)
        outputs.append(helper.make_tensor_value_info(onnx_name, elem_type(t.dtype), list(t.shape)))
    used = {i for n in w.nodes for i in n.input}
    inits = [t for t in w.inits if t.name in used]  # weights consumed only by folded nodes are gone
    onnx_graph = helper.make_graph(w.nodes, name, graph_inputs, outputs, initializer=inits)
    model = helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="taso_relay", ir_version=IR_VERSION)
    _onnx().checker.check_model(model)
    return model


FOLD_LIMIT = 64 << 20  # bytes: larger results stay computed in the model


def _fold(graph: Graph, node, known: dict) -> list[np.ndarray] | None:
    """The node's outputs when all its inputs are known constants and the interpreter can compute them."""
    from ..graph import get_op

    if not node.inputs or any(r.node not in known for r in node.inputs):
        return None
    opdef = get_op(node.op)
    if opdef.ref is None or node.op == "opaque":
        return None
    try:
        with np.errstate(all="ignore"):
            outs = [np.asarray(o) for o in opdef.ref([known[r.node][r.index] for r in node.inputs], node.attr_dict)]
    except Exception:  # noqa: BLE001 - leave it to onnxruntime
        return None
    if sum(o.nbytes for o in outs) > FOLD_LIMIT or [o.shape for o in outs] != [t.shape for t in node.types]:
        return None
    return [o.astype(t.dtype, copy=False) for o, t in zip(outs, node.types)]


def _weight_value(graph: Graph, attrs) -> np.ndarray:
    name = attrs["name"]
    if name in graph.values:
        return np.asarray(graph.values[name])
    payload = graph.payloads.get(name)
    if payload is not None and hasattr(payload, "value"):
        return payload.value.numpy()
    raise ExportError(f"weight '{name}' has no value")


@dataclass
class Exported:
    """The ONNX model written for an optimized module and how it came about."""

    model: object
    exported: bool  # False: the prepared input model was written instead
    reason: str = ""
    max_diff: float | None = None


def export_module(mod, prepared, func: str = "main", graph=None, signature=None, check: bool = True,
                  seed: int = 0) -> Exported:
    """The optimized module as ONNX, checked against the input model; else the input model, with the reason."""
    from ..bridge import graph_from_function
    import warnings

    if graph is None or signature is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            imported = graph_from_function(mod[func], func, mod)
        if imported is None:
            return Exported(prepared.model, False, "the optimized function has no graph form")
        graph, signature = imported.graph, imported.signature
    try:
        model = export_graph(graph, signature, [t.name for t in prepared.inputs],
                             [t.name for t in prepared.outputs], module=mod)
    except ExportError as exc:
        return Exported(prepared.model, False, str(exc))
    except Exception as exc:  # noqa: BLE001 - e.g. onnx.checker refusing what was written: the input model
        text = str(exc).strip()
        detail = f": {text.splitlines()[0]}" if text else ""
        return Exported(prepared.model, False, f"the ONNX writer failed: {type(exc).__name__}{detail}")
    if not check:
        return Exported(model, True)
    from ..guard.close import narrow_float

    ok, diff, why = check_numerics(prepared.original, model, prepared.inputs, seed=seed, within=narrow_float(graph))
    if not ok:
        return Exported(prepared.model, False, f"the exported graph does not match the input model ({why})", diff)
    return Exported(model, True, "", diff)


# ---- numerics ---------------------------------------------------------------------------------------
def random_onnx_inputs(inputs, seed: int = 0, bounds: dict | None = None) -> dict[str, np.ndarray]:
    """Floats in [-1, 1), bools, small non-negative ints (below `bounds`: see onnx_index_bounds)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for t in inputs:
        if np.issubdtype(np.dtype(t.dtype), np.floating):
            feeds[t.name] = rng.uniform(-1, 1, size=t.shape).astype(t.dtype)
        elif np.dtype(t.dtype) == np.bool_:
            feeds[t.name] = rng.integers(0, 2, size=t.shape).astype(bool)
        else:
            high = max(1, min(INT_HIGH, (bounds or {}).get(t.name, INT_HIGH)))
            feeds[t.name] = rng.integers(0, high, size=t.shape).astype(t.dtype)
    return feeds


_INDEX_PASS_THROUGH = ("Cast", "Reshape", "Unsqueeze", "Squeeze", "Identity", "Flatten", "Expand")


def onnx_index_bounds(model) -> dict[str, int]:
    """Graph input -> the smallest extent of an initializer it indexes through Gather (an embedding
    table), directly or through casts and reshapes. onnxruntime rejects indices past it, and
    TVM's build of the same Gather reads out of bounds."""
    graph = model.graph
    dims = {t.name: list(t.dims) for t in graph.initializer}
    source = {i.name: i.name for i in graph.input if i.name not in dims}
    bounds: dict[str, int] = {}
    for node in graph.node:
        if node.op_type in _INDEX_PASS_THROUGH and node.input and node.input[0] in source:
            source[node.output[0]] = source[node.input[0]]
        elif node.op_type == "Gather" and len(node.input) == 2 and node.input[1] in source \
                and node.input[0] in dims:
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            shape = dims[node.input[0]]
            if -len(shape) <= axis < len(shape):
                name = source[node.input[1]]
                bounds[name] = min(bounds.get(name, shape[axis]), shape[axis])
    return bounds


def run_onnxruntime(model, feeds: dict) -> list[np.ndarray]:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 4  # a model it rejects raises, with the reason; nothing more on stderr
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def close(want: np.ndarray, got: np.ndarray, within=None) -> tuple[bool, float]:
    """(TASOPass's verdict, guard.close.close, with `within` the narrow float the graph computes in; the
    largest absolute difference of the finite elements)."""
    from ..guard.close import close as same

    want, got = np.asarray(want), np.asarray(got)
    if want.shape != got.shape:
        return False, float("inf")
    a, b = want.astype(np.float64), got.astype(np.float64)
    both = np.isfinite(a) & np.isfinite(b)
    diff = float(np.max(np.abs(a[both] - b[both]), initial=0.0))
    return same(want, got.astype(want.dtype), within), diff


def check_numerics(reference, candidate, inputs, seed: int = 0, within=None) -> tuple[bool, float | None, str]:
    """Run both ONNX models with onnxruntime on the same random inputs: (equal, max abs diff, why not); `within`:
    the narrow float the graph computes in, whose rounding the comparison allows (guard.close)."""
    feeds = random_onnx_inputs(inputs, seed, onnx_index_bounds(reference))
    try:
        want = run_onnxruntime(reference, feeds)
    except Exception as exc:  # noqa: BLE001 - the reference may use operators onnxruntime lacks
        return True, None, f"not checked: onnxruntime cannot run the input model ({type(exc).__name__})"
    try:
        got = run_onnxruntime(candidate, feeds)
    except Exception as exc:  # noqa: BLE001
        return False, None, f"onnxruntime cannot run it: {str(exc).strip().splitlines()[0]}"
    worst = 0.0
    for k, (a, b) in enumerate(zip(want, got)):
        if np.shape(a) != np.shape(b):
            return False, None, f"output {k} has shape {list(np.shape(b))} where the input model's has {list(np.shape(a))}"
        ok, diff = close(a, b, within)
        worst = max(worst, diff)
        if not ok:
            return False, diff, f"output {k} differs by up to {diff:.3g}"
    return True, worst, ""
