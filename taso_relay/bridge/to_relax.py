"""Graph -> Relax function, through relax.BlockBuilder.

With the Signature of an import, the function gets the very parameter
variables, attributes and result structure of the original, opaque calls
come back verbatim and unchanged modelled calls reuse their recorded Relax
attributes, so an untouched graph round-trips to a structurally equal
function. Without one (any subgraph, e.g. a single kernel for the cost
model) parameters are made from the graph's inputs and the outputs are
returned as one tensor or a tuple.
"""
from __future__ import annotations

from typing import Any, Sequence

import tvm
from tvm import relax

from ..graph import Graph, Ref, weight_only
from ..graph.interpreter import fold_weights as fold_constants
from . import ops_table
from .records import (CallRecord, ExportRef, Signature, group_args, is_tensor_leaf, recall, recall_opaque,
                      template_key)


def function_from_graph(graph: Graph, name: str = "main", signature: Signature | None = None, *,
                        weights_as_params: bool = False, fold_weights: bool = False) -> relax.Function:
    """A relax.Function computing `graph`.

    signature: from `graph_from_function`; reuses the original parameters and result shape.
    weights_as_params: make every weight a parameter (after the inputs) instead of a constant,
    e.g. so that a measured kernel does not get its weights folded away; weights without a
    value are always parameters.
    fold_weights: emit what is computed from weights alone (a batch norm folded into a conv's
    kernel and bias) as constants computed here, not as calls for FoldConstant, which
    builds a TVM kernel for each (minutes on a large model). Not for round-trips: an
    untouched graph then no longer gives back a structurally equal function.
    """
    bb = relax.BlockBuilder()
    if signature is not None:
        params = list(signature.params)
        feeds = dict(zip(signature.input_names, params))
        attrs, private = dict(signature.attrs), True  # attrs carry global_symbol when there was one
    else:
        params, feeds = _fresh_params(graph, weights_as_params)
        attrs, private = {}, False
    with bb.function(name, params, attrs=attrs, pure=signature.is_pure if signature else True, private=private):
        with bb.dataflow():
            emitter = _Emitter(bb, graph, feeds, signature, fold_weights)
            emitter.run()
            result = emitter.result()
        gvar = bb.emit_func_output(result)
    return bb.get()[gvar]


def writes_float16_batch_norms(graph: Graph) -> bool:
    """Whether emitting `graph` writes a float16 batch norm as its arithmetic: then the emission may build
    where the function as imported does not (TVM 0.27's default pipeline cannot build a float16 batch_norm)."""
    return any(_float16_batch_norm(n.op, [graph.type_of(r) for r in n.inputs]) for n in graph.nodes)


def _float16_batch_norm(op: str, types) -> bool:
    return op == "batch_norm" and types[0].dtype == "float16"


def module_from_graph(graph: Graph, name: str = "main", signature: Signature | None = None, *,
                      weights_as_params: bool = False, mod: tvm.IRModule | None = None,
                      fold_weights: bool = False) -> tvm.IRModule:
    """An IRModule whose function `name` computes `graph` (other functions copied from `mod`)."""
    func = function_from_graph(graph, name, signature, weights_as_params=weights_as_params,
                               fold_weights=fold_weights)
    out = tvm.IRModule({}) if mod is None else mod.clone()
    out[name] = func
    return out


def _fresh_params(graph: Graph, weights_as_params: bool):
    params, feeds = [], {}
    for node in graph.nodes:
        a = node.attr_dict
        as_param = node.op == "input" or (node.op == "weight" and (
            weights_as_params or (a["name"] not in graph.values and a["name"] not in graph.payloads)))
        if as_param and a["name"] not in feeds:
            var = relax.Var(a["name"], relax.TensorType(a["shape"], a["dtype"]))
            params.append(var)
            feeds[a["name"]] = var
    return params, feeds


class _Emitter:
    """Emits the nodes of a graph in order inside an open dataflow block."""

    def __init__(self, bb, graph: Graph, feeds: dict, signature: Signature | None, fold_weights: bool = False):
        self.bb, self.graph, self.feeds, self.sig = bb, graph, feeds, signature
        self.values: list[list[Any]] = []  # per node, per output: the Relax leaf holding it
        self.bound: dict[int, Any] = {}  # export index -> its variable
        self.tuples: dict[int, Any] = {}  # node -> variable of its tuple result
        # items other nodes read are bound right after their tuple; items only returned, when needed
        self.used = {(r.node, r.index) for n in graph.nodes for r in n.inputs}
        self.weight_only = weight_only(graph, frozenset(feeds))
        self.folded = _frontier(graph, fold_constants(graph, set(feeds))) if fold_weights else {}

    def run(self) -> None:
        for i, node in enumerate(self.graph.nodes):
            self.values.append(self._node(i, node))

    # ---- nodes ------------------------------------------------------------------
    def _node(self, i: int, node) -> list:
        a = node.attr_dict
        if node.op in ("input", "weight"):
            name = a["name"]
            if name in self.feeds:
                return [self.feeds[name]]
            if node.op == "weight" and name in self.graph.payloads:
                return [self.graph.payloads[name]]
            if node.op == "weight" and name in self.graph.values:
                return [relax.const(self.graph.values[name], a["dtype"])]
            raise ops_table.Unsupported(f"no value for {node.op} '{name}'")
        if node.op == "constant":
            return [ops_table.constant_expr(a)]
        if i in self.folded:  # None: a step inside a folded chain, which nothing emitted reads
            values = self.folded[i]
            return [None if v is None else relax.const(v, t.dtype) for v, t in zip(values, node.types)]
        args = [self.values[r.node][r.index] for r in node.inputs]
        if node.op == "opaque":
            record: CallRecord = self.graph.payloads[a["ref"]]
            expr = recall_opaque(record, args)
            return self._bind(i, expr, len(node.types), record.tgi, tuple_result=_is_tuple(record.call))
        types = [self.graph.type_of(r) for r in node.inputs]
        if _float16_batch_norm(node.op, types) or (node.op == "batch_norm" and self.weight_only[i]):
            # before any recorded call of the same form: TVM 0.27's default pipeline legalizes a float16
            # batch_norm to a float32 result, which a following concat or binary op refuses; arithmetic builds
            return [_batch_norm_arithmetic(self.bb, a, args, types)]
        record = self.graph.payloads.get(template_key(node.op, node.attrs, types))
        if isinstance(record, CallRecord):
            expr = recall(record, args, is_tensor_leaf)
            tgi = record.tgi
        else:
            expr = ops_table.export_node(node.op, a, args, types, self.bb.emit)
            tgi = ()
        return self._bind(i, expr, len(node.types), tgi, tuple_result=node.op in ops_table.TUPLE_EXPORTS)

    def _bind(self, i: int, expr, n_out: int, tgi: Sequence[int], tuple_result: bool) -> list:
        """Bind a node's expression; a tuple result also gets its items bound right after it."""
        if not isinstance(expr, (relax.Call, relax.Tuple, relax.TupleGetItem)):
            return [expr]  # already a leaf (e.g. squeeze with no axes)
        outs = tuple(self._output_index(Ref(i, k)) for k in range(n_out))
        var = self._emit(expr, outs if tuple_result else outs[0])
        if not tuple_result:
            return [var]
        self.tuples[i] = var
        items: list[Any] = [None] * n_out
        order = list(dict.fromkeys(list(tgi) + [k for k in range(n_out) if (i, k) in self.used]))
        for k in order:
            item = self._emit(relax.TupleGetItem(var, k), outs[k] if k < n_out else None)
            if k < n_out:
                items[k] = item
        return items

    def _emit(self, expr, structure):
        """Emit as an output variable where the source bound this very value to one (`gv = R.op(..)`)."""
        if self.sig is not None and structure is not None:
            for j, export in enumerate(self.sig.exports):
                if export.direct and j not in self.bound and export.structure == structure:
                    self.bound[j] = self.bb.emit_output(expr)
                    return self.bound[j]
        return self.bb.emit(expr)

    def _output_index(self, ref: Ref):
        for k, out in enumerate(self.graph.outputs):
            if out == ref:
                return k
        return None

    # ---- result -------------------------------------------------------------------
    def result(self):
        """The function's return expression; exports not yet bound are bound now, in order."""
        if self.sig is None:
            outs = [self._leaf_out(k) for k in range(len(self.graph.outputs))]
            return outs[0] if len(outs) == 1 else relax.Tuple(outs)
        for j, export in enumerate(self.sig.exports):
            if j not in self.bound:
                self.bound[j] = self.bb.emit_output(self._structure(export.structure))
        return self._structure(self.sig.result, top=True)

    def _structure(self, s, top: bool = False):
        if isinstance(s, ExportRef):
            return self.bound[s.index]
        if isinstance(s, tuple):
            return relax.Tuple([self._structure(x, top) for x in s])
        return self._leaf_out(s) if top else self._value_out(s)

    def _value_out(self, k: int):
        ref = self.graph.outputs[k]
        if self.values[ref.node][ref.index] is None:  # an item of a tuple nothing else reads
            item = relax.TupleGetItem(self.tuples[ref.node], ref.index)
            self.values[ref.node][ref.index] = self._emit(item, k)
        return self.values[ref.node][ref.index]

    def _leaf_out(self, k: int):
        """An output usable after the block: dataflow variables are re-bound as output variables."""
        value = self._value_out(k)
        return self.bb.emit_output(value) if isinstance(value, relax.DataflowVar) else value




def _is_tuple(call) -> bool:
    return isinstance(call.ty, relax.TupleType)


def _frontier(graph: Graph, known: dict) -> dict:
    """Of the folded values (weights aside), those an unfolded node or the result reads; the
    rest are None, so that only the end of each folded chain becomes a Relax constant."""
    read = {(r.node, r.index) for i, n in enumerate(graph.nodes) if i not in known for r in n.inputs}
    read.update((r.node, r.index) for r in graph.outputs)
    return {i: [v if (i, k) in read else None for k, v in enumerate(values)]
            for i, values in known.items() if graph.nodes[i].op != "weight"}


def _batch_norm_arithmetic(bb, attrs: dict, args: list, types: list):
    """A batch norm of weights (or of float16 activations) as the arithmetic DecomposeOpsForInference makes of it.

    A batch_norm call returns a tuple: FoldConstant folds the call but not the item
    taken from the folded tuple, so whatever uses the item (a conv kernel scaled by it,
    as the batch-norm fold rules write) would stay a kernel at run time. Arithmetic
    folds to the end in one sweep, which is what the cost models assume.
    """
    x, gamma, beta, mean, var = args
    axis, dtype = attrs["axis"], types[0].dtype
    shape = [1] * len(types[0].shape)
    shape[axis] = types[0].shape[axis]
    emit = bb.emit
    per_channel = [emit(relax.op.reshape(t, shape)) for t in (gamma, beta, mean, var)]
    gamma, beta, mean, var = per_channel
    std = emit(relax.op.sqrt(emit(relax.op.add(var, relax.const(attrs["epsilon"], dtype)))))
    scale = emit(relax.op.divide(gamma, std))
    centred = emit(relax.op.subtract(x, mean))
    return emit(relax.op.add(emit(relax.op.multiply(centred, scale)), beta))
