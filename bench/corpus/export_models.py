"""Export torchvision and transformers models to ONNX for `check_models` (run with torch installed).

    make corpus   # a separate environment with torch, then both steps
    .venv-corpus/bin/python -m bench.corpus.export_models vision hf --out build/corpus

Random weights (no downloads), batch 1; torch's TorchScript exporter (`dynamo=False`, opset 17)
for "vision" and "hf", torch.export's (opset 18) for "dynamo": the graphs users bring, with the
shape computations and Pads each exporter writes; the `edge` family also onnxruntime's quantizer, onnx.helper
and opset 20. A model that does not export is reported and skipped.
"""
from __future__ import annotations

import argparse
import warnings
from pathlib import Path

VISION = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny", "densenet121",
          "shufflenet_v2_x1_0", "regnet_y_400mf", "squeezenet1_1", "googlenet", "mnasnet0_5", "resnext50_32x4d",
          "swin_t", "efficientnet_v2_s", "regnet_x_400mf", "alexnet"]


SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)  # transformers


def randomized_batch_norms(model, scales=(0.5, 1.5), kind: str = "BatchNorm2d"):
    """Random running statistics and affine parameters for every batch norm of `kind`, so that folding them shows
    in the numbers (a fresh model's are 0 and 1); `scales` bounds the affine scale. (The families before `onedee`
    drew BatchNorm2d's only: LeViT's BatchNorm1d weights stay as they were exported.)"""
    import torch

    for mod in model.modules():
        if isinstance(mod, getattr(torch.nn, kind)):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 1.5)
            torch.nn.init.uniform_(mod.weight, *scales)
            torch.nn.init.uniform_(mod.bias, -0.2, 0.2)
    return model


def randomized_norm_affines(model, kind: str):
    """`model` with the scale and shift of every affine norm of `kind` (GroupNorm, InstanceNorm2d) drawn away from
    1 and 0, as trained ones are."""
    import torch

    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, getattr(torch.nn, kind)) and m.weight is not None:
                m.weight.uniform_(0.5, 1.5), m.bias.uniform_(-0.5, 0.5)
    return model


def export(model, args, path: Path, dynamo: bool = False, opset: int | None = None, **kwargs) -> None:
    """torch.onnx.export at opset 17 (the TorchScript exporter) or, with dynamo, 18 (torch.export's), or at `opset`."""
    import torch

    model.eval()
    if dynamo:
        kwargs.update(opset_version=opset or 18, dynamo=True, external_data=False)
    else:
        kwargs.update(opset_version=opset or 17, dynamo=False)
    try:
        torch.onnx.export(model, args, str(path), **kwargs)
        print(f"exported {path.name}", flush=True)
    except Exception as exc:  # noqa: BLE001 - a model the exporter refuses is reported, not fatal
        print(f"not exported {path.stem}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}", flush=True)


def vision(out: Path) -> None:
    import torch
    import torchvision.models as models
    from torchvision.models.segmentation import lraspp_mobilenet_v3_large

    image = torch.randn(1, 3, 224, 224)
    for name in VISION:
        kwargs = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
        export(getattr(models, name)(weights=None, **kwargs), (image,), out / f"{name}.onnx")
    export(models.inception_v3(weights=None, aux_logits=False, init_weights=True), (torch.randn(1, 3, 299, 299),),
           out / "inception_v3.onnx")
    tiny_vit = models.VisionTransformer(image_size=64, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64,
                                        mlp_dim=128)  # nn.MultiheadAttention
    with torch.random.fork_rng():  # torchvision starts the head at zero (a zero output); the models after it
        torch.manual_seed(1)  # keep the weights they had before this draw
        torch.nn.init.normal_(tiny_vit.heads.head.weight, std=0.02)
    export(tiny_vit, (torch.randn(1, 3, 64, 64),), out / "vit_tiny_mha.onnx")
    export(lraspp_mobilenet_v3_large(weights=None, weights_backbone=None), (torch.randn(1, 3, 128, 128),),
           out / "lraspp.onnx")


def first_output(model, keyword: str, **fixed):
    """A transformers model as a plain module of one tensor: called with `keyword` (and `fixed`), its first
    output."""
    import torch

    class First(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x):
            out = self.model(**{keyword: x}, **fixed)
            return out[0] if isinstance(out, tuple) else out.to_tuple()[0]

    return First()


def export_on_tokens(models: dict, ids, out: Path, **kwargs) -> None:
    """Each transformers model of {file stem: model} called on the token ids `ids` (its first output)."""
    for name, model in models.items():
        export(first_output(model, "input_ids"), (ids,), out / f"{name}.onnx", input_names=["input_ids"], **kwargs)


def hf(out: Path) -> None:
    import torch
    import transformers as T

    text = {
        "hf_bert": T.BertModel(T.BertConfig(vocab_size=100, **SMALL)),
        "hf_gpt2": T.GPT2Model(T.GPT2Config(vocab_size=100, n_embd=64, n_layer=2, n_head=4)),
        "hf_distilbert": T.DistilBertModel(T.DistilBertConfig(vocab_size=100, dim=64, n_layers=2, n_heads=4,
                                                               hidden_dim=128)),
        "hf_roberta": T.RobertaModel(T.RobertaConfig(vocab_size=100, **SMALL)),
        "hf_albert": T.AlbertModel(T.AlbertConfig(vocab_size=100, embedding_size=32, **SMALL)),
    }
    export_on_tokens(text, torch.randint(0, 100, (1, 16)), out)
    vit = T.ViTModel(T.ViTConfig(image_size=32, patch_size=8, **SMALL))
    export(first_output(vit, "pixel_values"), (torch.randn(1, 3, 32, 32),), out / "hf_vit.onnx")


def dynamo(out: Path) -> None:
    """torch.export's exporter (torch's default): other graphs for the same models, and Llama's
    grouped-query attention, which the TorchScript exporter refuses."""
    import torch
    import torchvision.models as models
    import transformers as T

    image = torch.randn(1, 3, 224, 224)
    for name in ("resnet18", "mobilenet_v3_small", "swin_t", "convnext_tiny"):
        export(getattr(models, name)(weights=None), (image,), out / f"dynamo_{name}.onnx", dynamo=True)
    ids = torch.randint(0, 100, (1, 16))
    bert = T.BertModel(T.BertConfig(vocab_size=100, **SMALL))
    export(first_output(bert, "input_ids"), (ids,), out / "dynamo_hf_bert.onnx", dynamo=True,
           input_names=["input_ids"])
    llama = T.LlamaModel(T.LlamaConfig(vocab_size=100, num_key_value_heads=2, use_cache=False, **SMALL))
    export(first_output(llama, "input_ids"), (ids,), out / "dynamo_hf_llama.onnx", dynamo=True,
           input_names=["input_ids"])


def more(out: Path) -> None:
    """Operators the other families lack: 3-D and 1-D convs, dilated convs, group norm, relative
    position biases, encoder-decoder attention."""
    import torch
    import torchvision.models as models
    import transformers as T
    from torchvision.models.segmentation import deeplabv3_mobilenet_v3_large
    from torchvision.models.video import r3d_18

    export(r3d_18(weights=None), (torch.randn(1, 3, 8, 56, 56),), out / "r3d_18.onnx")
    export(deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, aux_loss=False),
           (torch.randn(1, 3, 128, 128),), out / "deeplabv3_mobilenet.onnx")
    export(models.maxvit_t(weights=None), (torch.randn(1, 3, 224, 224),), out / "maxvit_t.onnx")
    w2v = T.Wav2Vec2Model(T.Wav2Vec2Config(conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                                           num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, **SMALL))
    export(first_output(w2v, "input_values"), (torch.randn(1, 1600),), out / "hf_wav2vec2.onnx")
    whisper = T.WhisperModel(T.WhisperConfig(vocab_size=100, d_model=64, encoder_layers=2, decoder_layers=2,
                                             encoder_attention_heads=4, decoder_attention_heads=4,
                                             encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16,
                                             max_source_positions=32, pad_token_id=1, bos_token_id=2,
                                             eos_token_id=3, decoder_start_token_id=2))
    export(first_output(whisper.encoder, "input_features"), (torch.randn(1, 16, 64),), out / "hf_whisper_encoder.onnx")
    t5 = T.T5EncoderModel(T.T5Config(vocab_size=100, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4))
    ids = torch.randint(0, 100, (1, 16))
    export(first_output(t5, "input_ids"), (ids,), out / "hf_t5_encoder.onnx", input_names=["input_ids"])
    seg = T.SegformerModel(T.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[4, 2],
                                             hidden_sizes=[16, 32], num_attention_heads=[1, 2],
                                             patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2]))
    export(first_output(seg, "pixel_values"), (torch.randn(1, 3, 64, 64),), out / "hf_segformer.onnx")


def wider(out: Path) -> None:
    """Architectures added in session 30: disentangled attention (DeBERTa-v2), CLIP's towers, Qwen2
    and Phi (partial rotary) through torch.export, MobileViT's unfolds, BEiT's relative position
    bias, BART's encoder, ResNet-50, MobileNetV3-Large and R(2+1)D's factored 3-D convs."""
    import torch
    import torchvision.models as models
    import transformers as T
    from torchvision.models.video import r2plus1d_18

    ids = torch.randint(0, 100, (1, 16))
    deberta = T.DebertaV2Model(T.DebertaV2Config(vocab_size=100, relative_attention=True, pos_att_type=["p2c", "c2p"],
                                                 max_relative_positions=32, position_buckets=8, **SMALL))
    clip_text = T.CLIPTextModel(T.CLIPTextConfig(vocab_size=100, max_position_embeddings=32, **SMALL))
    bart = T.BartModel(T.BartConfig(vocab_size=100, d_model=64, encoder_layers=2, decoder_layers=2,
                                    encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                    decoder_ffn_dim=128, max_position_embeddings=32))
    export_on_tokens({"hf_deberta_v2": deberta, "hf_clip_text": clip_text, "hf_bart_encoder": bart.encoder}, ids, out)
    qwen2 = T.Qwen2Model(T.Qwen2Config(vocab_size=100, num_key_value_heads=2, use_cache=False, **SMALL))
    phi = T.PhiModel(T.PhiConfig(vocab_size=100, partial_rotary_factor=0.5, use_cache=False, **SMALL))
    export_on_tokens({"dynamo_hf_qwen2": qwen2, "dynamo_hf_phi": phi}, ids, out, dynamo=True)
    images = {
        "hf_clip_vision": (T.CLIPVisionModel(T.CLIPVisionConfig(image_size=32, patch_size=8, **SMALL)), 32),
        "hf_beit": (T.BeitModel(T.BeitConfig(image_size=32, patch_size=8, use_relative_position_bias=True, **SMALL)),
                    32),
        "hf_mobilevit": (T.MobileViTModel(T.MobileViTConfig(image_size=64, hidden_sizes=[32, 48, 64],
                                                            neck_hidden_sizes=[8, 16, 24, 32, 40, 48, 64],
                                                            num_attention_heads=2)), 64),
    }
    for mod in images["hf_mobilevit"][0].modules():  # its init shrinks each layer: the output underflows to 0
        if isinstance(mod, (torch.nn.BatchNorm2d, torch.nn.LayerNorm)):
            torch.nn.init.ones_(mod.weight)
        elif isinstance(mod, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(mod.weight)
    for name, (model, size) in images.items():
        export(first_output(model, "pixel_values"), (torch.randn(1, 3, size, size),), out / f"{name}.onnx")
    image = torch.randn(1, 3, 224, 224)
    export(models.resnet50(weights=None), (image,), out / "resnet50.onnx")
    export(models.mobilenet_v3_large(weights=None), (image,), out / "mobilenet_v3_large.onnx")
    export(r2plus1d_18(weights=None), (torch.randn(1, 3, 8, 56, 56),), out / "r2plus1d_18.onnx")


REPARAM = ["repvgg_a0", "mobileone_s0", "repvit_m0_9"]


def reparam(out: Path) -> None:
    """timm's re-parameterizable models in their training-time form, as created (their `reparameterize`
    not called): RepVGG-A0, MobileOne-S0 (depthwise branches, over-parameterized four times) and RepViT-M0.9,
    through the TorchScript exporter, and MobileOne-S0 through torch.export's (its batch norms left unfolded).
    The batch norms get random running statistics and affine parameters, so folding them is seen in numbers."""
    import timm
    import torch

    image = torch.randn(1, 3, 224, 224)
    for name in REPARAM:
        export(randomized_batch_norms(timm.create_model(name, pretrained=False)), (image,), out / f"timm_{name}.onnx")
    export(randomized_batch_norms(timm.create_model("mobileone_s0", pretrained=False)), (image,),
           out / "dynamo_timm_mobileone_s0.onnx", dynamo=True)


def half(out: Path) -> None:
    """float16 models (`model.half()`, float16 inputs), as users export them for GPUs: MobileOne-S0 and
    RepVGG-A0 in their training-time form, whose batch norms are left for the pass to fold (TVM 0.27's
    default pipeline builds no float16 batch_norm: only the pass's result builds), ResNet-18 (the
    exporter folds its batch norms), DenseNet-121 (batch norms after concats, which no rule folds: the
    pass returns it re-emitted, which builds) and BERT. Batch-norm scales in [0.2, 0.5]: with [0.5, 1.5]
    MobileOne's activations grow to 1e17, past float16's range."""
    import timm
    import torch
    import torchvision.models as models
    import transformers as T

    image = torch.randn(1, 3, 224, 224).half()
    for name in ("mobileone_s0", "repvgg_a0"):
        model = randomized_batch_norms(timm.create_model(name, pretrained=False), scales=(0.2, 0.5)).half()
        export(model, (image,), out / f"half_timm_{name}.onnx")
    export(models.resnet18(weights=None).half(), (image,), out / "half_resnet18.onnx")
    with torch.random.fork_rng():  # added in session 35: the models after it keep their weights
        densenet = randomized_batch_norms(models.densenet121(weights=None), scales=(0.2, 0.5)).half()
    export(densenet, (image,), out / "half_densenet121.onnx")
    bert = T.BertModel(T.BertConfig(vocab_size=100, **SMALL)).half()
    export(first_output(bert, "input_ids"), (torch.randint(0, 100, (1, 16)),), out / "half_hf_bert.onnx",
           input_names=["input_ids"])


TIMM = ["ghostnet_100", "hrnet_w18_small", "fastvit_t8", "coat_lite_tiny", "dpn68", "pvt_v2_b0", "ese_vovnet19b_dw",
        "nf_resnet26", "poolformer_s12", "cspresnet50", "mobilevitv2_050", "xcit_nano_12_p16_224"]


def timm_models(out: Path) -> None:
    """timm architectures torchvision lacks (session 35): ghost modules, HRNet's multi-resolution fusions,
    FastViT's and CoaT's re-parameterizable and convolutional attention, dual-path blocks, PVT-v2, VoVNet's
    one-shot aggregation with effective squeeze-excitation, NF-ResNet's weight standardization, PoolFormer's
    and MobileViT-v2's group norms, CSP stages and XCiT's cross-covariance attention. Batch norms randomized."""
    import timm
    import torch

    for name in TIMM:
        size = 256 if name.startswith("mobilevit") else 224
        model = randomized_batch_norms(timm.create_model(name, pretrained=False))
        export(model, (torch.randn(1, 3, size, size),), out / f"timm_{name}.onnx")


def hf2(out: Path) -> None:
    """More transformers architectures (session 35): ELECTRA, MPNet, GPT-Neo (local attention), BLOOM
    (ALiBi), ConvBERT (span convolutions), Funnel (pooled queries), XLNet (two-stream relative attention),
    Swin-v2, Data2Vec-vision and HF's MobileNetV2 (its own padding)."""
    import torch
    import transformers as T

    ids = torch.randint(0, 100, (1, 16))
    text = {
        "hf_electra": T.ElectraModel(T.ElectraConfig(vocab_size=100, embedding_size=32, **SMALL)),
        "hf_mpnet": T.MPNetModel(T.MPNetConfig(vocab_size=100, **SMALL)),
        "hf_gpt_neo": T.GPTNeoModel(T.GPTNeoConfig(vocab_size=100, hidden_size=64, num_layers=2, num_heads=4,
                                                attention_types=[[["global", "local"], 1]], window_size=8)),
        "hf_bloom": T.BloomModel(T.BloomConfig(vocab_size=100, hidden_size=64, n_layer=2, n_head=4)),
        "hf_convbert": T.ConvBertModel(T.ConvBertConfig(vocab_size=100, embedding_size=64, **SMALL)),
        "hf_funnel": T.FunnelBaseModel(T.FunnelConfig(vocab_size=100, d_model=64, n_head=4, d_head=16, d_inner=128,
                                                   block_sizes=[1, 1])),
        "hf_xlnet": T.XLNetModel(T.XLNetConfig(vocab_size=100, d_model=64, n_layer=2, n_head=4, d_inner=128)),
    }
    export_on_tokens(text, ids, out)
    vision = {
        "swinv2": T.Swinv2Model(T.Swinv2Config(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1],
                                               num_heads=[2, 4], window_size=4)),
        "data2vec_vision": T.Data2VecVisionModel(T.Data2VecVisionConfig(image_size=64, patch_size=16,
                                                                        use_relative_position_bias=True, **SMALL)),
        "mobilenet_v2": T.MobileNetV2Model(T.MobileNetV2Config(image_size=64, depth_multiplier=0.35)),
    }
    for name, model in vision.items():
        export(first_output(randomized_batch_norms(model), "pixel_values"), (torch.randn(1, 3, 64, 64),),
               out / f"hf_{name}.onnx")


TIMM2 = ["efficientformerv2_s0", "tiny_vit_5m_224", "efficientvit_b0", "levit_128s", "edgenext_xx_small",
         "mambaout_femto", "starnet_s050", "mobilenetv4_conv_small", "ghostnetv2_100", "inception_next_atto"]


def timm2(out: Path) -> None:
    """timm's recent efficient architectures (from the robustness sweep of unusual models): EfficientFormer-v2's
    and TinyViT's attention beside convs, EfficientViT's linear attention, LeViT's attention with batch-normed
    projections, EdgeNeXt's split depthwise transposed attention, MambaOut's gated convs, StarNet's element-wise
    products, MobileNetV4's universal inverted bottlenecks, GhostNet-v2's decoupled fully connected attention and
    InceptionNeXt's split depthwise kernels. Batch norms randomized."""
    import timm
    import torch

    image = torch.randn(1, 3, 224, 224)
    for name in TIMM2:
        export(randomized_batch_norms(timm.create_model(name, pretrained=False)), (image,), out / f"timm_{name}.onnx")


def hf3(out: Path) -> None:
    """transformers architectures from the robustness sweep: RWKV (its recurrence unrolled over the tokens),
    MobileBERT (bottlenecks, no-norm layers), SqueezeBERT (grouped 1-D convs for projections), LeViT and YOLOS
    (ViT with detection tokens)."""
    import torch
    import transformers as T

    text = {
        "hf_rwkv": T.RwkvModel(T.RwkvConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2,
                                            attention_hidden_size=64, intermediate_size=128, context_length=64)),
        "hf_mobilebert": T.MobileBertModel(T.MobileBertConfig(vocab_size=100, embedding_size=32,
                                                              intra_bottleneck_size=32, true_hidden_size=32, **SMALL)),
        "hf_squeezebert": T.SqueezeBertModel(T.SqueezeBertConfig(vocab_size=100, embedding_size=64, **SMALL)),
    }
    export_on_tokens(text, torch.randint(0, 100, (1, 16)), out)
    vision = {
        "levit": T.LevitModel(T.LevitConfig(image_size=64, hidden_sizes=[64, 96, 128], num_attention_heads=[2, 3, 4],
                                            depths=[1, 1, 1], key_dim=[16, 16, 16])),
        "yolos": T.YolosModel(T.YolosConfig(image_size=[64, 64], patch_size=16, num_detection_tokens=10, **SMALL)),
    }
    for name, model in vision.items():
        export(first_output(randomized_batch_norms(model), "pixel_values"), (torch.randn(1, 3, 64, 64),),
               out / f"hf_{name}.onnx")


def edge(out: Path) -> None:
    """Graphs other tools make (from the robustness sweep): a scripted data-dependent `if` (ONNX If), a QDQ-quantized
    ResNet-18 (onnxruntime's quantize_static), two matmuls computed in bfloat16 between casts (which onnxruntime
    cannot run: TVM against TVM) and torch.export's ResNet-18 at opset 20."""
    import torch
    import torchvision.models as models

    export(torch.jit.script(branching_cnn()), (torch.randn(1, 3, 16, 16),), out / "edge_if_scripted.onnx",
           input_names=["x"])
    quantized_resnet18(out / "edge_qdq_resnet18.onnx")
    bfloat16_matmuls(out / "edge_bfloat16_matmuls.onnx")
    export(randomized_batch_norms(models.resnet18(weights=None)), (torch.randn(1, 3, 224, 224),),
           out / "edge_opset20_dynamo_resnet18.onnx", dynamo=True, opset=20)


def branching_cnn():
    """A CNN whose second block depends on the sign of its activations' sum (scripted, the exporter writes If)."""
    import torch

    class BranchingCNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.then = torch.nn.Conv2d(8, 8, 3, padding=1)
            self.otherwise = torch.nn.Conv2d(8, 8, 1)

        def forward(self, x):
            h = torch.relu(self.stem(x))
            if h.sum() > 0:
                h = self.then(h) + h
            else:
                h = self.otherwise(h) * 2.0
            return torch.relu(h)

    return BranchingCNN().eval()


def quantized_resnet18(path: Path) -> None:
    """ResNet-18 quantized to QDQ (int8 weights, uint8 activations), calibrated on two seeded random images."""
    import tempfile

    import numpy as np
    import torch
    import torchvision.models as models

    try:
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
        from onnxruntime.quantization.shape_inference import quant_pre_process
    except ImportError as exc:
        print(f"not exported {path.stem}: {exc}", flush=True)
        return

    class Images(CalibrationDataReader):
        def __init__(self, name: str, count: int = 2):
            rng = np.random.default_rng(0)
            self.feeds = iter([{name: rng.standard_normal((1, 3, 224, 224)).astype(np.float32)} for _ in range(count)])

        def get_next(self):
            return next(self.feeds, None)

    with tempfile.TemporaryDirectory() as tmp:
        float_model, prepared = Path(tmp) / f"{path.stem}_float.onnx", Path(tmp) / "prepared.onnx"
        export(models.resnet18(weights=None), (torch.randn(1, 3, 224, 224),), float_model, input_names=["input"])
        try:
            quant_pre_process(str(float_model), str(prepared), skip_symbolic_shape=True)
            quantize_static(str(prepared), str(path), Images("input"), quant_format=QuantFormat.QDQ,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
            print(f"exported {path.name}", flush=True)
        except Exception as exc:  # noqa: BLE001 - as export's
            print(f"not exported {path.stem}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}", flush=True)


def bfloat16_matmuls(path: Path) -> None:
    """x (float32) cast to bfloat16, x @ a + x @ b there, the sum cast back to float32 (onnx.helper): the mixed
    precision a user writes by hand, and two matmuls on one input, which the pass merges."""
    import ml_dtypes
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array((0.2 * rng.standard_normal((32, 16))).astype(ml_dtypes.bfloat16), name)
               for name in ("a", "b")]
    nodes = [helper.make_node("Cast", ["x"], ["xb"], to=TensorProto.BFLOAT16),
             helper.make_node("MatMul", ["xb", "a"], ["p"]), helper.make_node("MatMul", ["xb", "b"], ["q"]),
             helper.make_node("Add", ["p", "q"], ["s"]), helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT)]
    graph = helper.make_graph(nodes, "bfloat16_matmuls",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    print(f"exported {path.name}", flush=True)


def symbolic(out: Path) -> None:
    """Dynamic exports, into out/symbolic (checked with `check_models --symbolic`, their sizes kept symbolic):
    a dynamic batch from both exporters (torch.export's keeps the batch norms), LeViT's batch norms after and
    before its Linears, and BERT with a dynamic batch and sequence."""
    import timm
    import torch
    import torchvision.models as models
    import transformers as T

    out = out / "symbolic"
    out.mkdir(parents=True, exist_ok=True)
    image, batch = torch.randn(2, 3, 64, 64), torch.export.Dim("batch", min=1, max=64)
    for name in ("resnet18", "mobilenet_v3_small"):
        export(randomized_batch_norms(getattr(models, name)(weights=None)), (image,), out / f"dynamo_{name}_batch.onnx",
               dynamo=True, input_names=["x"], dynamic_shapes={"x": {0: batch}})
    axes = {"x": {0: "batch"}, "out": {0: "batch"}}
    export(timm.create_model("levit_128s", pretrained=False), (torch.randn(1, 3, 224, 224),),
           out / "timm_levit_128s_batch.onnx", input_names=["x"], output_names=["out"], dynamic_axes=axes)
    export(timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=64), (image,),
           out / "timm_vit_tiny_batch.onnx", input_names=["x"], output_names=["out"], dynamic_axes=axes)
    bert = first_output(T.BertModel(T.BertConfig(vocab_size=100, **SMALL)), "input_ids")
    export(bert, (torch.randint(0, 100, (1, 16)),), out / "hf_bert_batch_seq.onnx", input_names=["input_ids"],
           output_names=["out"], dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "out": {0: "batch", 1: "seq"}})


def onedee(out: Path) -> None:
    """1-D convs with batch norms after them: Wav2Vec2-Conformer's and FastSpeech2-Conformer's convolution modules
    (pointwise Conv1d, GLU, depthwise Conv1d, BatchNorm1d, activation, pointwise Conv1d; FastSpeech2's convs with
    biases, its postnet Conv1d + BatchNorm1d + tanh), PointNet (Conv1d k=1 + BatchNorm1d, BatchNorm1d after
    Linears) and an ECG 1-D ResNet (bench/corpus/models_1d.py), both through both exporters; Wav2Vec2 with
    layer-normed feature convs as a 1-D model with nothing to fold. Both exporters fold a batch norm that follows
    a Conv themselves (the TorchScript one in eval mode, torch.export's onnxscript optimizer), so each `_bn` file
    keeps them: training=PRESERVE on the eval model, or optimize=False. The whole FastSpeech2 model exports, but
    TVM's importer refuses its length regulator's data-dependent Expand."""
    import torch
    import transformers as T

    from .models_1d import pointnet, resnet1d

    audio, keep = torch.randn(1, 4000), {"training": torch.onnx.TrainingMode.PRESERVE}
    features = dict(conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
                    num_conv_pos_embedding_groups=4, **SMALL)
    conformer = randomized_batch_norms(T.Wav2Vec2ConformerModel(T.Wav2Vec2ConformerConfig(
        conv_depthwise_kernel_size=15, max_source_positions=512, **features)), kind="BatchNorm1d")
    for suffix, kwargs in (("", {}), ("_bn", keep)):
        export(first_output(conformer, "input_values"), (audio,), out / f"hf_wav2vec2_conformer{suffix}.onnx", **kwargs)
    w2v = T.Wav2Vec2Model(T.Wav2Vec2Config(feat_extract_norm="layer", conv_bias=True, do_stable_layer_norm=True,
                                           **features))
    export(first_output(w2v, "input_values"), (audio,), out / "hf_wav2vec2_layer_norm.onnx")
    fastspeech = randomized_batch_norms(T.FastSpeech2ConformerModel(T.FastSpeech2ConformerConfig(
        vocab_size=100, hidden_size=64, num_mel_bins=16, encoder_layers=2, decoder_layers=2, encoder_linear_units=128,
        decoder_linear_units=128, decoder_kernel_size=15, speech_decoder_postnet_layers=3,
        speech_decoder_postnet_units=64, duration_predictor_channels=64, energy_predictor_channels=64,
        pitch_predictor_channels=64, pitch_predictor_layers=2)), kind="BatchNorm1d")
    ids, mels = torch.randint(1, 100, (1, 16)), torch.randn(1, 32, 64)
    encoder = first_output(fastspeech.encoder, "input_tensor", return_dict=False)
    for suffix, kwargs in (("", {}), ("_bn", keep)):
        export(encoder, (ids,), out / f"hf_fastspeech2_conformer_encoder{suffix}.onnx", input_names=["input_ids"],
               **kwargs)
        export(fastspeech.speech_decoder_postnet, (mels,), out / f"hf_fastspeech2_conformer_postnet{suffix}.onnx",
               **kwargs)
    for name, model, shape in (("pointnet", pointnet(), (1, 3, 1024)), ("resnet1d_ecg", resnet1d(), (1, 12, 1000))):
        model, x = randomized_batch_norms(model, kind="BatchNorm1d"), torch.randn(*shape)
        export(model, (x,), out / f"{name}.onnx")
        export(model, (x,), out / f"{name}_bn.onnx", **keep)
        export(model, (x,), out / f"dynamo_{name}.onnx", dynamo=True)
        export(model, (x,), out / f"dynamo_{name}_bn.onnx", dynamo=True, optimize=False)


def decoders(out: Path) -> None:
    """Transposed convs with a batch norm after each (bench/corpus/models_decoders.py): DCGAN's generator,
    SimpleBaseline's pose head on a ResNet-18, a pix2pix U-Net generator, a LinkNet decoder block; through both
    exporters, and the TorchScript one also with training=PRESERVE (neither exporter folds a batch norm into a
    ConvTranspose, but PRESERVE keeps the ones after the plain convs too)."""
    import torch

    from .models_decoders import dcgan_generator, linknet_decoder, pose_resnet18, unet_generator

    keep = {"training": torch.onnx.TrainingMode.PRESERVE}
    for name, model, shape in (("dcgan_generator", dcgan_generator(), (1, 64, 1, 1)),
                               ("pose_resnet18", pose_resnet18(), (1, 3, 128, 96)),
                               ("unet_generator", unet_generator(), (1, 3, 64, 64)),
                               ("linknet_decoder", linknet_decoder(), (1, 64, 16, 16))):
        model, x = randomized_batch_norms(model), torch.randn(*shape)
        export(model, (x,), out / f"{name}.onnx")
        export(model, (x,), out / f"{name}_bn.onnx", **keep)
        export(model, (x,), out / f"dynamo_{name}.onnx", dynamo=True)


def superres(out: Path) -> None:
    """Super-resolution by pixel shuffles (bench/corpus/models_decoders.py): ESPCN x3 on one channel and a small
    EDSR x4 (two conv + PixelShuffle(2) steps, convs after each); through both exporters."""
    import torch

    from .models_decoders import edsr, espcn

    for name, model, shape in (("espcn", espcn(), (1, 1, 64, 64)), ("edsr", edsr(), (1, 3, 48, 48))):
        model, x = model.eval(), torch.randn(*shape)
        export(model, (x,), out / f"{name}.onnx")
        export(model, (x,), out / f"dynamo_{name}.onnx", dynamo=True)


def styled(out: Path) -> None:
    """Reflect pads and instance norms (bench/corpus/models_styled.py): CycleGAN's ResNet generator and a fast style
    transfer net, at 128 x 128; through both exporters (affine instance norms randomised, as trained ones are)."""
    import torch

    from .models_styled import cyclegan_generator, style_transfer

    for name, model in (("cyclegan_generator", cyclegan_generator()), ("style_transfer", style_transfer())):
        model, x = randomized_norm_affines(model, "InstanceNorm2d").eval(), torch.randn(1, 3, 128, 128)
        export(model, (x,), out / f"{name}.onnx")
        export(model, (x,), out / f"dynamo_{name}.onnx", dynamo=True)


def groupnorm(out: Path) -> None:
    """GroupNorm (bench/corpus/models_groupnorm.py): a ResNet-18 with GroupNorm(32) at 224 x 224 and a VAE decoder
    from a 4-channel 16 x 16 latent to 64 x 64; through both exporters (affine parameters randomised, as trained
    ones are)."""
    import torch

    from .models_groupnorm import resnet18_gn, vae_decoder

    for name, model, shape in (("resnet18_gn", resnet18_gn(), (1, 3, 224, 224)),
                               ("vae_decoder", vae_decoder(), (1, 4, 16, 16))):
        model, x = randomized_norm_affines(model, "GroupNorm").eval(), torch.randn(*shape)
        export(model, (x,), out / f"{name}.onnx")
        export(model, (x,), out / f"dynamo_{name}.onnx", dynamo=True)


FAMILIES = {"vision": vision, "hf": hf, "dynamo": dynamo, "more": more, "wider": wider, "reparam": reparam,
            "half": half, "timm": timm_models, "hf2": hf2, "timm2": timm2, "hf3": hf3, "edge": edge,
            "symbolic": symbolic, "onedee": onedee, "decoders": decoders, "superres": superres,
            "styled": styled, "groupnorm": groupnorm}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("families", nargs="+", choices=tuple(FAMILIES))
    p.add_argument("--out", type=Path, default=Path("build/corpus"))
    args = p.parse_args(argv)
    import torch

    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    args.out.mkdir(parents=True, exist_ok=True)
    for family in args.families:
        FAMILIES[family](args.out)


if __name__ == "__main__":
    main()
