"""The TASO graph form: operator table, immutable graphs, interpreter. Imports no tvm."""
from .folding import folds, weight_only
from .graph import Graph, GraphBuilder, Node, Ref, compact, make_node
from .interpreter import INT_HIGH, blas_on_free_cores, evaluate, random_feeds
from .ops import ACTIVATIONS, OPS, OpDef, Pattern, get_op
from .types import GraphError, NotModelled, ShapeError, TensorType

__all__ = [
    "Graph", "GraphBuilder", "Node", "Ref", "compact", "make_node", "evaluate", "blas_on_free_cores", "random_feeds",
    "ACTIVATIONS", "OPS", "OpDef", "Pattern", "get_op", "GraphError", "NotModelled", "ShapeError",
    "TensorType", "folds", "weight_only",
]
