"""ConvTranspose's `output_shape` written as the pads it stands for, before TVM's importer reads the model.

TVM 0.27's importer ignores the attribute, so a ConvTranspose that sets its output size this way (tf2onnx
writes Keras' Conv2DTranspose so) came out a different size than ONNX says: (1, 6, 15, 11) where onnxruntime
computes (1, 6, 15, 12). ONNX's rule: total = stride * (in - 1) + output_padding + dilation * (k - 1) + 1 - out,
split over the two ends (the larger half at the end for SAME_UPPER, at the start otherwise); a negative
total at the end is more output padding, which is what onnxruntime computes too.
"""
from __future__ import annotations

from .errors import InputError
from .legacy_forms import node_attrs


def _kernel(node, attrs, shapes, initializers) -> tuple[int, ...] | None:
    if "kernel_shape" in attrs:
        return tuple(attrs["kernel_shape"])
    weight = initializers.get(node.input[1]) or shapes.get(node.input[1])
    return tuple(weight[2:]) if weight is not None else None


def explicit_output_shapes(model, shapes: dict, path) -> int:
    """Rewrites, in place, every ConvTranspose with an `output_shape` into pads and output_padding; the
    number rewritten. InputError where the size it sets cannot be written so (its input's size unknown, or
    a larger output than output padding below the stride reaches)."""
    from onnx import helper

    initializers = {t.name: tuple(t.dims) for t in model.graph.initializer}
    rewritten = 0
    for node in model.graph.node:
        if node.op_type != "ConvTranspose" or not any(a.name == "output_shape" for a in node.attribute):
            continue
        attrs = node_attrs(node)
        x, kernel = shapes.get(node.input[0]), _kernel(node, attrs, shapes, initializers)
        where = f"{path}: ConvTranspose node '{node.name or node.output[0]}' sets output_shape, which TVM's importer"
        if x is None or kernel is None:
            raise InputError(f"{where} ignores, and its input's or kernel's size is not known here (pin the model's "
                             "input shapes with --input-shape)")
        spatial = len(x) - 2
        out = list(attrs["output_shape"])[-spatial:]
        strides = list(attrs.get("strides", [1] * spatial))
        dilations = list(attrs.get("dilations", [1] * spatial))
        extra = list(attrs.get("output_padding", [0] * spatial))
        auto = attrs.get("auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        begins, ends = [], []
        for i in range(spatial):
            total = strides[i] * (x[2 + i] - 1) + extra[i] + dilations[i] * (kernel[i] - 1) + 1 - out[i]
            small, large = total // 2, total - total // 2
            begin, end = (small, large) if auto == "SAME_UPPER" else (large, small)
            if end < 0:  # a larger output than the input reaches: more output padding at the end
                extra[i], end = extra[i] - end, 0
            if begin < 0 or extra[i] >= max(strides[i], dilations[i]):
                raise InputError(f"{where} ignores, and this one ({out[i]} on spatial axis {i}) is not pads and "
                                 "an output padding below the stride")
            begins.append(begin)
            ends.append(end)
        kept = [a for a in node.attribute if a.name not in ("output_shape", "auto_pad", "pads", "output_padding")]
        del node.attribute[:]
        node.attribute.extend(kept + [helper.make_attribute("pads", begins + ends),
                                      helper.make_attribute("output_padding", extra)])
        rewritten += 1
    return rewritten
