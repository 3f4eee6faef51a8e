"""A call_tir read as the graph op it is: TVM's ONNX importer writes some operators as call_tir
of a topi function (emit_te) instead of a Relax operator. Where the called PrimFunc is structurally
equal to the one topi makes for the same arguments, the graph op (or ops) computing the same is read;
any other call_tir stays opaque."""
from __future__ import annotations

import itertools

import numpy as np
from tvm import relax
from tvm_ffi import structural_equal

from . import einsum
from .ops_table import PROGRAM, Reading, Unsupported, dtype_of, static_shape

NOT_TOPI = "a call_tir that is not one of topi's maximum, minimum, einsum, tile, pad or resize1d"


def import_call_tir(call, mod) -> Reading:
    """A call_tir whose PrimFunc is exactly one of topi's, for the argument shapes, as the graph op
    computing the same: maximum or minimum of two arguments or of one and a float (TVM's ONNX importer
    emits Clip that way: ReLU6 in every MobileNetV2), a tile that only repeats dimensions of size 1, which is a
    broadcast_to (ONNX Tile from PyTorch's repeat_interleave: grouped-query attention's K and V),
    or a constant pad (ONNX Pad: Swin's window padding), or an einsum of two operands that is a
    matmul (ONNX Einsum: MaxViT's attention; bridge/einsum.py). The PrimFunc is compared structurally
    with topi's own, so nothing else passes."""
    prim, args = _callee(call, mod)
    reading = None
    if len(args) == 2:
        reading = _as_binary(call, prim, args) or _as_einsum(call, prim, args)
    elif len(args) == 1:
        reading = _as_broadcast(call, prim, args[0]) or _as_pad(call, prim, args[0]) or \
            _as_mirror_pad(call, prim, args[0]) or _as_resize1d(call, prim, args[0]) or \
            _as_scalar_bound(call, prim, args[0])
    if reading is None:
        raise Unsupported(NOT_TOPI)
    return reading


def _callee(call, mod):
    """(the PrimFunc a call_tir calls, its tensor arguments), or Unsupported."""
    callee, args = call.args[0], call.args[1] if len(call.args) == 2 else None
    if (mod is None or not isinstance(args, relax.Tuple) or callee not in mod.functions
            or not isinstance(call.ty, relax.TensorType)):
        raise Unsupported(NOT_TOPI)
    return mod[callee], list(args.fields)


def _as_binary(call, prim, args) -> Reading | None:
    shapes = [static_shape(a.ty) for a in args]
    try:
        broadcast = np.broadcast_shapes(*shapes)
    except ValueError:
        return None
    if static_shape(call.ty) != tuple(broadcast):
        return None
    from tvm import topi

    for name, fn in (("maximum", topi.maximum), ("minimum", topi.minimum)):
        try:
            reference = _emitted(fn, [a.ty for a in args])
        except Exception:  # noqa: BLE001 - arguments topi cannot combine (mixed dtypes, ...): not these operators
            return None
        if structural_equal(prim, reference):
            return name, {}, list(args)
    return None


def _as_scalar_bound(call, prim, arg) -> Reading | None:
    """topi.maximum or minimum of a tensor and a float: TVM's importer writes an opset-6 Clip (min and max
    as attributes: ReLU6 in the ONNX model zoo's MobileNets) so. Read as the graph op with the bound a scalar
    weight; the bound is one of the PrimFunc's float literals, and topi's PrimFunc for it must be the same."""
    if static_shape(call.ty) != static_shape(arg.ty) or dtype_of(arg.ty) not in ("float16", "float32", "float64"):
        return None
    from tvm import topi

    for bound in sorted(_float_constants(prim)):
        for name, fn in (("maximum", topi.maximum), ("minimum", topi.minimum)):
            if structural_equal(prim, _emitted(fn, [arg.ty], bound)):
                return name, {}, [arg, relax.const(np.asarray(bound, dtype_of(arg.ty)))]
    return None


def _as_einsum(call, prim, args) -> Reading | None:
    """topi.einsum: the equation is read off the PrimFunc's one block (what it reads and writes, at
    which iteration variables), then the PrimFunc topi makes of that equation must be the same."""
    equation = _einsum_equation(prim)
    if equation is None:
        return None
    shapes = [static_shape(a.ty) for a in args]
    steps = einsum.plan(equation, *shapes)
    if steps is None:
        return None
    try:
        reference = _emitted(_topi_einsum, [a.ty for a in args], equation)
    except Exception:  # noqa: BLE001 - an equation or arguments topi refuses: not this einsum
        return None
    if not structural_equal(prim, reference):
        return None
    return PROGRAM, {"steps": tuple(steps)}, list(args)


def _einsum_equation(prim) -> str | None:
    """'ab,cb->ca' from the block `T_einsum` of a PrimFunc of two inputs, or None. Letters follow the
    block's iteration variables (output axes, then the summed ones in topi's loop order), so the
    equation rebuilt nests its loops as the PrimFunc does."""
    import re

    text = prim.script()
    reads = re.findall(r"T\.reads\((.*)\)", text)
    writes = re.findall(r"T\.writes\(T_einsum\[(.*)\]\)", text)
    iters = re.findall(r"^\s*(.*?) = T\.axis\.remap\(", text, re.MULTILINE)
    if len(reads) != 1 or len(writes) != 1 or len(iters) != 1 or text.count('T.sblock("T_einsum")') != 1:
        return None
    operands = re.findall(r"\w+\[([^\]]*)\]", reads[0])
    names = [n.strip() for n in iters[0].split(",") if n.strip()]
    if len(operands) != 2 or len(names) > 52:
        return None
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    letters = {n: alphabet[k] for k, n in enumerate(names)}
    parts = []
    for indices in operands + writes:
        used = [i.strip() for i in indices.split(",") if i.strip() and i.strip() != "()"]
        if not all(n in letters for n in used):
            return None  # an index that is not an iteration variable (a broadcast dimension)
        parts.append("".join(letters[n] for n in used))
    return f"{parts[0]},{parts[1]}->{parts[2]}"


def _topi_einsum(a, b, equation):
    from tvm import topi

    return topi.einsum(equation, a, b)


def _as_broadcast(call, prim, arg) -> Reading | None:
    shape, out = static_shape(arg.ty), static_shape(call.ty)
    padded = (1,) * (len(out) - len(shape)) + shape
    if len(out) < len(shape) or any(o % i for o, i in zip(out, padded) if i):
        return None
    reps = [o // i if i else 1 for o, i in zip(out, padded)]
    if any(r != 1 and i != 1 for r, i in zip(reps, padded)):
        return None  # a real tile (copies of a whole dimension): not modelled
    from tvm import topi

    try:
        reference = _emitted(topi.tile, [arg.ty], reps)
    except Exception:  # noqa: BLE001 - an argument topi's tile cannot take: not a tile
        return None
    if not structural_equal(prim, reference):
        return None
    return "broadcast_to", {"shape": out}, [arg]


def _as_resize1d(call, prim, arg) -> Reading | None:
    """topi.image.resize1d, as TVM's ONNX importer writes a Resize of (N, C, L) (a 1-D U-Net's upsampling):
    read as resize2d over a unit axis (ops_table.LIFTED: H stays 1, exactly), for the methods and coordinate
    modes graph/ops/resize.py computes but align_corners (which divides by zero on a unit axis); which one is
    read by comparing the PrimFunc with topi's for each, where the PrimFunc is named so."""
    from tvm import topi

    from ..graph.ops.resize import COORDINATES, METHODS, ROUNDINGS
    from .ops_table import FLOAT_DTYPES, LIFTED

    shape, out = static_shape(arg.ty), static_shape(call.ty)
    if (not getattr(call.args[0], "name_hint", "").startswith("resize1d") or len(shape) != 3
            or out[:2] != shape[:2] or dtype_of(arg.ty) not in FLOAT_DTYPES):
        return None
    for method, coordinates in itertools.product(METHODS, COORDINATES):
        for rounding in ROUNDINGS if method == "nearest_neighbor" else ("",):
            if coordinates == "align_corners":
                continue
            try:
                reference = _emitted(topi.image.resize1d, [arg.ty], [0.0, 0.0], [out[2]], "NCW", method,
                                     coordinates, rounding, -0.75, 0, 0.0)
            except Exception:  # noqa: BLE001 - a combination topi refuses: not this one
                continue
            if structural_equal(prim, reference):
                attrs = {"size": (1, out[2]), "layout": "NCHW", "method": method, "coordinates": coordinates,
                         "rounding": rounding}
                return LIFTED, {"op": "resize2d", "attrs": attrs, "name": "resize1d"}, [arg]
    return None


PAD_CANDIDATES = 256  # splits of the added size into before/after tried, at most (a pad adds a few rows)


def _as_pad(call, prim, arg) -> Reading | None:
    """topi.nn.pad: the shapes give each axis's added size, not how it splits into before and after,
    nor the value; the splits are tried (few: pads are small) with the float constants of the body."""
    from tvm import topi

    values = sorted({0.0} | _float_constants(prim))
    for before, after in _pad_splits(static_shape(arg.ty), static_shape(call.ty)):
        for value in values:
            try:
                reference = _emitted(topi.nn.pad, [arg.ty], before, after, value)
            except Exception:  # noqa: BLE001 - an argument topi's pad cannot take (dtype, ...): not a pad
                return None
            if structural_equal(prim, reference):
                widths = [w for pair in zip(before, after) for w in pair]
                return "pad", {"pad_width": tuple(widths), "value": float(value)}, [arg]
    return None


def _pad_splits(shape, out):
    """(before, after) per axis that pad `shape` to `out`: every split, or none if there are too many."""
    if len(out) != len(shape) or any(o < i for o, i in zip(out, shape)):
        return
    added = [o - i for o, i in zip(out, shape)]
    if int(np.prod([a + 1 for a in added])) > PAD_CANDIDATES:
        return
    for before in itertools.product(*(range(a + 1) for a in added)):
        yield list(before), [a - b for a, b in zip(added, before)]


def _as_mirror_pad(call, prim, arg) -> Reading | None:
    """topi's mirror_pad (REFLECT) or replicate_pad, which TVM's importer writes for ONNX Pad's reflect and
    edge modes (ReflectionPad2d, ReplicationPad2d), as graph/ops' mirror_pad; the splits are tried as for a pad."""
    found = _mirror_pad_found(prim, arg, call)
    if found is None:
        return None
    mode, before, after = found
    return "mirror_pad", {"pad_width": tuple(w for pair in zip(before, after) for w in pair), "mode": mode}, [arg]


def _mirror_pad_found(prim, arg, call):
    """(mode, before, after) of a call_tir of topi's mirror_pad (REFLECT: numpy's reflect) or replicate_pad
    (numpy's edge), or None."""
    from tvm import topi

    try:
        shape, out = static_shape(arg.ty), static_shape(call.ty)
    except Unsupported:
        return None
    for mode, fn, extra in (("reflect", topi.nn.mirror_pad, ("REFLECT",)), ("edge", topi.nn.replicate_pad, ())):
        for before, after in _pad_splits(shape, out):
            try:
                if structural_equal(prim, _emitted(fn, [arg.ty], before, after, *extra)):
                    return mode, before, after
            except Exception:  # noqa: BLE001 - arguments topi refuses (a reflect wider than the input): not this one
                continue
    return None


def describe_opaque(call, mod) -> tuple[str, dict] | None:
    """What an opaque call_tir computes, where it is one of topi's functions the graph does not model
    but ONNX has (for the exporter): ("mirror_pad" | "replicate_pad", {"before", "after"}) from ONNX
    Pad's reflect and edge modes (where the graph could not take it as a mirror_pad), or ("tile",
    {"reps"}) for a tile that copies whole axes."""
    from tvm import topi

    try:
        prim, args = _callee(call, mod)
        if len(args) != 1:
            return None
        arg = args[0]
        shape, out = static_shape(arg.ty), static_shape(call.ty)
    except Unsupported:
        return None
    mirrored = _mirror_pad_found(prim, arg, call)
    if mirrored is not None:
        mode, before, after = mirrored
        return {"reflect": "mirror_pad", "edge": "replicate_pad"}[mode], {"before": before, "after": after}
    if len(out) == len(shape) and all(i and o % i == 0 for o, i in zip(out, shape)):
        reps = [o // i for o, i in zip(out, shape)]
        try:
            if structural_equal(prim, _emitted(topi.tile, [arg.ty], reps)):
                return "tile", {"reps": reps}
        except Exception:  # noqa: BLE001 - not this function
            return None
    return None


def _emitted(fn, types, *args):
    """The PrimFunc Relax's BlockBuilder makes of topi's `fn` on arguments of these types, as TVM's
    importer makes it (emit_te; te.create_prim_func's index types differ), built once per call."""
    key = (fn.__name__, tuple(str(t) for t in types), repr(args))
    if key not in _TOPI_CACHE:
        bb = relax.BlockBuilder()
        xs = [relax.Var(f"x{k}", t) for k, t in enumerate(types)]
        with bb.function("main", xs):
            bb.emit_func_output(bb.emit_te(fn, *xs, *args))
        mod = bb.get()
        _TOPI_CACHE[key] = next(mod[gv] for gv in mod.functions if gv.name_hint != "main")
    return _TOPI_CACHE[key]


def _float_constants(prim) -> set[float]:
    """The float literals of a PrimFunc, read off its script (a guess at the pad value: what is read
    is then compared structurally, so a wrong guess only misses)."""
    import re

    found = set()
    for text in re.findall(r"T\.float(?:16|32|64)\(([^()]*)\)", prim.script()):
        try:
            found.add(float(text))
        except ValueError:
            continue
    return found


_TOPI_CACHE: dict = {}  # topi's PrimFuncs by function, argument types and arguments
