"""The operator table. Importing this package registers every operator."""
from . import (conv_transpose, elementwise, layout, linear, norm, pool, reduce, resize,  # noqa: F401
               shuffle, sources, subpixel)  # noqa: F401
from .activation import ACTIVATIONS
from .registry import OPS, REQUIRED, OpDef, Pattern, get_op

__all__ = ["OPS", "REQUIRED", "OpDef", "Pattern", "get_op", "ACTIVATIONS"]
