"""Load an ONNX model, pin its input shapes, infer shapes, fold constants and import it with TVM.

PyTorch exports compute some shapes inside the graph (Shape -> Gather ->
Concat -> Pad, ...). TVM's importer wants those values as constants, so
they are folded here first: every node whose inputs are all known constants
(initializers, Constant nodes, or the Shape of a tensor whose shape is
static) is evaluated with onnx's reference evaluator and replaced by an
initializer. Every failure is an `InputError` with a one-line message.
"""
from __future__ import annotations

import gc
import re
import sys
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from . import legacy_forms
from .errors import InputError

NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                    "Bernoulli", "Dropout"}
SUBGRAPH_OPS = {"If", "Loop", "Scan"}
MAX_FOLDED_BYTES = 64 << 20  # a folded tensor larger than this stays computed


@dataclass
class Tensor:
    """An ONNX graph input or output: its name, static shape and numpy dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def as_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


@dataclass
class Prepared:
    """A model ready for the optimizer."""

    path: Path
    original: object  # onnx.ModelProto as loaded (input shapes pinned)
    model: object  # after shape inference and constant folding
    mod: object  # tvm.IRModule from TVM's ONNX importer (weights as constants)
    inputs: list[Tensor] = field(default_factory=list)
    outputs: list[Tensor] = field(default_factory=list)
    folded: int = 0  # nodes folded into initializers
    converted: str = ""  # how the model was converted to an opset TVM's importer reads, and why; "" if not
    warnings: list[str] = field(default_factory=list)  # what the user should know about the model as pinned

    @property
    def opset(self) -> int:
        return onnx_opset(self.model)


# ---- loading -------------------------------------------------------------------------
def load_onnx(path) -> "onnx.ModelProto":  # noqa: F821
    """Read and check an ONNX file; InputError for a missing, foreign, truncated or invalid file."""
    import onnx
    from google.protobuf.message import DecodeError

    path = Path(path)
    if not path.exists():
        raise InputError(f"no such model file: {path}")
    if not path.is_file():
        raise InputError(f"not a file: {path}")
    data = path.read_bytes()
    if not data:
        raise InputError(f"{path} is empty, not an ONNX model")
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise InputError(_unparsable(path, data, exc)) from exc
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise InputError(f"{path} is not an ONNX model (no IR version or graph)")
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
        try:
            from onnx.external_data_helper import load_external_data_for_model
            load_external_data_for_model(model, str(path.parent))
        except (OSError, ValueError, onnx.checker.ValidationError) as exc:  # (a data file missing: the last)
            raise InputError(f"{path}: cannot load its external weights: {_first_line(exc)}") from exc
    try:
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, ValueError) as exc:
        # (it parsed: not truncated; the checker's reason, which can run over lines, as one line)
        raise InputError(f"{path} is not a valid ONNX model: {' '.join(str(exc).split())[:400]}") from exc
    return model


def _unparsable(path: Path, data: bytes, exc: Exception) -> str:
    # A serialized ModelProto starts with field 1 (ir_version, a varint): tag byte 0x08.
    if data[:1] == b"\x08":
        return f"{path} is a truncated or corrupt ONNX model (cannot parse it: {_first_line(exc)})"
    return f"{path} is not an ONNX model (cannot parse it as ONNX protobuf)"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _readable(message: str) -> str:
    """A Relax error as a user reads it: its operator's name for the operator's whole printed form (a line
    of argument descriptions), and plain numbers for T.int64(16)."""
    name = re.search(r'name="relax\.([\w.]+)"', message[:4000]) if message.startswith(("In ir.Op(", "ir.Op(")) \
        else None
    end = message.find("support_level=") if name else -1
    end = message.find(")", end) if end >= 0 else -1  # (the printed form ends "support_level=N)" and "," or not)
    if end >= 0:
        message = f"In {name.group(1)}: {message[end + 1:].lstrip(', ')}"
    return re.sub(r"T\.int64\((\d+)\)", r"\1", message)


def onnx_opset(model) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


# ---- input shapes ----------------------------------------------------------------------
def parse_input_shapes(specs: Sequence[str] | None) -> dict[str, tuple[int, ...]]:
    """['x:1,3,224,224', ...] -> {'x': (1, 3, 224, 224)}; the name may contain ':' (the last one splits)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs or ():
        name, sep, dims = spec.rpartition(":")
        if not sep or not name:
            raise InputError(f"--input-shape '{spec}' is not NAME:D1,D2,... (e.g. input:1,3,224,224)")
        try:
            shape = tuple(int(d) for d in dims.replace("x", ",").split(",") if d.strip()) if dims.strip() else ()
        except ValueError:
            raise InputError(f"--input-shape '{spec}': dimensions must be integers") from None
        if any(d <= 0 for d in shape):
            raise InputError(f"--input-shape '{spec}': dimensions must be positive")
        shapes[name] = shape
    return shapes


def graph_inputs(model) -> list:
    """The model's real inputs: graph inputs that are not initializers."""
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def _np_dtype(elem_type: int) -> str:
    from onnx import helper
    try:
        return str(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)))
    except (KeyError, TypeError, ValueError):
        return "unknown"


def pin_input_shapes(model, shapes: Mapping[str, Sequence[int]]) -> list[Tensor]:
    """Write the given shapes into the model's inputs; InputError if any input dimension stays unknown."""
    inputs = graph_inputs(model)
    names = [i.name for i in inputs]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise InputError(f"--input-shape names unknown input(s) {', '.join(unknown)}; "
                         f"the model's inputs are: {', '.join(names)}")
    named = _named_sizes(inputs, shapes)
    out, dynamic = [], []
    for value in inputs:
        ttype = value.type.tensor_type if value.type.HasField("tensor_type") else None
        if ttype is None:
            raise InputError(f"input '{value.name}' is not a tensor; only tensor inputs are supported")
        if value.name in shapes:
            wanted = tuple(int(d) for d in shapes[value.name])
            if ttype.HasField("shape") and len(ttype.shape.dim) != len(wanted):
                raise InputError(f"--input-shape {value.name}: rank {len(wanted)} but the model's input "
                                 f"has rank {len(ttype.shape.dim)}")
            for axis, (dim, size) in enumerate(zip(_dims(ttype, len(wanted)), wanted)):
                if dim.HasField("dim_value") and dim.dim_value > 0 and dim.dim_value != size:
                    raise InputError(f"--input-shape {value.name}: dimension {axis} is fixed at {dim.dim_value} "
                                     f"in the model, not {size}; only dynamic dimensions can be pinned")
                dim.Clear()
                dim.dim_value = size
        if not ttype.HasField("shape"):
            raise InputError(f"input '{value.name}' has an unknown rank; give its shape with "
                             f"--input-shape {value.name}:D1,D2,...")
        dims = []
        for dim in ttype.shape.dim:
            dims.append(dim.dim_value if dim.HasField("dim_value") and dim.dim_value > 0 else None)
        if any(d is None for d in dims):
            shown = ",".join(str(d) if d is not None else (dim.dim_param or "?")
                             for d, dim in zip(dims, ttype.shape.dim))
            example = ",".join(str(d) if d is not None else str(named.get(dim.dim_param, 1))
                               for d, dim in zip(dims, ttype.shape.dim))
            dynamic.append((value.name, shown, f"--input-shape {value.name}:{example}"))
            continue
        out.append(Tensor(value.name, tuple(dims), _np_dtype(ttype.elem_type)))
    if len(dynamic) == 1:
        name, shown, fix = dynamic[0]
        raise InputError(f"input '{name}' has a dynamic shape [{shown}]; give a static one, e.g. {fix}")
    if dynamic:  # every one named at once, not one per attempt
        raise InputError("inputs " + ", ".join(f"'{n}' [{shown}]" for n, shown, _ in dynamic) + " have dynamic "
                         "shapes; give static ones, e.g. " + " ".join(fix for *_, fix in dynamic))
    return out


def _named_sizes(inputs, shapes: Mapping[str, Sequence[int]]) -> dict[str, int]:
    """The size each named dynamic dimension ('batch', 'seq') is pinned to; InputError where two inputs that
    share one are pinned differently (a token-id input and its attention mask, each given a length)."""
    sizes: dict[str, tuple[int, str, int]] = {}
    for value in inputs:
        known = value.type.tensor_type.HasField("shape")
        if value.name not in shapes or not known or len(value.type.tensor_type.shape.dim) != len(shapes[value.name]):
            continue  # (a rank that differs is named next, in pin_input_shapes)
        for axis, (dim, size) in enumerate(zip(value.type.tensor_type.shape.dim, shapes[value.name])):
            if not dim.dim_param or (dim.HasField("dim_value") and dim.dim_value > 0):
                continue
            first = sizes.setdefault(dim.dim_param, (int(size), value.name, axis))
            if first[0] != int(size):
                raise InputError(f"--input-shape pins dimension '{dim.dim_param}' (shared by the model's inputs) "
                                 f"to {first[0]} in '{first[1]}' (axis {first[2]}) and to {size} in '{value.name}' "
                                 f"(axis {axis}); pin it alike in both")
    return {name: size for name, (size, _, _) in sizes.items()}


def _dims(ttype, rank: int):
    if not ttype.HasField("shape"):
        for _ in range(rank):
            ttype.shape.dim.add()
    return list(ttype.shape.dim)


# ---- shape inference and constant folding ------------------------------------------------
def infer_shapes(model):
    """ONNX shape inference, after dropping the intermediate shapes it left unknown before.

    An entry with a symbolic or missing dimension would stand: inference does not
    overwrite it once folding has made that dimension computable, and a dynamic
    transformers export (batch and sequence pinned with --input-shape) then kept
    its Shape -> Slice -> Expand chains, which TVM's importer cannot convert."""
    import onnx

    static = [v for v in model.graph.value_info if _is_static(v)]
    if len(static) != len(model.graph.value_info):
        del model.graph.value_info[:]
        model.graph.value_info.extend(static)
    try:
        inferred = onnx.shape_inference.infer_shapes(_without_weight_data(model), check_type=False,
                                                     strict_mode=False, data_prop=True)
    except Exception as exc:  # noqa: BLE001 - inference is a help, not a requirement
        warnings.warn(f"taso_relay: ONNX shape inference failed ({_first_line(exc)}); importing without it")
        return model
    del model.graph.value_info[:]
    model.graph.value_info.extend(inferred.graph.value_info)
    for output, typed in zip(model.graph.output, inferred.graph.output):
        output.type.CopyFrom(typed.type)
    for node, typed in zip(model.graph.node, inferred.graph.node):  # shapes inside If/Loop/Scan bodies
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            node.CopyFrom(typed)
    return model


LIGHT_BYTES = 1024  # initializers larger than this lose their values for shape inference (shapes are kept)


def _without_weight_data(model):
    """A copy of the model whose large initializers keep only their name, type and dims.

    Shape inference serialises the model it is given: 1.4-3 s for torchvision's Swin-T (110 MB),
    0.06 s without the weights' values, with the same shapes inferred. Shape tensors are small, so
    the values that data propagation folds stay."""
    import onnx

    light = onnx.ModelProto(ir_version=model.ir_version)
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    graph, copy = model.graph, light.graph
    for part in ("node", "input", "output", "value_info", "sparse_initializer"):
        getattr(copy, part).extend(getattr(graph, part))
    for t in graph.initializer:
        if _nbytes(t) > LIGHT_BYTES:
            copy.initializer.add(name=t.name, data_type=t.data_type, dims=t.dims)
        else:
            copy.initializer.append(t)
    return light


def _nbytes(tensor) -> int:
    """An initializer's size from its dims and type (strings count as small: their values matter)."""
    import onnx

    if tensor.data_type == onnx.TensorProto.STRING:
        return 0
    return int(np.prod(tensor.dims, dtype=np.int64)) * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize


def _is_static(value) -> bool:
    t = value.type.tensor_type if value.type.HasField("tensor_type") else None
    return t is not None and t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim)


def _static_shapes(model) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for v in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        t = v.type.tensor_type if v.type.HasField("tensor_type") else None
        if t is None or not t.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
        if all(d >= 0 for d in dims):
            shapes[v.name] = tuple(dims)
    return shapes


def _shape_value(node, shape: tuple[int, ...]) -> np.ndarray:
    """Shape (with start/end, opset 15) or Size of a tensor with a static shape."""
    if node.op_type == "Size":
        return np.asarray(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
    attrs = {a.name: a.i for a in node.attribute}
    rank = len(shape)
    start, end = attrs.get("start", 0), attrs.get("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return np.asarray(shape[start:end], dtype=np.int64)


def _evaluate(node, feeds: dict, opset: int) -> list[np.ndarray] | None:
    from onnx.reference import ReferenceEvaluator
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            evaluator = ReferenceEvaluator(node, opsets={"": opset})
            results = evaluator.run(None, {k: v for k, v in feeds.items() if k})
    except Exception:  # noqa: BLE001 - a node the reference cannot run is simply left in the graph
        return None
    return [np.asarray(r) for r in results]


def fold_constants(model, max_rounds: int = 64):
    """Replace nodes computable from constants by initializers; returns (model, number of nodes folded).

    Rounds until nothing folds: a round folds what the shapes known at its start allow, and a
    folded Pad or Reshape makes the next shapes known. torchvision's Swin-T computes each of its
    12 blocks' window padding from the shape the block before produced: 14 rounds."""
    from onnx import numpy_helper

    opset = onnx_opset(model)
    total = 0
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}  # and what each round folds
    for _ in range(max_rounds):
        graph = model.graph
        shapes = _static_shapes(model)
        keep_outputs = {o.name for o in graph.output}
        kept, new_consts, folded = [], {}, 0
        for node in graph.node:
            values = _fold_node(node, consts, shapes, keep_outputs, opset)
            if values is None:
                kept.append(node)
                continue
            for name, value in zip(node.output, values):
                consts[name] = new_consts[name] = value
            folded += 1
        if not folded:
            break
        used = _names_read(kept) | keep_outputs
        del graph.node[:]
        graph.node.extend(kept)
        for name, value in new_consts.items():
            if name in used:
                graph.initializer.append(numpy_helper.from_array(np.asarray(value, order="C"), name))
        _drop_unused_initializers(model, used)
        total += folded
        model = infer_shapes(model)
    return model, total


def _fold_node(node, consts, shapes, keep_outputs, opset):
    if node.domain not in ("", "ai.onnx") or any(o in keep_outputs for o in node.output):
        return None
    if node.op_type in NONDETERMINISTIC or node.op_type in SUBGRAPH_OPS:
        return None
    if any(a.type in (GRAPH, GRAPHS) for a in node.attribute):
        return None
    if node.op_type in ("Shape", "Size") and node.input[0] in shapes:
        return [_shape_value(node, shapes[node.input[0]])]
    present = [i for i in node.input if i]
    if not all(i in consts for i in present):
        return None
    values = _evaluate(node, {i: consts[i] for i in present}, opset)
    if values is None or len(values) != len(node.output):
        return None
    if sum(v.nbytes for v in values) > MAX_FOLDED_BYTES:
        return None
    return values


GRAPH, GRAPHS = 5, 10  # onnx.AttributeProto's types of a subgraph attribute (If's branches, Loop's body)


def _names_read(nodes) -> set:
    """The names `nodes` read, with those their If, Loop and Scan bodies read from the scopes around them
    (a branch's weights are outer initializers that no top-level node lists)."""
    names = set()
    for node in nodes:
        names.update(node.input)
        for attr in node.attribute:
            for body in ([attr.g] if attr.type == GRAPH else attr.graphs if attr.type == GRAPHS else []):
                names |= _names_read(body.node) | {o.name for o in body.output}
    return names


def _drop_unused_initializers(model, used: set) -> None:
    """Remove initializers nothing reads (and their entries in graph.input, as older exporters list them)."""
    graph = model.graph
    real_inputs = {i.name for i in graph_inputs(model)}
    unused = [i for i, t in enumerate(graph.initializer) if t.name not in used]
    if not unused:
        return
    for i in reversed(unused):  # in place: copying the kept ones took seconds per round on a large model
        del graph.initializer[i]
    inits = {t.name for t in graph.initializer}
    for value in [v for v in graph.input if v.name not in inits and v.name not in real_inputs]:
        graph.input.remove(value)


# ---- import -------------------------------------------------------------------------------
def import_relax(model, path) -> "tvm.IRModule":  # noqa: F821
    """TVM's ONNX importer; InputError naming the operator it could not convert."""
    import tvm
    from tvm.relax.frontend.onnx import from_onnx

    from ..bridge.execute import stderr_silenced

    error = None
    # TVM logs from C++ when the failed importer is destroyed; keep that off the user's terminal.
    with stderr_silenced():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return from_onnx(model, keep_params_in_input=False)
        except tvm.error.OpNotImplemented as exc:
            ops = _first_line(exc).split(":", 1)[-1].strip()
            error = InputError(f"{path}: TVM's ONNX importer does not support operator(s) {ops}")
            error.detail = traceback.format_exc()
        except Exception as exc:  # noqa: BLE001 - name the node the importer was converting
            node = _failing_node(sys.exc_info()[2])
            where = f"{node.op_type} node '{node.name or node.output[0]}'" if node is not None else "the model"
            error = InputError(f"{path}: TVM's ONNX importer cannot convert {where}: "
                               f"{type(exc).__name__}: {_readable(_first_line(exc))}")
            error.detail = traceback.format_exc()
            node = None
        gc.collect()
    raise error



def _failing_node(tb):
    """The ONNX node TVM's importer was converting when it raised (read from its stack frame)."""
    node = None
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "_construct_nodes" and "node" in frame.f_locals:
            node = frame.f_locals["node"]
        tb = tb.tb_next
    return node


def prepare(path, input_shapes: Mapping[str, Sequence[int]] | None = None, fold: bool = True) -> Prepared:
    """Everything between an ONNX file and a Relax module the optimizer can work on."""
    import onnx

    path = Path(path)
    original = load_onnx(path)
    inputs = pin_input_shapes(original, input_shapes or {})
    model = onnx.ModelProto()
    model.CopyFrom(original)
    legacy_forms.drop_empty_trailing_outputs(model)
    legacy_forms.drop_empty_resize_scales(model)
    model = infer_shapes(model)
    opset = onnx_opset(model)
    if opset <= 6:  # (broadcast=1, axis=k)
        legacy_forms.refuse_axis_broadcast(model, _static_shapes(model), path, opset)
    if any(n.op_type == "ConvTranspose" for n in model.graph.node):  # (an output_shape TVM would ignore)
        from .conv_transpose_shape import explicit_output_shapes

        explicit_output_shapes(model, _static_shapes(model), path)
    folded = 0
    if fold:
        model, folded = fold_constants(model)
    converted = ""
    try:
        upsample = legacy_forms.nearest_upsample(model) if opset < CONVERTED_OPSET else ""
        if upsample:  # (onnx's converter writes it as a Resize TVM reads right: imported that way or refused)
            raise InputError(f"{path}: TVM's importer reads the nearest Upsample node '{upsample}' rounding where "
                             f"ONNX floors (wrong numbers), and the model could not be converted to opset "
                             f"{CONVERTED_OPSET} with onnxruntime confirming the conversion")
        mod = import_relax(model, path)
    except InputError as failed:
        model, mod, converted = _import_converted(model, path, inputs, failed)
    said = []
    if input_shapes:  # (where TVM's importer refuses them, its message names the operator)
        said = [m for m in [runs_at_pinned_sizes(original, inputs, input_shapes)] if m]
    outputs = _output_tensors(model, mod)
    return Prepared(path, original, model, mod, inputs, outputs, folded, converted, said)


def runs_at_pinned_sizes(model, inputs, shapes: Mapping[str, Sequence[int]]) -> str | None:
    """A warning where onnxruntime cannot run the model at the sizes pinned though TVM imported it (a mask
    longer than the tokens it masks: its Gather indexes past a table, which TVM's build reads out of bounds).
    Not an error: the random integers it runs with (0 to 3) can be what it refuses (positions summed from a
    mask of 0s and 1s). Nothing is said where onnxruntime is missing or has no kernel for the model."""
    from .export import onnx_index_bounds, random_onnx_inputs

    try:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 4
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - no onnxruntime, no kernel, a model over protobuf's 2 GB: no verdict
        return None
    try:
        session.run(None, random_onnx_inputs(inputs, bounds=onnx_index_bounds(model)))
    except Exception as exc:  # noqa: BLE001 - onnxruntime's refusal is the user's message
        pins = " ".join(f"{name}:{','.join(map(str, dims))}" for name, dims in shapes.items())
        return (f"onnxruntime cannot run the model at the pinned sizes ({pins}) with random inputs: "
                f"{_first_line(exc)}; if these sizes contradict each other (a mask longer than the tokens it "
                "masks), TVM's build of the model reads out of bounds and computes garbage")
    return None


CONVERTED_OPSET = 13  # where an older model TVM's importer cannot read is converted to (Resize's sizes: 11)


def _import_converted(model, path, inputs, failed: InputError):
    """An old-opset model TVM's importer refused, converted by onnx's version converter and imported again
    (opset 10's Resize, as torch exports it at opset 10, is one TVM reads only in its opset-11 form), once
    onnxruntime finds that the converted model computes what the model does.
    Raises `failed` where the model is not older, or the conversion, that check or the import fails."""
    from onnx import version_converter

    opset = onnx_opset(model)
    if opset >= CONVERTED_OPSET:
        raise failed
    try:
        newer = version_converter.convert_version(model, CONVERTED_OPSET)
        if opset < 11:
            _resize_as_opset_10(newer)
        newer = infer_shapes(newer)
        from .export import check_numerics

        same, diff, _ = check_numerics(model, newer, inputs)
        if not same or diff is None:  # (None: onnxruntime could not run the model, or is not installed)
            raise failed
        mod = import_relax(newer, path)
    except Exception:  # noqa: BLE001 - the original refusal is the one to report
        raise failed from None
    reason = str(failed).split(": ", 1)[-1]
    return newer, mod, f"opset {opset} -> {CONVERTED_OPSET} by onnx's version converter ({reason})"


def _resize_as_opset_10(model) -> None:
    """Opset 10's Resize maps output pixel x to input x / scale (asymmetric; nearest: its floor), opset 11's
    default is half_pixel: onnx's converter leaves the attribute out (a linear Resize then moved a U-Net's
    output by half its magnitude), so it is written in."""
    from onnx import helper

    for node in model.graph.node:
        if node.op_type != "Resize":
            continue
        names = {a.name for a in node.attribute}
        if "coordinate_transformation_mode" not in names:
            node.attribute.append(helper.make_attribute("coordinate_transformation_mode", "asymmetric"))
        if "nearest_mode" not in names:
            node.attribute.append(helper.make_attribute("nearest_mode", "floor"))


def _output_tensors(model, mod) -> list[Tensor]:
    """ONNX output names with the static shapes and dtypes the Relax function returns."""
    from tvm import relax

    ret = mod["main"].ret_ty if hasattr(mod["main"], "ret_ty") else mod["main"].ty.ret
    leaves = list(ret.fields) if isinstance(ret, relax.TupleType) else [ret]
    out = []
    for value, ty in zip(model.graph.output, leaves + [None] * len(model.graph.output)):
        shape, dtype = (), "unknown"
        if isinstance(ty, relax.TensorType) and ty.shape is not None:
            try:
                shape = tuple(int(d) for d in ty.shape.values)
            except TypeError:
                shape = ()
            dtype = str(ty.dtype)
        out.append(Tensor(value.name, shape, dtype))
    return out
