"""BERT-base encoder stack, laid out the way PyTorch/HF BERT exports to ONNX.

The graph input ``input`` is the already-summed embedding output
[1, seq, hidden] (token/position/segment lookup and the embedding LayerNorm
are left out: they are gathers, not the compute the superoptimizer targets),
and there is no attention mask (all tokens attend to all).  Each layer:

* Q, K, V: separate MatMul + Add; Reshape to [1, seq, heads, head_dim] and
  Transpose to heads-first (K straight to [1, heads, head_dim, seq]);
* scores = MatMul(Q, K^T) / sqrt(head_dim) (Div), Softmax(axis=-1);
* context = MatMul(probs, V), Transpose + Reshape back to [1, seq, hidden];
* output projection MatMul + Add, residual Add, LayerNormalization;
* FFN: MatMul + Add, GELU in PyTorch's erf form
  ``x * 0.5 * (1 + Erf(x / sqrt(2)))`` (Div, Erf, Add, Mul, Mul), MatMul + Add,
  residual Add, LayerNormalization.

Output: the last hidden state [1, seq, hidden] (no pooler).

quick=True: 2 layers and sequence length 32 (hidden size and heads unchanged).
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from ._builder import GraphBuilder

HIDDEN = 768
HEADS = 12
HEAD_DIM = HIDDEN // HEADS
INTERMEDIATE = 3072
FULL_LAYERS, FULL_SEQ = 12, 128
QUICK_LAYERS, QUICK_SEQ = 2, 32
LN_EPS = 1e-12  # HF BertConfig.layer_norm_eps


def layer_norm(g: GraphBuilder, x: str, name: str) -> str:
    gamma = g.const(1.0 + g.rng.standard_normal(HIDDEN).astype(np.float32) * 0.1,
                    f"{name}.weight")
    beta = g.small([HIDDEN], f"{name}.bias")
    return g.op("LayerNormalization", [x, gamma, beta], name, axis=-1, epsilon=LN_EPS)


def gelu(g: GraphBuilder, x: str, name: str) -> str:
    y = g.op("Div", [x, g.scalar(math.sqrt(2.0), f"{name}.sqrt2")], f"{name}.div")
    y = g.op("Erf", [y], f"{name}.erf")
    y = g.add(y, g.scalar(1.0, f"{name}.one"), f"{name}.add")
    y = g.mul(x, y, f"{name}.mul")
    return g.mul(y, g.scalar(0.5, f"{name}.half"), name)


def attention(g: GraphBuilder, x: str, seq: int, name: str) -> str:
    split_heads = g.ints([1, seq, HEADS, HEAD_DIM], f"{name}.split_shape")
    merge_heads = g.ints([1, seq, HIDDEN], f"{name}.merge_shape")

    def heads(proj: str, perm: list[int]) -> str:
        y = g.linear(x, HIDDEN, HIDDEN, f"{name}.{proj}")
        y = g.op("Reshape", [y, split_heads], f"{name}.{proj}.reshape")
        return g.op("Transpose", [y], f"{name}.{proj}.transpose", perm=perm)

    q = heads("query", [0, 2, 1, 3])
    k = heads("key", [0, 2, 3, 1])
    v = heads("value", [0, 2, 1, 3])
    scores = g.op("MatMul", [q, k], f"{name}.scores")
    scores = g.op("Div", [scores, g.scalar(math.sqrt(HEAD_DIM), f"{name}.scale")],
                  f"{name}.scaled")
    probs = g.op("Softmax", [scores], f"{name}.softmax", axis=-1)
    ctx = g.op("MatMul", [probs, v], f"{name}.context")
    ctx = g.op("Transpose", [ctx], f"{name}.context.transpose", perm=[0, 2, 1, 3])
    ctx = g.op("Reshape", [ctx, merge_heads], f"{name}.context.reshape")
    out = g.linear(ctx, HIDDEN, HIDDEN, f"{name}.output.dense")
    return layer_norm(g, g.add(out, x, f"{name}.output.residual"), f"{name}.output.LayerNorm")


def encoder_layer(g: GraphBuilder, x: str, seq: int, name: str,
                  out_name: str | None = None) -> str:
    x = attention(g, x, seq, f"{name}.attention")
    h = g.linear(x, HIDDEN, INTERMEDIATE, f"{name}.intermediate.dense")
    h = gelu(g, h, f"{name}.intermediate.gelu")
    h = g.linear(h, INTERMEDIATE, HIDDEN, f"{name}.output.dense")
    return layer_norm(g, g.add(h, x, f"{name}.output.residual"),
                      out_name or f"{name}.output.LayerNorm")


def build(quick: bool = False, seed: int = 0) -> onnx.ModelProto:
    layers, seq = (QUICK_LAYERS, QUICK_SEQ) if quick else (FULL_LAYERS, FULL_SEQ)
    g = GraphBuilder("bert_base_encoder", seed)
    x = g.add_input([1, seq, HIDDEN])
    for i in range(layers):
        last = i == layers - 1
        x = encoder_layer(g, x, seq, f"encoder.layer.{i}", "output" if last else None)
    return g.finish([x])
