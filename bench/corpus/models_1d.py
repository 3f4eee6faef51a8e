"""Two 1-D convolutional models written as plain torch modules for the corpus's `onedee` family (nothing in
torchvision or timm is 1-D): PointNet's classifier and a 1-D ResNet as used on ECGs. Run with torch installed."""
from __future__ import annotations


def pointnet():
    """PointNet's classifier without its input and feature transforms: shared per-point MLPs as Conv1d (k=1) +
    BatchNorm1d + ReLU, a max over the points, then Linear + BatchNorm1d + ReLU (batch norms on (N, C))."""
    import torch
    from torch import nn

    def conv(cin, cout):
        return [nn.Conv1d(cin, cout, 1), nn.BatchNorm1d(cout), nn.ReLU()]

    def linear(cin, cout):
        return [nn.Linear(cin, cout), nn.BatchNorm1d(cout), nn.ReLU()]

    class PointNet(nn.Module):
        def __init__(self, classes: int = 10):
            super().__init__()
            self.features = nn.Sequential(*conv(3, 64), *conv(64, 64), *conv(64, 128), *conv(128, 256))
            self.head = nn.Sequential(*linear(256, 128), *linear(128, 64), nn.Linear(64, classes))

        def forward(self, x):
            return self.head(self.features(x).max(dim=2).values)  # (torch.amax: TVM's PyTorch frontend lacks it)

    return PointNet()


def resnet1d():
    """A 1-D ResNet as used on 12-lead ECGs: basic blocks of two Conv1d (k=3, no bias) + BatchNorm1d with a residual
    add, each stage's first block strided, with a 1x1 Conv1d + BatchNorm1d shortcut; a k=15 stem, max pool."""
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv1d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm1d(cout)
            self.conv2, self.bn2 = nn.Conv1d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm1d(cout)
            self.shortcut = (nn.Sequential(nn.Conv1d(cin, cout, 1, stride, bias=False), nn.BatchNorm1d(cout))
                             if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x):
            h = self.bn1(self.conv1(x)).relu()
            return (self.bn2(self.conv2(h)) + self.shortcut(x)).relu()

    class ResNet1d(nn.Module):
        def __init__(self, leads: int = 12, classes: int = 5, widths=(32, 64, 128)):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv1d(leads, widths[0], 15, 2, 7, bias=False), nn.BatchNorm1d(widths[0]),
                                      nn.ReLU(), nn.MaxPool1d(3, 2, 1))
            blocks, cin = [], widths[0]
            for i, w in enumerate(widths):
                blocks += [Block(cin, w, 1 if i == 0 else 2), Block(w, w, 1)]
                cin = w
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(cin, classes)

        def forward(self, x):
            return self.fc(self.blocks(self.stem(x)).mean(dim=2))

    return ResNet1d()
