"""How bert_tiny_dynamic.onnx was made (torch 2.13, transformers 5.24; not run by the tests).

A transformers BertModel (1 layer, hidden 16, vocab 40, random weights) exported by
torch.onnx with dynamic batch and sequence axes: a graph nobody here wrote, whose
shape computations (Shape -> Slice -> Expand) only fold once the shapes are pinned.
"""
import torch, torch.nn as nn, transformers as T
torch.manual_seed(0)
cfg = T.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)
m = T.BertModel(cfg).eval()
class W(nn.Module):
    def __init__(s, m): super().__init__(); s.m = m
    def forward(s, ids, am): return s.m(input_ids=ids, attention_mask=am).last_hidden_state
args = (torch.randint(0, 40, (1, 8)), torch.ones(1, 8, dtype=torch.long))
torch.onnx.export(W(m), args, "bert_tiny_dynamic.onnx", opset_version=17, dynamo=False, input_names=["input_ids", "attention_mask"],
                  output_names=["hidden"], dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}, "hidden": {0: "batch", 1: "seq"}})
