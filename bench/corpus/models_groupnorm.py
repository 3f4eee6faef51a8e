"""Conv nets that normalise by GroupNorm, for the corpus's `groupnorm` family: a ResNet-18 with GroupNorm(32) for
its batch norms (as detection backbones and small-batch training use it) and a latent-diffusion VAE decoder
(Stable Diffusion's layout, narrower). PyTorch's ONNX exporters write GroupNorm as reshape (N, G, -1),
InstanceNormalization, reshape back, then the per-channel scale and shift; TVM imports the instance norm as
mean / variance arithmetic. Run with torch installed."""
from __future__ import annotations


def resnet18_gn(groups: int = 32):
    """torchvision's ResNet-18 with every BatchNorm2d a GroupNorm of `groups` groups."""
    import torchvision
    from torch import nn

    return torchvision.models.resnet18(norm_layer=lambda c: nn.GroupNorm(groups, c))


def _norm(c):
    from torch import nn

    return nn.GroupNorm(32, c, eps=1e-6)


def _resnet_block(cin, cout):
    """GroupNorm, SiLU, 3x3 conv, twice, and the skip (a 1x1 conv where the widths differ)."""
    import torch
    from torch import nn

    class ResnetBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(_norm(cin), nn.SiLU(), nn.Conv2d(cin, cout, 3, padding=1),
                                      _norm(cout), nn.SiLU(), nn.Conv2d(cout, cout, 3, padding=1))
            self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x):
            return torch.add(self.skip(x), self.body(x))

    return ResnetBlock()


def _attention(c):
    """The mid block's single-head self-attention over the positions, GroupNorm first."""
    import torch
    from torch import nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.qkv, self.out = _norm(c), nn.Conv2d(c, 3 * c, 1), nn.Conv2d(c, c, 1)

        def forward(self, x):
            n, _, h, w = x.shape
            q, k, v = self.qkv(self.norm(x)).reshape(n, 3, c, h * w).unbind(1)
            weights = torch.softmax(q.transpose(1, 2) @ k / c ** 0.5, dim=-1)
            return x + self.out((v @ weights.transpose(1, 2)).reshape(n, c, h, w))

    return Attention()


def vae_decoder(latent: int = 4, widths=(128, 128, 64)):
    """A VAE decoder as latent diffusion's: conv in, a mid block (ResNet block, attention, ResNet block), up
    blocks of two ResNet blocks and a nearest 2x upsampling with a conv, GroupNorm, SiLU and a conv to RGB."""
    from torch import nn

    layers = [nn.Conv2d(latent, widths[0], 3, padding=1), _resnet_block(widths[0], widths[0]), _attention(widths[0]),
              _resnet_block(widths[0], widths[0])]
    for k, (cin, cout) in enumerate(zip(widths, widths[1:])):
        layers += [_resnet_block(cin, cout), _resnet_block(cout, cout),
                   nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(cout, cout, 3, padding=1)]
    layers += [_resnet_block(widths[-1], widths[-1]), _norm(widths[-1]), nn.SiLU(), nn.Conv2d(widths[-1], 3, 3,
                                                                                               padding=1)]
    return nn.Sequential(*layers)

