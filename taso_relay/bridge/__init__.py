"""Relax <-> Graph: the only module that knows Relax operator names and attribute spellings.

    imported = graph_from_function(func)          # None (and a warning) if func must stay as is
    func2 = function_from_graph(imported.graph, "main", imported.signature)
    mod = module_from_graph(any_graph)            # standalone module, e.g. one kernel to measure
    part = split_static_part(func)                # where func has no graph form whole: its static part
    func2 = part.splice(optimized(part.head))
    values = stand_ins(func, symbols(func))        # where func has symbolic sizes: primes to bind them at
    func2 = generalize(optimized(bind(func, values)), func, values)   # then run against func at other sizes
"""
from .from_relax import Imported, graph_from_function, import_function
from .ops_table import Unsupported
from .records import CallRecord, Signature, group_args, recall_opaque
from .static_part import StaticPart, split_static_part
from .symbolic_sizes import bind, generalize, stand_ins, symbols
from .to_relax import function_from_graph, module_from_graph

__all__ = ["Imported", "graph_from_function", "import_function", "function_from_graph", "module_from_graph",
           "roundtrip", "Unsupported", "Signature", "CallRecord", "group_args", "recall_opaque", "StaticPart",
           "split_static_part", "bind", "generalize", "stand_ins", "symbols"]


def roundtrip(func, name: str | None = None):
    """Relax -> Graph -> Relax for one function; returns `func` itself when it is left unchanged."""
    imported = graph_from_function(func, name)
    if imported is None:
        return func
    return function_from_graph(imported.graph, imported.signature.name, imported.signature)
