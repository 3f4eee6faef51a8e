"""Image-to-image nets that pad by reflection and normalise per instance, written as plain torch modules for the
corpus's `styled` family (torchvision and timm have none): CycleGAN's ResNet generator and Johnson et al.'s fast
style transfer net. ONNX writes their ReflectionPad2d as Pad(mode=reflect) and InstanceNorm2d as
InstanceNormalization, which TVM imports as a call_tir of topi's mirror_pad and as mean / variance arithmetic.
Run with torch installed."""
from __future__ import annotations


def _conv_in_relu(cin, cout, k, stride=1, reflect=True, relu=True, affine=False):
    """[ReflectionPad2d] + Conv2d + InstanceNorm2d [+ ReLU]: the unit both models repeat."""
    from torch import nn

    pad = [nn.ReflectionPad2d(k // 2)] if reflect else []
    conv = nn.Conv2d(cin, cout, k, stride, padding=0 if reflect else k // 2)
    return [*pad, conv, nn.InstanceNorm2d(cout, affine=affine), *([nn.ReLU()] if relu else [])]


def _residual(width, affine):
    import torch
    from torch import nn

    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(*_conv_in_relu(width, width, 3, affine=affine),
                                      *_conv_in_relu(width, width, 3, relu=False, affine=affine))

        def forward(self, x):
            return torch.add(x, self.body(x))

    return Residual()


def cyclegan_generator(width: int = 32, blocks: int = 6):
    """CycleGAN's ResNet generator: a reflect-padded 7x7 conv, two stride-2 convs down, residual blocks of
    reflect-padded 3x3 convs with instance norms, two transposed convs up, a reflect-padded 7x7 conv to the image
    and a tanh."""
    from torch import nn

    layers = [*_conv_in_relu(3, width, 7), *_conv_in_relu(width, width * 2, 3, 2, reflect=False),
              *_conv_in_relu(width * 2, width * 4, 3, 2, reflect=False)]
    layers += [_residual(width * 4, affine=False) for _ in range(blocks)]
    for k in (4, 2):
        layers += [nn.ConvTranspose2d(width * k, width * k // 2, 3, 2, 1, output_padding=1),
                   nn.InstanceNorm2d(width * k // 2), nn.ReLU()]
    layers += [nn.ReflectionPad2d(3), nn.Conv2d(width, 3, 7), nn.Tanh()]
    return nn.Sequential(*layers)


def style_transfer(width: int = 32, blocks: int = 5):
    """Johnson et al.'s fast style transfer net (as in PyTorch's examples): reflect-padded convs with affine instance
    norms, 9x9 in and out, two stride-2 convs down, residual blocks, nearest 2x upsampling before each conv up."""
    from torch import nn

    layers = [*_conv_in_relu(3, width, 9, affine=True), *_conv_in_relu(width, width * 2, 3, 2, affine=True),
              *_conv_in_relu(width * 2, width * 4, 3, 2, affine=True)]
    layers += [_residual(width * 4, affine=True) for _ in range(blocks)]
    for k in (4, 2):
        layers += [nn.Upsample(scale_factor=2, mode="nearest"), *_conv_in_relu(width * k, width * k // 2, 3,
                                                                               affine=True)]
    layers += [nn.ReflectionPad2d(4), nn.Conv2d(width, 3, 9)]
    return nn.Sequential(*layers)
