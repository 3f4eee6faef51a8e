"""ONNX on both sides of the optimizer.

    prepared = prepare("model.onnx", input_shapes={"x": (1, 3, 224, 224)})
    prepared.mod          # the Relax module (weights as constants), ready for TASOPass
    model = export_graph(graph, signature, prepared)   # Graph -> ONNX ModelProto
    check_numerics(prepared.model, model)              # onnxruntime, random inputs
"""
from .errors import InputError
from .prepare import Prepared, fold_constants, load_onnx, parse_input_shapes, prepare

__all__ = ["InputError", "Prepared", "prepare", "load_onnx", "fold_constants", "parse_input_shapes",
           "export_graph", "export_module", "check_numerics", "ExportError"]


def __getattr__(name):  # the exporter imports onnx helpers only when asked for
    if name in ("export_graph", "export_module", "ExportError", "check_numerics"):
        from . import export
        return getattr(export, name)
    raise AttributeError(name)
