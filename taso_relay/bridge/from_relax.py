"""Relax function (its dataflow blocks) -> Graph plus the Signature to rebuild it.

Parameters become `input` nodes, constants `weight` nodes (value in
Graph.values, the very relax constant in Graph.payloads under the weight's
name), modelled calls graph operators and everything else `opaque` nodes
that keep the original call. A 1-D conv or pool is read as its 2-D operator
over a unit axis (ops_table.LIFTED), and what reads its result on that too.
A function the graph form cannot hold exactly (symbolic shapes, non-tensor
parameters, bindings outside dataflow blocks, match_cast, shape values...)
is refused with `Unsupported`; the public
`graph_from_function` turns that into a one-line warning and None, so the
caller leaves the function unchanged.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple

import tvm
from tvm import relax
from tvm.ir.expr import Constant

from ..graph import Graph, GraphBuilder, GraphError, Ref, TensorType, compact
from ..graph.folding import weight_only
from . import ops_table
from .call_tir import import_call_tir
from .ops_table import Unsupported, tensor_spec
from .records import CallRecord, Export, ExportRef, Signature, is_tensor_leaf, is_value_var, leaves, template_key

CALL_TIR = tvm.ir.Op.get("relax.call_tir")
DROPOUT = tvm.ir.Op.get("relax.nn.dropout")
STACK = tvm.ir.Op.get("relax.stack")
SUM = tvm.ir.Op.get("relax.sum")
MATMUL = tvm.ir.Op.get("relax.matmul")
BROADCAST_TO = tvm.ir.Op.get("relax.broadcast_to")
RESHAPE = tvm.ir.Op.get("relax.reshape")
CONV1D = tvm.ir.Op.get("relax.nn.conv1d")


def _binding_refused(binding) -> str:
    """Why a binding other than `var = value` stops the import, in the user's terms."""
    if isinstance(binding, relax.MatchCast):
        value = binding.value
        of = (f"{value.op.name.removeprefix('relax.')}'s result" if isinstance(value, relax.Call)
              and isinstance(value.op, tvm.ir.Op) else "a value")
        return (f"'{binding.var.name}' gets its shape from a match_cast (of {of}): a shape known only when the "
                "model runs, as after NonZero or Unique; only functions whose shapes are all known ahead are rewritten")
    return f"{type(binding).__name__} binding of '{binding.var.name}'"


class NothingToDo(Unsupported):
    """The function has no bindings at all: nothing to optimize, nothing to warn about."""


class Imported(NamedTuple):
    graph: Graph
    signature: Signature
    folded: str = ""  # how its shape values were folded before it was read (shapes_folded; as FunctionReport.folded)
    one_d: str = ""  # the 1-D calls read as 2-D over a unit axis, "conv1d x3, max_pool1d" (FunctionReport.one_d)


@dataclass(frozen=True)
class Stacked:
    """A stack whose one use sums it over the new axis (ONNX Sum of three or more inputs imports so): no node of
    its own; the sum reads as a chain of adds, in the order the reduction adds them."""

    items: tuple


@dataclass(frozen=True)
class Reshaped:
    """A reshape whose one use reshapes it again (torch.export's Linear on tokens: (B*N, K) @ W, back to
    (B, N, C), then flattened to (B*N, C) for a BatchNorm1d): no node of its own; the second reshape reads
    its input, and is the identity where it restores that input's shape."""

    ref: Ref


@dataclass(frozen=True)
class Batched:
    """A rank-2 value broadcast over the batch axes of the one matmul that reads it as its second operand
    (torch.export's bmm for a Linear on (B, N, K) tokens: the weight broadcast to (B, K, N)): no node of its own;
    the matmul reads the rank-2 value, which it broadcasts over the same axes. Otherwise the broadcast weight
    is a weight of its own, folded ahead, that no rule over a Linear's (K, N) weight matches."""

    ref: Ref


@dataclass(frozen=True)
class TupleVal:
    """A tuple-typed Relax value: items are Refs, TupleVals, or None (an unused batch-norm statistic or dropout
    mask)."""

    items: tuple


def function_name(func, default: str = "main") -> str:
    attrs = func.attrs or {}
    return str(attrs["global_symbol"]) if "global_symbol" in attrs else default


def graph_from_function(func, name: str | None = None, mod=None) -> Imported | None:
    """The graph of `func`, or None with a warning when the function must stay unchanged.

    A function that binds shape values is imported once more with them folded (`shapes_folded`);
    `mod` supplies the PrimFuncs its call_tir calls, which folding may evaluate."""
    name = name or function_name(func)
    reason = None
    for source, how in _as_given_then_folded(func, name, mod):
        try:
            imported = import_function(source, name, mod)
        except NothingToDo:
            return None
        except Unsupported as exc:
            reason = exc  # after folding: what still stands in the way
            continue
        if not how and opaque_of_constants(imported.graph):
            return _constants_folded(func, name, mod, imported) or imported
        return imported._replace(folded=how)
    warnings.warn(f"taso_relay: leaving function '{name}' unchanged: {reason}", stacklevel=2)
    return None


WEIGHT_CALLS_FOLDED = "FoldConstant: weight-only calls"  # Imported.folded where those, not shape values, were folded


def opaque_of_constants(graph: Graph) -> int:
    """Opaque calls computed from weights and constants alone (torch.export's weight standardization as
    instance_norm, a Swin mask built by slice_scatter): FoldConstant evaluates them."""
    flags = weight_only(graph, opaque_folds=True)
    return sum(n.op == "opaque" and flags[i] for i, n in enumerate(graph.nodes))  # (not an input-free arange)


def _constants_folded(func, name: str, mod, imported: Imported) -> Imported | None:
    """`func` imported once its weight-only calls are folded, where that leaves fewer opaque calls: what an
    opaque call computes from weights is no rule's input, and what it folds to is a weight. The numbers do not
    change (FoldConstant computes with TVM what TVM computes at run time); where the search finds nothing, the
    function as given is still what the pass returns."""
    module = _with_prim_funcs(tvm.IRModule({name: func}), mod)
    try:
        from .execute import stderr_silenced

        with stderr_silenced():
            folded = import_function(relax.transform.FoldConstant()(module)[name], name, mod)
    except Exception:  # noqa: BLE001 - folding or reading the folded function failed: as given it stays
        return None
    before = imported.graph.op_counts().get("opaque", 0)
    return folded._replace(folded=WEIGHT_CALLS_FOLDED) if folded.graph.op_counts().get("opaque", 0) < before else None


def _with_prim_funcs(module, mod):
    """`module` with the PrimFuncs of `mod` (what its call_tir calls, which folding may evaluate)."""
    if mod is not None:
        for gvar, other in mod.functions.items():
            if not isinstance(other, relax.Function):
                module[gvar] = other
    return module


def _as_given_then_folded(func, name: str, mod):
    yield func, ""
    folded = shapes_folded(func, name, mod)  # only once the function as given has failed
    if folded is not None:
        yield folded


def shapes_folded(func, name: str, mod=None):
    """`(func with its shape values folded, how)` if it binds shape values; else None.

    TVM's ONNX importer reads the extent of a Gather's axis as `R.shape_of(W)` and
    `R.shape_to_tensor`: every embedding lookup of a PyTorch or transformers export
    (BERT, GPT-2, DistilBERT, T5), and a ViT's head split, bind `R.Shape` values, which
    the graph has no place for. Their shapes are static, and FoldConstant turns them
    into constants (as it does weight-only computations, which the graph leaves alone
    anyway). The numbers do not change; the original function is still what the pass
    returns when it finds nothing to rewrite. The shape arithmetic is evaluated in numpy
    (shape_fold.py) where it can be, which is much faster: FoldConstant builds a kernel for
    every call it folds."""
    bindings = (b for block in getattr(getattr(func, "body", None), "blocks", ()) for b in block.bindings)
    if not isinstance(func, relax.Function) or not any(isinstance(b.var.ty, relax.ShapeType) for b in bindings):
        return None
    from .shape_fold import constant_calls, fold_shape_values

    folded = fold_shape_values(func)
    if folded is not None and not constant_calls(folded):
        return folded, "numpy"
    how = "FoldConstant" if folded is None else "numpy, then FoldConstant"  # (fewer calls left to fold)
    module = _with_prim_funcs(tvm.IRModule({name: func if folded is None else folded}), mod)
    from .execute import stderr_silenced

    try:
        with stderr_silenced():  # TVM's C++ notes on the kernels it builds to fold (e.g. take's "fast mode")
            return relax.transform.FoldConstant()(module)[name], how
    except Exception:  # noqa: BLE001 - folding failed: numpy's fold, or the first reason, stands
        return (folded, "numpy") if folded is not None else None


def import_function(func, name: str = "main", mod=None) -> Imported:
    """Like graph_from_function but raises Unsupported (NothingToDo when there is nothing to convert).

    mod: the module `func` is in, whose PrimFuncs a call_tir may call (call_tir.py)."""
    if not isinstance(func, relax.Function):
        raise Unsupported(f"not a relax function ({type(func).__name__})")
    return _Importer(func, name, mod).run()


class _Importer:
    def __init__(self, func, name: str, mod=None):
        self.func, self.name, self.mod = func, name, mod
        self.builder = GraphBuilder()
        self.env: dict[Any, Any] = {}  # relax Var -> Ref | TupleVal
        self.outputs: dict[Ref, int] = {}
        self.weights: dict[int, Ref] = {}  # constant handle -> weight node
        self.names: set[str] = set()
        self.records: dict[str, list] = {}  # payload key -> [call, leaves, tgi list]
        self.owner: dict[Any, str] = {}  # tuple-typed var -> payload key of the call that made it
        self.uses: dict[Any, list] = {}
        self.squeezed: dict[Ref, Ref] = {}  # a 1-D call's rank-3 result -> the 2-D value it was read from
        self.unsqueezed: dict[Ref, Ref] = {}  # a rank-3 value -> its expand_dims with a unit axis at 2
        self.one_d: dict[str, int] = {}  # the 1-D calls read so, by name

    # ---- driver ---------------------------------------------------------------
    def run(self) -> Imported:
        func, body = self.func, self.func.body
        for binding in (b for block in getattr(body, "blocks", ()) for b in block.bindings):
            if isinstance(binding, relax.MatchCast):  # (pinning sizes would not help: said before them)
                raise Unsupported(_binding_refused(binding))
        params = self._params()
        if not isinstance(body, relax.SeqExpr):
            raise Unsupported("body is not a sequence of binding blocks")
        bindings = [b for block in body.blocks for b in block.bindings]
        if not bindings:
            raise NothingToDo("no bindings")
        outside = [b for block in body.blocks if not isinstance(block, relax.DataflowBlock) for b in block.bindings]
        if any(isinstance(getattr(b, "value", None), relax.If) for b in outside):
            raise Unsupported("control flow (an If: the model's ONNX If, or a scripted `if`); only functions "
                              "without branches are rewritten")
        if outside:
            raise Unsupported("bindings outside a dataflow block")
        self._count_uses(bindings, body.body)
        exports: list[Export] = []
        export_of: dict[Any, int] = {}
        for binding in bindings:
            if not isinstance(binding, relax.VarBinding):
                raise Unsupported(_binding_refused(binding))
            self._bind(binding.var, binding.value)
            if not isinstance(binding.var, relax.DataflowVar):
                export_of[binding.var] = len(exports)
                direct = isinstance(binding.value, (relax.Call, relax.TupleGetItem))
                exports.append(Export(self._structure(self.env[binding.var]), direct))
        result = self._result(body.body, export_of)
        for key, (call, leaf_arity, tgi) in self.records.items():
            self.builder.payloads[key] = CallRecord(call, tuple(leaf_arity), tuple(tgi))
        outputs = sorted(self.outputs, key=self.outputs.get)
        graph = self.builder.build(outputs)
        if self.squeezed:  # (a 2-D value read on by the next call leaves its squeeze to rank 3 unused)
            graph = compact(graph.nodes, graph.outputs, graph.values, graph.payloads)
        attrs = dict(func.attrs) if func.attrs is not None else {}
        signature = Signature(self.name, tuple(func.params), tuple(params), tuple(exports), result, attrs,
                              bool(func.is_pure))
        one_d = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in sorted(self.one_d.items()))
        return Imported(graph, signature, one_d=one_d)

    def _params(self) -> list[str]:
        names = []
        for p in self.func.params:
            if not isinstance(p.ty, relax.TensorType):
                raise Unsupported(f"parameter '{p.name}' is not a tensor ({p.ty})")
            try:
                shape, dtype = tensor_spec(p.ty)
            except Unsupported as exc:
                raise _all_symbols_named(exc, self.func) from None
            name = self._unique(p.name or "input")
            self.env[p] = self.builder.input(name, shape, dtype)
            names.append(name)
        return names

    def _unique(self, base: str) -> str:
        name, k = base, 0
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def _count_uses(self, bindings, result) -> None:
        def visit(expr, user):
            if is_value_var(expr):
                self.uses.setdefault(expr, []).append(user)
            elif isinstance(expr, relax.Tuple):
                for f in expr.fields:
                    visit(f, user)
            elif isinstance(expr, relax.TupleGetItem):
                visit(expr.tuple_value, user)
            elif isinstance(expr, relax.Call):
                visit(expr.op, user)
                for a in expr.args:
                    visit(a, user)
        for b in bindings:
            visit(b.value, b)
        visit(result, None)

    # ---- one binding ----------------------------------------------------------
    def _bind(self, var, value) -> None:
        if not isinstance(var.ty, (relax.TensorType, relax.TupleType)):
            raise Unsupported(f"'{var.name}' is not a tensor or tuple ({var.ty})")
        if isinstance(value, relax.Call):
            self.env[var] = self._call(var, value)
        elif isinstance(value, relax.TupleGetItem):
            self.env[var] = self._item(var, value)
        elif isinstance(value, (relax.Tuple, Constant)) or is_value_var(value):
            self.env[var] = self._value(value)
        else:
            raise Unsupported(f"'{var.name}' is bound to a {type(value).__name__}")

    def _value(self, expr):
        """The graph value of a variable, constant or tuple expression."""
        if isinstance(expr, Constant):
            return self._weight(expr)
        if isinstance(expr, relax.Tuple):
            return TupleVal(tuple(self._value(f) for f in expr.fields))
        if is_value_var(expr) and expr in self.env:
            return self.env[expr]
        raise Unsupported(f"cannot read {type(expr).__name__} '{expr}'")

    def _weight(self, const) -> Ref:
        handle = const.__chandle__()
        if handle not in self.weights:
            shape, dtype = tensor_spec(const.ty)
            name = self._unique(f"const{len(self.weights)}")
            self.weights[handle] = self.builder.weight(name, shape, dtype, value=const.value.numpy())
            self.builder.payloads[name] = const
        return self.weights[handle]

    def _item(self, var, tgi):
        source = tgi.tuple_value
        if not is_value_var(source) or not isinstance(self.env.get(source), TupleVal):
            raise Unsupported(f"'{var.name}' indexes a value that is not a known tuple")
        if source in self.owner:
            self.records[self.owner[source]][2].append(int(tgi.index))
        item = self.env[source].items[int(tgi.index)]
        if item is None and self.uses.get(var):
            raise Unsupported(f"'{var.name}' uses a batch-norm statistic or a dropout mask")  # see _tail_items_used
        return item

    def _call(self, var, call):
        if call.op.same_as(DROPOUT) and isinstance(var, relax.DataflowVar) and not self._tail_items_used(var):
            # TVM legalizes dropout to its input (inference); read opaque it would block every rewrite across it
            data = self._value(call.args[0])
            if isinstance(data, Ref):
                return TupleVal((data, None))
        if call.op.same_as(BROADCAST_TO) and _same_type(call.args[0], call):
            return self._value(call.args[0])  # the identity (ONNX Sum, Max, Mean and Expand import with one)
        if call.op.same_as(BROADCAST_TO) and self._batched_operand(var, call):
            return Batched(self._value(call.args[0]))
        if call.op.same_as(RESHAPE):
            reading = self._reshape_chain(var, call)
            if reading is not None:
                return reading
        if call.op.same_as(STACK) and self._summed_away(var, call):
            return Stacked(tuple(self._value(f) for f in call.args[0].fields))
        if call.op.same_as(SUM) and is_value_var(call.args[0]) and isinstance(self.env.get(call.args[0]), Stacked):
            return self._add_chain(self.env[call.args[0]].items)
        try:
            return self._modelled(var, call)
        except (Unsupported, GraphError):
            return self._opaque(var, call)

    def _summed_away(self, var, call) -> bool:
        """Whether `var = stack(...)` is used once, by a sum over the stacked axis that drops it."""
        total = self._one_use(var, SUM)
        if not (total is not None and total.args[0].same_as(var)
                and total.attrs.axis is not None and not bool(total.attrs.keepdims)
                and isinstance(call.args[0], relax.Tuple)):
            return False
        try:
            axis, rank = ops_table.stack_axis(call), len(ops_table.static_shape(call.ty))
            fields = [self._value(f) for f in call.args[0].fields]
        except Unsupported:
            return False
        return [int(a) % rank for a in total.attrs.axis] == [axis] and all(isinstance(f, Ref) for f in fields)

    def _batched_operand(self, var, call) -> bool:
        """Whether `var = broadcast_to(w, (*batch, K, N))` of a rank-2 w is used once, as the second operand of a
        matmul whose first has exactly those batch axes (the matmul of w broadcasts it so)."""
        product = self._one_use(var, MATMUL)
        if product is None or not product.args[1].same_as(var) or product.args[0].same_as(var):
            return False
        try:
            w, out, x = (ops_table.static_shape(e.ty) for e in (call.args[0], call, product.args[0]))
            value = self._value(call.args[0])
        except Unsupported:
            return False
        return len(w) == 2 and len(out) == len(x) >= 3 and out[-2:] == w and out[:-2] == x[:-2] and \
            isinstance(value, Ref)

    def _reshaped_again(self, var) -> bool:
        """Whether the dataflow value `var` is used once, as the data of another reshape."""
        value = self._one_use(var, RESHAPE)
        return value is not None and value.args[0].same_as(var)

    def _one_use(self, var, op):
        """The call of `op` that is the one use of the dataflow value `var`; None where it has another use or
        none: a value read without a node of its own (Stacked, Reshaped, Batched) must have no other reader."""
        users = self.uses.get(var, [])
        if not isinstance(var, relax.DataflowVar) or len(users) != 1 or users[0] is None:
            return None
        value = users[0].value
        return value if isinstance(value, relax.Call) and value.op.same_as(op) else None

    def _reshape_chain(self, var, call):
        """A reshape of a deferred reshape read from the first one's input (one reshape, or none where the shape
        comes back); deferred (`Reshaped`) where its one use reshapes it again. None: read as any call."""
        try:
            value = self._value(call.args[0])
        except Unsupported:
            return None
        base = value.ref if isinstance(value, Reshaped) else value  # (a reshape node used elsewhere stays)
        if not isinstance(base, Ref):
            return None
        if self._reshaped_again(var):
            return Reshaped(base)
        return self._reshape_of(base, call) if base != value else None

    def _reshape_of(self, ref: Ref, call) -> Ref:
        """`call` (a reshape) applied to `ref`, the input of the reshape it reshapes again."""
        shape = ops_table.static_shape(call.ty)
        if tuple(self.builder.type_of(ref).shape) == shape:
            return ref
        self.builder.add("reshape", [ref], shape=shape)
        return Ref(len(self.builder.nodes) - 1, 0)

    def _add_chain(self, items) -> Ref:
        total = items[0]
        for item in items[1:]:
            self.builder.add("add", [total, item])
            total = Ref(len(self.builder.nodes) - 1, 0)
        return total

    def _modelled(self, var, call):
        if call.op.same_as(CALL_TIR) and self.mod is not None:
            op, attrs, args = import_call_tir(call, self.mod)
        else:
            op, attrs, args = ops_table.import_call(call)
        if op == ops_table.CHAIN:
            return self._program(call, [(o, a, (k,)) for k, (o, a) in enumerate(attrs["steps"])], args)
        if op == ops_table.PROGRAM:
            return self._program(call, attrs["steps"], args)
        if op == "batch_norm" and self._tail_items_used(var):
            raise Unsupported("batch_norm whose running statistics are used")
        if op == ops_table.LIFTED:
            return self._lifted(call, op, attrs, args)
        if self._on_unit_axis(var, op, attrs, args):
            try:
                return self._lifted(call, op, attrs, args)
            except (Unsupported, GraphError):
                pass  # (read as it is written)
        inputs = []
        for a in args:
            value = self._value(a)
            if isinstance(value, Batched):  # (its one use: this matmul's second operand)
                value = value.ref
            if op == "concat" and isinstance(value, TupleVal) and all(isinstance(v, Ref) for v in value.items):
                inputs.extend(value.items)  # concat of a tuple variable
                continue
            if not isinstance(value, Ref):
                raise Unsupported(f"{op} takes a tuple argument")
            inputs.append(value)
        node = self.builder.add(op, inputs, **attrs)
        index = len(self.builder.nodes) - 1
        expected = _result_types(call.ty)
        if op == "batch_norm":
            expected = expected[:1]
        if list(node.types) != expected:
            self.builder.nodes.pop()
            raise Unsupported(f"{op}: graph type {list(map(str, node.types))} != relax type {call.ty}")
        key = template_key(node.op, node.attrs, [self.builder.type_of(r) for r in inputs])
        # A call_tir read as a graph op is no template: it names a PrimFunc of this module, which the
        # kernels the cost models build alone do not have; the op's own Relax call legalizes to it.
        if (key not in self.records and not call.op.same_as(CALL_TIR)
                and len(list(leaves(call.args, is_tensor_leaf))) == len(inputs)):
            self.records[key] = [call, [None] * len(inputs), []]
        if isinstance(call.ty, relax.TupleType):
            if key in self.records and self.records[key][0].same_as(call):
                self.owner[var] = key
            items = [Ref(index, k) for k in range(len(node.types))]
            items += [None] * (len(call.ty.fields) - len(items))
            return TupleVal(tuple(items))
        return Ref(index, 0)

    # ---- 1-D calls read as 2-D (ops_table.LIFTED) -----------------------------------------
    def _on_unit_axis(self, var, op, attrs, args) -> bool:
        """Whether an element-wise call, a batch norm over axis 1, a split, a concat or a pad reads a rank-3 value
        that a 1-D call read as 2-D made: it is read on the 2-D value too, so that a conv1d and the batch norm
        after it are one conv2d and its batch norm to the rules, not two ops with a squeeze between them. A pad
        whose one use is a conv1d is read so too (a causal conv's left pad, which then folds into the conv)."""
        try:
            values = [self._value(a) for a in args]
        except Unsupported:
            return False
        if not values or not all(isinstance(v, Ref) for v in values):
            return False
        ranks = [len(self.builder.type_of(v).shape) for v in values]
        if op in _ELEMENTWISE_UNARY or (op == "batch_norm" and attrs["axis"] % 3 == 1) or op == "split":
            return ranks[0] == 3 and values[0] in self.squeezed
        if op == "concat":
            return set(ranks) == {3} and any(v in self.squeezed for v in values)
        if op == "pad":
            conv = self._one_use(var, CONV1D)
            return ranks[0] == 3 and (values[0] in self.squeezed or conv is not None and conv.args[0].same_as(var))
        return op in _ELEMENTWISE_BINARY and max(ranks) == 3 and any(v in self.squeezed for v in values)

    def _lifted(self, call, op, attrs, args):
        """`call` read on its inputs with a unit axis inserted at 2, its results with it removed again."""
        refs = [self._value(a) for a in args]
        if not all(isinstance(r, Ref) for r in refs):
            raise Unsupported(f"{op} takes a tuple argument")
        one_d = (attrs.get("name") or call.op.name.removeprefix("relax.nn.")) if op == ops_table.LIFTED else ""
        if one_d:
            op, attrs, lift = attrs["op"], attrs["attrs"], refs
        else:
            lift = refs if op in _ELEMENTWISE_BINARY or op == "concat" else refs[:1]
            if op in ("split", "concat"):
                attrs = {**attrs, "axis": attrs["axis"] % 3 + (attrs["axis"] % 3 == 2)}
            elif op == "batch_norm":
                attrs = {**attrs, "axis": 1}  # (-2 on rank 3 is 2 on rank 4)
            elif op == "pad":
                widths = tuple(attrs["pad_width"])
                attrs = {**attrs, "pad_width": widths[:4] + (0, 0) + widths[4:]}
        first = len(self.builder.nodes)
        try:
            inputs = [self._with_unit_axis(r) if r in lift else r for r in refs]
            node = self.builder.add(op, inputs, **attrs)
            index = len(self.builder.nodes) - 1
            items = [self._without_unit_axis(Ref(index, k)) for k in range(len(node.types))]
            expected = _result_types(call.ty)[:len(items)]
            if [self.builder.type_of(r) for r in items] != expected:
                raise Unsupported(f"{op} read on a unit axis: not the relax type {call.ty}")
        except (Unsupported, GraphError):
            del self.builder.nodes[first:]
            self._forget(first)
            raise
        if one_d:
            self.one_d[one_d] = self.one_d.get(one_d, 0) + 1
        if isinstance(call.ty, relax.TupleType):
            return TupleVal(tuple(items) + (None,) * (len(call.ty.fields) - len(items)))
        return items[0]

    def _with_unit_axis(self, ref: Ref) -> Ref:
        """`ref` (rank 3 or less, broadcast as rank 3) with a unit axis at 2: the 2-D value it was read from,
        or one expand_dims of it (one per value, whichever calls read it so; a scalar broadcasts as it is).
        expand_dims and squeeze, not reshapes: they write no sizes, which a symbolic length would need read
        back (bridge/symbolic_sizes.py), and a length 1 at the stand-ins would not be."""
        rank = len(self.builder.type_of(ref).shape)
        if ref in self.squeezed or rank == 0:
            return self.squeezed.get(ref, ref)
        if ref not in self.unsqueezed:
            self.builder.add("expand_dims", [ref], axes=tuple(range(3 - rank)) + (2,))
            self.unsqueezed[ref] = Ref(len(self.builder.nodes) - 1, 0)
        return self.unsqueezed[ref]

    def _without_unit_axis(self, ref: Ref) -> Ref:
        shape = tuple(self.builder.type_of(ref).shape)
        if len(shape) != 4 or shape[2] != 1:
            raise Unsupported(f"a 1-D call read as 2-D gave {shape}, not a unit axis at 2")
        self.builder.add("squeeze", [ref], axes=(2,))
        squeezed = Ref(len(self.builder.nodes) - 1, 0)
        self.squeezed[squeezed] = ref
        return squeezed

    def _forget(self, first: int) -> None:
        """Drop the memos of nodes from `first` on (a reading given up, its nodes removed)."""
        for memo in (self.squeezed, self.unsqueezed):
            for key in [k for k, v in memo.items() if k.node >= first or v.node >= first]:
                del memo[key]

    def _program(self, call, steps, args):
        """A call read as several graph ops (ops_table.CHAIN, ops_table.PROGRAM); no template, as none is
        one call."""
        refs = [self._value(a) for a in args]
        if not all(isinstance(r, Ref) for r in refs):
            raise Unsupported(f"{call.op.name} takes a tuple argument")
        first = len(self.builder.nodes)
        try:
            for op, attrs, inputs in steps:
                self.builder.add(op, [refs[k] for k in inputs], **attrs)
                refs.append(Ref(len(self.builder.nodes) - 1, 0))
            types = list(self.builder.nodes[-1].types)
            if types != _result_types(call.ty):
                raise Unsupported(f"{call.op.name}: graph type {list(map(str, types))} != relax type {call.ty}")
        except BaseException:
            del self.builder.nodes[first:]  # no half-read call left behind
            raise
        return refs[-1]

    def _tail_items_used(self, var) -> bool:
        """Whether anything but item 0 of the tuple `var` (batch norm's statistics, dropout's mask) is used."""
        for user in self.uses.get(var, []):
            value = getattr(user, "value", None)
            if not isinstance(value, relax.TupleGetItem):
                return True
            if int(value.index) != 0 and (self.uses.get(user.var) or not isinstance(user.var, relax.DataflowVar)):
                return True  # used, or bound as an output of the dataflow block
        return False

    def _opaque(self, var, call):
        if is_value_var(call.op):
            raise Unsupported(f"'{var.name}' calls a local function value")
        inputs, arity = [], []
        for leaf in leaves(call.args, is_value_var):
            value = self._value(leaf)
            if isinstance(value, Ref):
                inputs.append(value)
                arity.append(None)
            elif all(isinstance(v, Ref) for v in value.items):
                inputs.extend(value.items)
                arity.append(len(value.items))
            else:
                raise Unsupported(f"'{var.name}': nested tuple argument of an opaque call")
        types = _result_types(call.ty)
        key = f"opaque{len(self.records)}:{var.name}"
        label = getattr(call.op, "name", None) or getattr(call.op, "name_hint", None) or type(call.op).__name__
        refs = self.builder.opaque(inputs, types, None, key, label=str(label))
        self.records[key] = [call, arity, []]
        if isinstance(call.ty, relax.TupleType):
            self.owner[var] = key
            return TupleVal(tuple(refs))
        return refs[0]

    # ---- outputs ----------------------------------------------------------------
    def _structure(self, value):
        if isinstance(value, Ref):
            if value not in self.outputs:
                self.outputs[value] = len(self.outputs)
            return self.outputs[value]
        if isinstance(value, TupleVal):
            return tuple(self._structure(v) for v in value.items)
        raise Unsupported("a batch-norm statistic or dropout mask leaves the dataflow block")

    def _result(self, expr, export_of):
        if is_value_var(expr) and expr in export_of:
            return ExportRef(export_of[expr])
        if isinstance(expr, relax.Tuple):
            return tuple(self._result(f, export_of) for f in expr.fields)
        return self._structure(self._value(expr))


def _all_symbols_named(exc: Unsupported, func) -> Unsupported:
    """A parameter's symbolic dimension refused, the pinning hint naming every symbol the parameters define
    (not one per try: a batch, then a sequence)."""
    syms = list(relax.analysis.defined_symbolic_vars(func))
    message = str(exc)
    if len(syms) < 2 or "BindSymbolicVars(" not in message:
        return exc
    every = syms[0]
    for v in syms[1:]:
        every = every * v
    head, _, tail = message.partition("BindSymbolicVars(")
    return Unsupported(f"{head}BindSymbolicVars({ops_table.pin_example(every)}{tail[tail.index(')'):]}")


_ELEMENTWISE_UNARY = frozenset(ops_table.UNARY_RELAX) | {"clip", "leaky_relu"}
_ELEMENTWISE_BINARY = frozenset(ops_table.BINARY_RELAX)


def _same_type(a, b) -> bool:
    """Whether two tensor expressions have one static shape and dtype."""
    try:
        return _result_types(a.ty) == _result_types(b.ty)
    except Unsupported:
        return False


def _result_types(ty) -> list[TensorType]:
    """Tensor types of a call's result: one tensor, or a flat tuple of tensors."""
    if isinstance(ty, relax.TensorType):
        return [TensorType(*tensor_spec(ty))]
    if isinstance(ty, relax.TupleType):
        if not all(isinstance(f, relax.TensorType) for f in ty.fields):
            raise Unsupported(f"nested or non-tensor tuple result {ty}")
        return [TensorType(*tensor_spec(f)) for f in ty.fields]
    raise Unsupported(f"result of type {ty} is not a tensor")
