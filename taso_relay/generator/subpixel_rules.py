"""A hand-written rule that computes a transposed conv as a stride-1 conv and a pixel shuffle (sub-pixel conv).

TVM runs conv2d_transpose as a conv over its input spread out by the stride, so stride^2 times the
multiply-adds are spent on zeros (topi conv2d_transpose_nchw: dilate, pad, conv). The same output is one
stride-1 conv over the input itself, with a kernel per output phase (gathered from the transposed conv's
taps by subpixel_kernel, weights only), its phases interleaved by a reshape, transpose and reshape. A
ConvTranspose2d(k=4, s=2, p=1) of DCGAN's generators and U-Nets becomes a 3x3 conv with four times the
output channels: 9 multiply-adds per output value and input channel instead of TVM's 16. Not a first-phase
rule: the conv and the shuffle's copy are priced against the transposed conv, and the search keeps the
cheaper. Proved by the axiom subpixel/conv_transpose_subpixel, whose expressions it uses:

    python -m taso_relay.generator.subpixel_rules --out rules/handwritten_subpixel.json
    taso-relay rules verify rules/handwritten_subpixel.json
"""
from __future__ import annotations

from ..verifier.axioms import subpixel as SP
from .handwritten import node, write_main


def subpixel_rules() -> list[dict]:
    source = [node("c", "conv2d_transpose", ["x", "w"], **SP.CONV_T)]
    target = [node("k", "subpixel_kernel", ["w"], **SP.KERNEL_ATTRS),
              node("conv", "conv2d", ["x", "k"], **SP.CONV_ATTRS),
              node("phases", "reshape", ["conv"], shape=SP.PHASES),
              node("moved", "transpose", ["phases"], perm=SP.PHASE_PERM),
              node("out", "reshape", ["moved"], shape=SP.OUT)]
    return [{"id": "h-convT-subpixel", "inputs": [{"name": "x", "kind": "any"}, {"name": "w", "kind": "weight"}],
             "source": source, "target": target, "outputs": [["c", "out"]], "constraints": SP.GUARD,
             "example": {"inputs": {"x": [1, 4, 5, 6], "w": [4, 3, 4, 4]},
                         "vars": {"s": [2, 2], "p": [1, 1, 1, 1], "op": [0, 0]}},
             "provenance": {"generator": "handwritten", "family": "subpixel",
                            "proof": "axiom subpixel/conv_transpose_subpixel",
                            "doc": "A one-group, undilated transposed conv whose output is a whole number of "
                                   "strides is a stride-1 conv with a kernel per output phase, its phases "
                                   "interleaved by a pixel shuffle: no multiply-adds spent on the zeros TVM "
                                   "spreads its input with."}}]


def main(argv=None) -> int:
    return write_main(argv, __doc__.splitlines()[0], subpixel_rules, (
        "A transposed conv (one group, no dilation, output a whole number of strides) becomes a stride-1 conv "
        "with a kernel per output phase and a pixel shuffle (taso_relay/generator/subpixel_rules.py). Proved "
        "like the generated ones (taso-relay rules verify)."))


if __name__ == "__main__":
    raise SystemExit(main())
