"""What TVM makes of an opaque node: its fusion pattern and a workload key for its call.

An opaque node keeps a Relax call the graph form does not model (a CallRecord
in Graph.payloads). FuseOps still fuses it according to the pattern
AnnotateTIROpPattern gives the call's PrimFunc, so this legalizes the call
alone and reads that pattern (memoised). Calls of PrimFuncs (`R.call_tir(pad,
...)`, as the ONNX importer emits) need the module they live in: pass it as
`module`. Without TVM, or when anything fails, the node stays OPAQUE (its own
kernel), which is always a safe answer.

The workload key of an opaque node replaces its per-call-site payload key by
what determines its cost: operator (or PrimFunc) name, attributes and types, so
equal calls at different places share one measurement.
"""
from __future__ import annotations

import hashlib

from ..graph import Graph, Pattern


def _call_of(graph: Graph, i: int):
    node = graph.nodes[i]
    record = graph.payloads.get(node.attr("ref"))
    return getattr(record, "call", None)


class OpaqueInfo:
    """Pattern and workload key of opaque nodes, resolved with TVM; memoised per call site."""

    def __init__(self, module=None):
        self.module = module
        self._patterns: dict[str, int] = {}
        self._keys: dict[str, str] = {}

    def callees(self, call) -> list:
        """Global functions a call refers to (the PrimFunc of a call_tir)."""
        from tvm import ir

        found = []
        for arg in [call.op, *call.args]:
            if isinstance(arg, ir.GlobalVar):
                found.append(arg)
        return found

    # ---- keys -------------------------------------------------------------------------
    def key(self, graph: Graph, i: int) -> str:
        ref = graph.nodes[i].attr("ref")
        cached = self._keys.get(ref)
        if cached is None:
            cached = self._keys[ref] = self._key(graph, i)
        return cached

    def _key(self, graph: Graph, i: int) -> str:
        call = _call_of(graph, i)
        if call is None:
            return graph.nodes[i].attr("ref")
        try:
            import tvm

            parts = [str(getattr(call.op, "name", "")) or str(getattr(call.op, "name_hint", ""))]
            for gv in self.callees(call):
                if self.module is not None and gv in self.module.functions:
                    parts.append(str(tvm.ir.structural_hash(self.module[gv])))
                else:
                    parts.append(gv.name_hint)
            parts.append(str(tvm.ir.structural_hash(call.attrs)) if call.attrs is not None else "")
            parts.append(str(call.ty))
            parts.extend(str(a.ty) for a in call.args if hasattr(a, "ty"))
            return "opaque:" + hashlib.blake2b("|".join(parts).encode(), digest_size=12).hexdigest()
        except Exception:  # noqa: BLE001
            return graph.nodes[i].attr("ref")

    # ---- patterns ---------------------------------------------------------------------
    def pattern(self, graph: Graph, i: int) -> int:
        ref = graph.nodes[i].attr("ref")
        cached = self._patterns.get(ref)
        if cached is None:
            try:
                cached = self._pattern(graph, i)
            except Exception:  # noqa: BLE001 - anything unexpected: keep it alone
                cached = Pattern.OPAQUE
            self._patterns[ref] = cached
        return cached

    def _pattern(self, graph: Graph, i: int) -> int:
        import tvm
        from tvm import relax

        from ..bridge.records import recall_opaque

        call = _call_of(graph, i)
        if call is None:
            return Pattern.OPAQUE
        node = graph.nodes[i]
        params = [relax.Var(f"p{k}", relax.TensorType(t.shape, t.dtype))
                  for k, t in enumerate(graph.type_of(r) for r in node.inputs)]
        record = graph.payloads[node.attr("ref")]
        new_call = recall_opaque(record, params)
        funcs = {}
        for gv in self.callees(call):
            if self.module is None or gv not in self.module.functions:
                return Pattern.OPAQUE
            funcs[gv] = self.module[gv]
        mod = tvm.IRModule(funcs)
        bb = relax.BlockBuilder(mod)
        with bb.function("main", params):
            with bb.dataflow():
                out = bb.emit_output(new_call)
            bb.emit_func_output(out)
        mod = bb.get()
        from ..bridge.execute import stderr_silenced

        with stderr_silenced():  # TVM's C++ notes on what it legalizes (take's "fast mode") are not ours to show
            mod = relax.transform.LegalizeOps()(mod)
        mod = relax.transform.AnnotateTIROpPattern()(mod)
        called = []

        def visit(expr):
            if isinstance(expr, relax.Call) and getattr(expr.op, "name", None) == "relax.call_tir":
                called.append(expr.args[0])

        relax.analysis.post_order_visit(mod["main"].body, visit)
        if len(called) != 1:
            return Pattern.OPAQUE
        func = mod[called[0]]
        attrs = func.attrs or {}
        if "op_pattern" not in attrs:
            return Pattern.OPAQUE
        kind = int(attrs["op_pattern"])
        return kind if kind <= Pattern.OUT_EWISE_FUSABLE else Pattern.OPAQUE

    def modules_for(self, graph: Graph, nodes) -> dict:
        """The global functions the opaque calls among `nodes` need (to build a kernel module)."""
        out = {}
        if self.module is None:
            return out
        for i in nodes:
            if graph.nodes[i].op != "opaque":
                continue
            call = _call_of(graph, i)
            if call is None:
                continue
            for gv in self.callees(call):
                if gv in self.module.functions:
                    out[gv] = self.module[gv]
        return out
