"""Hand-written rules that compute a transposed conv as a stride-1 conv and a pixel shuffle (sub-pixel conv).

TVM runs conv2d_transpose as a conv over its input spread out by the stride, so stride^2 times the
multiply-adds are spent on zeros (topi conv2d_transpose_nchw: dilate, pad, conv). The same output is one
stride-1 conv over the input itself, with a kernel per output phase (gathered from the transposed conv's
taps by subpixel_kernel, weights only), its phases interleaved by a reshape, transpose and reshape. A
ConvTranspose2d(k=4, s=2, p=1) of DCGAN's generators and U-Nets becomes a 3x3 conv with four times the
output channels: 9 multiply-adds per output value and input channel instead of TVM's 16. An output that is
not a whole number of strides (k=3, s=2, p=1: 2 * H - 1 rows) is computed one position per phase longer
and cropped (h-convT-subpixel-crop). Not first-phase rules: the conv and the shuffle's copy are priced
against the transposed conv, and the search keeps the cheaper. Proved by the axioms
subpixel/conv_transpose_subpixel(_cropped), whose expressions they use:

    python -m taso_relay.generator.subpixel_rules --out rules/handwritten_subpixel.json
    taso-relay rules verify rules/handwritten_subpixel.json
"""
from __future__ import annotations

from ..verifier.axioms import subpixel as SP
from .handwritten import node, write_main


def _rule(id_: str, cropped: bool, example: dict, doc: str) -> dict:
    source = [node("c", "conv2d_transpose", ["x", "w"], **SP.CONV_T)]
    target = [node("k", "subpixel_kernel", ["w"], **SP.KERNEL_ATTRS),
              node("conv", "conv2d", ["x", "k"], **SP.CONV_ATTRS),
              node("phases", "reshape", ["conv"], shape=SP.PHASES),
              node("moved", "transpose", ["phases"], perm=SP.PHASE_PERM),
              node("out", "reshape", ["moved"], shape=SP.SHUFFLED)]
    if cropped:
        target.append(node("cropped", "strided_slice", ["out"], **SP.CROP))
    return {"id": id_, "inputs": [{"name": "x", "kind": "any"}, {"name": "w", "kind": "weight"}],
            "source": source, "target": target, "outputs": [["c", target[-1]["id"]]],
            "constraints": SP.GUARD + (SP.CROPPED if cropped else SP.WHOLE), "example": example,
            "provenance": {"generator": "handwritten", "family": "subpixel",
                           "proof": f"axiom subpixel/conv_transpose_subpixel{'_cropped' * cropped}", "doc": doc}}


def subpixel_rules() -> list[dict]:
    return [
        _rule("h-convT-subpixel", False, {"inputs": {"x": [1, 4, 5, 6], "w": [4, 3, 4, 4]},
                                          "vars": {"s": [2, 2], "p": [1, 1, 1, 1], "op": [0, 0]}},
              "A one-group, undilated transposed conv whose output is a whole number of strides is a stride-1 conv "
              "with a kernel per output phase, its phases interleaved by a pixel shuffle: no multiply-adds spent "
              "on the zeros TVM spreads its input with."),
        _rule("h-convT-subpixel-crop", True, {"inputs": {"x": [1, 4, 5, 6], "w": [4, 3, 3, 3]},
                                              "vars": {"s": [2, 2], "p": [1, 1, 1, 1], "op": [0, 0]}},
              "The same for an output that is not (ConvTranspose2d(k=3, s=2, p=1): 2 * H - 1 rows): one more "
              "position per phase, the rows and columns past the output cropped."),
    ]


def main(argv=None) -> int:
    return write_main(argv, __doc__.splitlines()[0], subpixel_rules, (
        "A transposed conv (one group, no dilation) becomes a stride-1 conv with a kernel per output phase and a "
        "pixel shuffle, cropped where its output is not a whole number of strides "
        "(taso_relay/generator/subpixel_rules.py). Proved "
        "like the generated ones (taso-relay rules verify)."))


if __name__ == "__main__":
    raise SystemExit(main())
