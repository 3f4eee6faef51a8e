"""Small ONNX models written with onnx.helper for the bridge tests (no files, no downloads)."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 18


def import_onnx(model):
    """tvm.relax.frontend.onnx.from_onnx with weights as constants, as the pass expects them."""
    from tvm.relax.frontend.onnx import from_onnx

    return from_onnx(model, keep_params_in_input=False)


class Model:
    """Collects nodes and seeded initializers; `build` makes the ModelProto."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}{self.count}"

    def weight(self, shape, scale: float = 0.3, positive: bool = False, dtype=np.float32) -> str:
        value = self.rng.standard_normal(shape) * scale
        value = np.abs(value) + 0.5 if positive else value
        name = self.name("w")
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def const(self, value, dtype=np.int64) -> str:
        name = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, op_type: str, inputs, n_out: int = 1, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def conv(self, x, cin, cout, k, **attrs):
        return self.op("Conv", [x, self.weight((cout, cin // attrs.get("group", 1), k, k))], **attrs)

    def bn(self, x, c):
        return self.op("BatchNormalization", [x, self.weight((c,), positive=True), self.weight((c,)),
                                              self.weight((c,)), self.weight((c,), positive=True)])

    def build(self, inputs, outputs):
        """inputs/outputs: (name, elem_type, shape) triples; shape entries may be dim_param strings."""
        graph = helper.make_graph(self.nodes, "test", [helper.make_tensor_value_info(*i) for i in inputs],
                                  [helper.make_tensor_value_info(*o) for o in outputs], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


F32 = TensorProto.FLOAT


def as_float16(model):
    """The same model in float16, as `model.half()` exports it: float weights, inputs and outputs."""
    model = type(model).FromString(model.SerializeToString())
    graph = model.graph
    for k, init in enumerate(graph.initializer):
        if init.data_type == F32:
            half = numpy_helper.to_array(init).astype(np.float16)
            graph.initializer[k].CopyFrom(numpy_helper.from_array(half, init.name))
    for value in list(graph.input) + list(graph.output):
        if value.type.tensor_type.elem_type == F32:
            value.type.tensor_type.elem_type = TensorProto.FLOAT16
    return model


def resnet_block(batch="1"):
    """conv-bn-relu-conv-bn + identity, relu: the residual unit of ResNet."""
    m = Model(1)
    c1 = m.op("Relu", [m.bn(m.conv("x", 8, 8, 3, pads=[1, 1, 1, 1]), 8)])
    c2 = m.bn(m.conv(c1, 8, 8, 3, pads=[1, 1, 1, 1]), 8)
    y = m.op("Relu", [m.op("Add", [c2, "x"])])
    b = int(batch) if batch.isdigit() else batch
    return m.build([("x", F32, [b, 8, 10, 10])], [(y, F32, [b, 8, 10, 10])])


def inception_block():
    """Four parallel branches (1x1, 1x1-3x3, 1x1-5x5, pool-1x1) joined by Concat."""
    m = Model(2)
    b1 = m.op("Relu", [m.conv("x", 6, 4, 1)])
    b2 = m.op("Relu", [m.conv(m.op("Relu", [m.conv("x", 6, 3, 1)]), 3, 4, 3, pads=[1, 1, 1, 1])])
    b3 = m.op("Relu", [m.conv(m.op("Relu", [m.conv("x", 6, 2, 1)]), 2, 4, 5, pads=[2, 2, 2, 2])])
    pool = m.op("MaxPool", ["x"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    b4 = m.op("Relu", [m.conv(pool, 6, 2, 1)])
    y = m.op("Concat", [b1, b2, b3, b4], axis=1)
    return m.build([("x", F32, [1, 6, 9, 9])], [(y, F32, [1, 14, 9, 9])])


def branches_summed():
    """Multi-branch blocks exported unmerged: two 3x3 convs of one input with their biases, summed (ACNet-like);
    then RepVGG's 3x3 and 1x1 convs of one input, each with a batch norm, summed."""
    b = Model(3)

    def conv(x, k, bias=True):
        return b.op("Conv", [x, b.weight((8, 8, k, k))] + ([b.weight((8,))] if bias else []), pads=[k // 2] * 4)

    s1 = b.op("Relu", [b.op("Add", [conv("x", 3), conv("x", 3)])])
    s2 = b.op("Relu", [b.op("Add", [b.bn(conv(s1, 3, bias=False), 8), b.bn(conv(s1, 1, bias=False), 8)])])
    return b.build([("x", F32, [1, 8, 10, 10])], [(s2, F32, [1, 8, 10, 10])])


def reparam_blocks():
    """Re-parameterizable blocks in their training-time form, summed in the order timm's forward sums them:
    RepVGG's (1x1 + 3x3) + batch norm of the input; MobileOne's depthwise stage ((1x1 + 3x3) + 3x3) + batch
    norm of the input, every conv with a batch norm; RepViT's depthwise (3x3 + 1x1) + the input itself."""
    b = Model(4)

    def conv_bn(x, k, group=1):
        return b.bn(b.op("Conv", [x, b.weight((8, 8 // group, k, k))], pads=[k // 2] * 4, group=group), 8)

    def conv_bias(x, k, group=1):
        return b.op("Conv", [x, b.weight((8, 8 // group, k, k)), b.weight((8,))], pads=[k // 2] * 4, group=group)

    def add(x, y):
        return b.op("Add", [x, y])

    repvgg = b.op("Relu", [add(add(conv_bn("x", 1), conv_bn("x", 3)), b.bn("x", 8))])
    dw = add(add(add(conv_bn(repvgg, 1, 8), conv_bn(repvgg, 3, 8)), conv_bn(repvgg, 3, 8)), b.bn(repvgg, 8))
    mobileone = b.op("Relu", [dw])
    repvit = add(add(conv_bias(mobileone, 3, 8), conv_bias(mobileone, 1, 8)), mobileone)
    return b.build([("x", F32, [1, 8, 10, 10])], [(repvit, F32, [1, 8, 10, 10])])


def fastvit_blocks():
    """FastViT's blocks in their training-time form, as timm computes them: a RepMixer, x + gamma * (mixer(x) -
    bn(x)) with a MobileOne mixer (1x1 and 3x3 depthwise branches and a batch norm of the input); a conv MLP
    scaled the same way, y + gamma2 * fc2(relu(fc1(y))); a 1x1 MobileOne block with no scale branch, whose sum
    starts from the number 0: (0 + bn(z)) + conv_bn(z). The layer scales are (C, 1, 1), as timm's are."""
    b = Model(7)

    def conv_bn(x, k, group=1):
        return b.bn(b.op("Conv", [x, b.weight((8, 8 // group, k, k))], pads=[k // 2] * 4, group=group), 8)

    def fc(x):
        return b.op("Conv", [x, b.weight((8, 8, 1, 1)), b.weight((8,))])

    def add(x, y):
        return b.op("Add", [x, y])

    mixer = add(add(conv_bn("x", 1, 8), b.bn("x", 8)), conv_bn("x", 3, 8))
    y = add("x", b.op("Mul", [b.op("Sub", [mixer, b.bn("x", 8)]), b.weight((8, 1, 1))]))
    z = add(y, b.op("Mul", [fc(b.op("Relu", [fc(y)])), b.weight((8, 1, 1))]))
    out = b.op("Relu", [add(add(b.const(0.0, np.float32), b.bn(z, 8)), conv_bn(z, 1))])
    return b.build([("x", F32, [1, 8, 10, 10])], [(out, F32, [1, 8, 10, 10])])


def static_backbone(m: Model):
    """conv + batch norm (a fold), relu, and two 1x1 convs of it summed with their biases (a conv sum)."""
    y = m.op("Relu", [m.bn(m.conv("x", 3, 8, 3, pads=[1, 1, 1, 1]), 8)])
    a = m.op("Conv", [y, m.weight((8, 8, 1, 1)), m.weight((8,))])
    b = m.op("Conv", [y, m.weight((8, 8, 1, 1)), m.weight((8,))])
    return m.op("Add", [a, b])


def with_nonzero():
    """The backbone, then the positions above a threshold (NonZero: a shape known only when it runs)."""
    m = Model(3)
    features = static_backbone(m)
    where = m.op("NonZero", [m.op("Greater", [features, m.const(0.5, np.float32)])])
    return m.build([("x", F32, [1, 3, 6, 6])],
                   [(features, F32, [1, 8, 6, 6]), (where, TensorProto.INT64, [4, "n"])])


def with_if():
    """The backbone, then a branch on the input's sum: the features plus one, or twice them."""
    m = Model(4)
    features = static_backbone(m)
    one, two = m.const(1.0, np.float32), m.const(2.0, np.float32)
    then_g = helper.make_graph([helper.make_node("Add", [features, one], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", F32, [1, 8, 6, 6])])
    else_g = helper.make_graph([helper.make_node("Mul", [features, two], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", F32, [1, 8, 6, 6])])
    positive = m.op("Greater", [m.op("ReduceSum", ["x"], keepdims=0), m.const(0.0, np.float32)])
    out = m.op("If", [positive], then_branch=then_g, else_branch=else_g)
    return m.build([("x", F32, [1, 3, 6, 6])], [(out, F32, [1, 8, 6, 6])])


def transformer_layer(seq=6, dim=8, heads=2):
    """Self-attention (MatMul, Softmax), residuals, LayerNormalization and a GELU written with Erf."""
    m = Model(3)
    hd = dim // heads

    def heads_of(t):  # [1, seq, dim] -> [1, heads, seq, hd]
        r = m.op("Reshape", [t, m.const([1, seq, heads, hd])])
        return m.op("Transpose", [r], perm=[0, 2, 1, 3])

    q, k, v = (heads_of(m.op("MatMul", ["x", m.weight((dim, dim))])) for _ in range(3))
    scores = m.op("Div", [m.op("MatMul", [q, m.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                          m.const(np.sqrt(hd), np.float32)])
    ctx = m.op("MatMul", [m.op("Softmax", [scores], axis=-1), v])
    ctx = m.op("Reshape", [m.op("Transpose", [ctx], perm=[0, 2, 1, 3]), m.const([1, seq, dim])])
    attn = m.op("Add", [m.op("MatMul", [ctx, m.weight((dim, dim))]), m.weight((dim,))])
    h = m.op("LayerNormalization", [m.op("Add", ["x", attn]), m.weight((dim,), positive=True),
                                    m.weight((dim,))], axis=-1, epsilon=1e-5)
    up = m.op("Add", [m.op("MatMul", [h, m.weight((dim, 4 * dim))]), m.weight((4 * dim,))])
    erf = m.op("Erf", [m.op("Div", [up, m.const(np.sqrt(2.0), np.float32)])])
    gelu = m.op("Mul", [m.op("Mul", [up, m.op("Add", [erf, m.const(1.0, np.float32)])]),
                        m.const(0.5, np.float32)])
    down = m.op("Add", [m.op("MatMul", [gelu, m.weight((4 * dim, dim))]), m.weight((dim,))])
    y = m.op("LayerNormalization", [m.op("Add", [h, down]), m.weight((dim,), positive=True), m.weight((dim,))],
             axis=-1, epsilon=1e-5)
    return m.build([("x", F32, [1, seq, dim])], [(y, F32, [1, seq, dim])])


def with_unmodelled_ops():
    """TopK (a tuple of two results, both used) and CumSum between modelled ops; Split; three outputs."""
    m = Model(4)
    h = m.op("Relu", [m.conv("x", 3, 6, 3, pads=[1, 1, 1, 1])])
    left, right = m.op("Split", [h], n_out=2, axis=1, num_outputs=2)
    flat = m.op("Flatten", [m.op("GlobalAveragePool", [m.op("Add", [left, right])])])
    logits = m.op("Gemm", [flat, m.weight((5, 3)), m.weight((5,))], transB=1)
    values, indices = m.op("TopK", [logits, m.const([2])], n_out=2, axis=1)
    cums = m.op("Sigmoid", [m.op("CumSum", [logits, m.const(1)])])
    return m.build([("x", F32, [1, 3, 6, 6])],
                   [(values, F32, [1, 2]), (indices, TensorProto.INT64, [1, 2]), (cums, F32, [1, 5])])


def hard_activations():
    """MobileNetV3's HardSwish and squeeze-excite HardSigmoid (opset 14): TVM imports both with
    R.clip. Inputs are scaled by 5 so that both bounds of every clip are reached. Then a LeakyRelu
    (YOLO's activation) of values on both sides of 0."""
    m = Model(6)
    h = m.op("Mul", [m.conv("x", 3, 4, 3, pads=[1, 1, 1, 1]), m.const(5.0, np.float32)])
    a = m.op("HardSwish", [h])
    b = m.op("HardSigmoid", [m.conv(a, 4, 4, 1)], alpha=0.2, beta=0.5)
    y = m.op("LeakyRelu", [m.op("Sub", [m.op("Mul", [a, b]), m.const(0.5, np.float32)])], alpha=0.1)
    model = m.build([("x", F32, [1, 3, 6, 6])], [(y, F32, [1, 4, 6, 6])])
    model.opset_import[0].version = max(model.opset_import[0].version, 14)
    return model


def relu6_block():
    """conv -> Clip(0, 6) -> conv -> Clip(0, 6): MobileNetV2's ReLU6 (opset 11 and later). TVM's importer
    emits call_tir of topi.maximum / topi.minimum, with isnan/where guards on the constant bounds.
    Not in MODELS: those guards are opaque calls on constants."""
    m = Model(9)
    lo, hi = m.const(0.0, np.float32), m.const(6.0, np.float32)
    a = m.op("Clip", [m.conv("x", 3, 4, 3, pads=[1, 1, 1, 1]), lo, hi])
    y = m.op("Clip", [m.op("Mul", [m.conv(a, 4, 4, 1), m.const(4.0, np.float32)]), lo, hi])
    return m.build([("x", F32, [1, 3, 6, 6])], [(y, F32, [1, 4, 6, 6])])


def gqa_tiles():
    """Grouped-query attention's K/V repeat as PyTorch exports repeat_interleave: Unsqueeze, Tile over
    the new axis of size 1, Reshape; beside it a Tile that copies a whole axis. TVM's importer emits
    both as call_tir of topi.tile."""
    m = Model(11)
    k = m.op("MatMul", ["x", m.weight((8, 8))])
    heads = m.op("Reshape", [k, m.const([1, 2, 4, 4])])
    tiled = m.op("Tile", [m.op("Unsqueeze", [heads, m.const([2])]), m.const([1, 1, 3, 1, 1])])
    y = m.op("Relu", [m.op("Reshape", [tiled, m.const([1, 6, 4, 4])])])
    z = m.op("Tile", [m.op("Sigmoid", ["x"]), m.const([1, 2, 1])])
    return m.build([("x", F32, [1, 4, 8])], [(y, F32, [1, 6, 4, 4]), (z, F32, [1, 8, 8])])


def onnx_pads():
    """ONNX Pad as TVM imports it, call_tir of topi's pad: constant with uneven sides and a value
    (Swin's window padding), and reflect (topi's mirror_pad: the graph's mirror_pad, never a constant pad)."""
    m = Model(12)
    a = m.op("Pad", ["x", m.const([0, 0, 1, 0, 0, 1, 2, 3]), m.const(0.5, np.float32)], mode="constant")
    b = m.op("Pad", [m.op("Relu", ["x"]), m.const([0, 0, 1, 1, 0, 0, 1, 1])], mode="reflect")
    return m.build([("x", F32, [1, 2, 5, 6])], [(m.op("Sigmoid", [a]), F32, [1, 3, 8, 9]), (b, F32, [1, 2, 7, 8])])


def einsum_attention():
    """Attention written with ONNX Einsum (MaxViT's export), which TVM imports as call_tir of topi's
    einsum: scores and weighted sum are matmuls; an einsum summing an index of one operand is not.
    The query and key projections are the same MatMul twice (a duplicate the pass merges)."""
    m = Model(13)
    w = m.weight((8, 8))
    q = m.op("Reshape", [m.op("MatMul", ["x", w]), m.const([1, 4, 2, 4])])
    k = m.op("Reshape", [m.op("MatMul", ["x", w]), m.const([1, 4, 2, 4])])
    v = m.op("Reshape", [m.op("MatMul", ["x", m.weight((8, 8))]), m.const([1, 4, 2, 4])])
    scores = m.op("Einsum", [q, k], equation="bihd,bjhd->bhij")
    out = m.op("Einsum", [m.op("Softmax", [scores], axis=-1), v], equation="bhij,bjhd->bihd")
    summed = m.op("Einsum", [q, v], equation="bihd,bjhd->bhi")
    return m.build([("x", F32, [1, 4, 8])], [(out, F32, [1, 4, 2, 4]), (summed, F32, [1, 2, 4])])


def token_types():
    """BERT's embeddings: word ids into a 12-row table, token types (through a Cast) into a 2-row one."""
    m = Model(10)
    words = m.op("Gather", [m.weight((12, 8)), "ids"], axis=0)
    types = m.op("Gather", [m.weight((2, 8)), m.op("Cast", ["types"], to=TensorProto.INT64)], axis=0)
    y = m.op("Relu", [m.op("Add", [words, types])])
    return m.build([("ids", TensorProto.INT64, [1, 64]), ("types", TensorProto.INT32, [1, 64])],
                   [(y, F32, [1, 64, 8])])


def embedding_block(vocab=12, dim=8, seq=4):
    """Token ids -> an embedding Gather -> two parallel MatMuls, added. TVM's importer reads the
    Gather's axis extent as R.shape_of(W): a shape binding, as in every transformer export.
    Not in MODELS: its input is token ids, which random float inputs do not give."""
    m = Model(5)
    e = m.op("Gather", [m.weight((vocab, dim)), "ids"], axis=0)
    y = m.op("Add", [m.op("MatMul", [e, m.weight((dim, dim))]), m.op("MatMul", [e, m.weight((dim, dim))])])
    return m.build([("ids", TensorProto.INT64, [1, seq])], [(y, F32, [1, seq, dim])])


def upsampling():
    """A U-Net's decoder step as torch exports it: nearest upsampling by scales (nn.Upsample), a skip
    concat, a bilinear one by sizes (F.interpolate, align_corners both ways), and a nearest one that
    rounds to the nearer pixel, onto an odd size."""
    m = Model(7)
    low = m.op("Relu", [m.conv("x", 3, 4, 3, pads=[1, 1, 1, 1], strides=[2, 2])])  # 1x4x5x4
    up = m.op("Resize", [low, "", m.const([1.0, 1.0, 2.0, 2.0], np.float32)], mode="nearest",
              coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    h = m.op("Relu", [m.conv(m.op("Concat", [up, m.conv("x", 3, 2, 1)], axis=1), 6, 4, 3, pads=[1, 1, 1, 1])])
    a = m.op("Resize", [h, "", "", m.const([1, 4, 13, 11])], mode="linear",
             coordinate_transformation_mode="pytorch_half_pixel")
    b = m.op("Resize", [h, "", "", m.const([1, 4, 13, 11])], mode="linear",
             coordinate_transformation_mode="align_corners")
    c = m.op("Resize", [h, "", "", m.const([1, 4, 13, 11])], mode="nearest",
             coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil")
    y = m.conv(m.op("Add", [m.op("Add", [a, b]), c]), 4, 2, 1)
    return m.build([("x", F32, [1, 3, 10, 8])], [(y, F32, [1, 2, 13, 11])])


def group_norm_block():
    """PoolFormer's token mixer as torch exports GroupNorm(1, C): InstanceNormalization of the input
    reshaped to (1, 1, C*H*W) with unit scale and zero bias, the real affine after it, then an average
    pool minus its input; TVM imports the normalization as mean, subtract, variance, sqrt, divide."""
    m = Model(8)
    x = m.conv("x", 3, 4, 3, pads=[1, 1, 1, 1])
    flat = m.op("Reshape", [x, m.const([1, 1, -1])])
    norm = m.op("InstanceNormalization", [flat, m.const([1.0], np.float32), m.const([0.0], np.float32)])
    y = m.op("Reshape", [norm, m.const([1, 4, 6, 6])])
    y = m.op("Add", [m.op("Mul", [y, m.weight((4, 1, 1))]), m.weight((4, 1, 1))])
    pooled = m.op("AveragePool", [y], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1], count_include_pad=0)
    out = m.conv(m.op("Sub", [pooled, y]), 4, 4, 1)
    return m.build([("x", F32, [1, 3, 6, 6])], [(out, F32, [1, 4, 6, 6])])


MODELS = {
    "hard_activations": hard_activations,
    "upsampling": upsampling,
    "resnet_block": resnet_block,
    "inception_block": inception_block,
    "branches_summed": branches_summed,
    "reparam_blocks": reparam_blocks,
    "transformer_layer": transformer_layer,
    "with_unmodelled_ops": with_unmodelled_ops,
    "group_norm_block": group_norm_block,
}
