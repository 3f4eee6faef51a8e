"""Decoders with a batch norm after each transposed conv, written as plain torch modules for the corpus's `decoders`
family (torchvision and timm have none): DCGAN's generator, SimpleBaseline's pose head on a ResNet-18, a pix2pix
U-Net generator and a LinkNet decoder; and for the `superres` family, super-resolution nets that upsample by pixel
shuffles: ESPCN and a small EDSR. Run with torch installed."""
from __future__ import annotations


def _up(cin, cout, k=4, stride=2, pad=1, out_pad=0, bias=False):
    """ConvTranspose2d + BatchNorm2d + ReLU: the upsampling step every model here repeats."""
    from torch import nn

    return [nn.ConvTranspose2d(cin, cout, k, stride, pad, output_padding=out_pad, bias=bias), nn.BatchNorm2d(cout),
            nn.ReLU()]


def dcgan_generator(latent: int = 64, width: int = 32):
    """DCGAN's generator: a latent (N, latent, 1, 1) up to a 3 x 32 x 32 image through k4 transposed convs."""
    from torch import nn

    return nn.Sequential(*_up(latent, width * 4, stride=1, pad=0), *_up(width * 4, width * 2), *_up(width * 2, width),
                         nn.ConvTranspose2d(width, 3, 4, 2, 1, bias=False), nn.Tanh())


def pose_resnet18(joints: int = 17):
    """SimpleBaseline's pose estimator: a ResNet-18 trunk, three k4 stride-2 transposed convs + BN + ReLU, a 1x1
    conv to one heatmap per joint."""
    import torchvision
    from torch import nn

    trunk = torchvision.models.resnet18(weights=None)
    return nn.Sequential(*list(trunk.children())[:-2], *_up(512, 128), *_up(128, 128), *_up(128, 128),
                         nn.Conv2d(128, joints, 1))


def unet_generator(width: int = 16, depth: int = 4):
    """pix2pix's U-Net generator: k4 stride-2 convs + BN + LeakyReLU down, transposed convs + BN + ReLU up, each
    step's result concatenated with the encoder's of the same size."""
    import torch
    from torch import nn

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            chans = [width * 2 ** i for i in range(depth)]
            self.down = nn.ModuleList(
                nn.Sequential(nn.Conv2d(cin, cout, 4, 2, 1, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(0.2))
                for cin, cout in zip([3] + chans[:-1], chans))
            ups = [nn.Sequential(*_up(chans[-1], chans[-2]))]  # then each doubled by its skip's concat
            ups += [nn.Sequential(*_up(2 * chans[i], chans[i - 1])) for i in range(depth - 2, 0, -1)]
            self.up = nn.ModuleList(ups)
            self.out = nn.Sequential(nn.ConvTranspose2d(2 * chans[0], 3, 4, 2, 1), nn.Tanh())

        def forward(self, x):
            skips = []
            for step in self.down:
                x = step(x)
                skips.append(x)
            x = skips.pop()
            for step in self.up:
                x = torch.cat([step(x), skips.pop()], dim=1)
            return self.out(x)

    return UNet()


def linknet_decoder(cin: int = 64, cout: int = 32):
    """LinkNet's decoder block on a (N, cin, H, W) feature map: 1x1 conv + BN + ReLU to cin / 4, a k3 stride-2
    transposed conv with output padding 1 + BN + ReLU, 1x1 conv + BN + ReLU to cout."""
    from torch import nn

    mid = cin // 4
    return nn.Sequential(nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
                         *_up(mid, mid, k=3, out_pad=1), nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU())


def espcn(scale: int = 3, channels: int = 1):
    """ESPCN (Shi et al. 2016): 5x5 conv to 64 + tanh, 3x3 conv to 32 + tanh, 3x3 conv to channels * scale^2,
    PixelShuffle(scale)."""
    from torch import nn

    return nn.Sequential(nn.Conv2d(channels, 64, 5, padding=2), nn.Tanh(), nn.Conv2d(64, 32, 3, padding=1), nn.Tanh(),
                         nn.Conv2d(32, channels * scale ** 2, 3, padding=1), nn.PixelShuffle(scale))


def edsr(width: int = 32, blocks: int = 4, scale: int = 4):
    """EDSR's baseline, smaller: a 3x3 conv, residual blocks (conv, ReLU, conv, scaled by 0.1, added), a global
    skip, then x2 upsamplers (conv to 4 * width, PixelShuffle(2)) and a 3x3 conv to RGB."""
    import math

    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(width, width, 3, padding=1))

        def forward(self, x):
            return x + 0.1 * self.body(x)

    class EDSR(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Conv2d(3, width, 3, padding=1)
            self.body = nn.Sequential(*(Block() for _ in range(blocks)), nn.Conv2d(width, width, 3, padding=1))
            ups = []
            for _ in range(int(math.log2(scale))):
                ups += [nn.Conv2d(width, 4 * width, 3, padding=1), nn.PixelShuffle(2)]
            self.tail = nn.Sequential(*ups, nn.Conv2d(width, 3, 3, padding=1))

        def forward(self, x):
            x = self.head(x)
            return self.tail(x + self.body(x))

    return EDSR()
