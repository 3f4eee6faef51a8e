"""enlarge: zero-padding a kernel to a larger centred size, and convolving with it."""
from __future__ import annotations

from .base import N, axiom
from .common import ACTS, ident

W = ("o", "i", "kh", "kw")
K_DOMAIN = ((3, 3), (5, 5), (3, 5), (1, 3), (1, 1))
_E = ("(?K[0] - dim(w, 2)) // 2", "(?K[1] - dim(w, 3)) // 2")

AXIOMS = [
    axiom("conv_enlarge", "enlarge",
          N("conv2d", "x", N("enlarge", "w", kernel="?K"), strides="?s", padding="?p", dilation=(1, 1),
            groups="?g", activation="?a"),
          N("conv2d", "x", "w", strides="?s", dilation=(1, 1), groups="?g", activation="?a",
            padding=f"=(?p[0] - {_E[0]}, ?p[1] - {_E[1]}, ?p[2] - {_E[0]}, ?p[3] - {_E[1]})"),
          guard=[f"?p[0] >= {_E[0]}", f"?p[2] >= {_E[0]}", f"?p[1] >= {_E[1]}", f"?p[3] >= {_E[1]}"],
          shapes={"x": ("n", "=?i * ?g", "h", "w"), "w": W},
          dims={"kh": (1, 3), "kw": (1, 3), "h": (2, 3, 4, 5), "w": (2, 3, 4, 5)},
          domains={"K": K_DOMAIN, "s": ((1, 1), (2, 2), (1, 2)),
                   "p": ((1, 1, 1, 1), (0, 0, 0, 0), (2, 2, 2, 2), (1, 2, 1, 2), (2, 1, 1, 2)),
                   "g": (1, 2), "a": ACTS},
          doc="Convolving with a kernel zero-padded by e equals convolving with the kernel and e less padding "
              "(dilation 1)."),
    axiom("enlarge_noop", "enlarge", N("enlarge", "w", kernel="?K"), ident("w"),
          guard=["?K == (dim(w, 2), dim(w, 3))"], shapes={"w": W}, domains={"K": K_DOMAIN}),
    axiom("enlarge_twice", "enlarge", N("enlarge", N("enlarge", "w", kernel="?K1"), kernel="?K2"),
          N("enlarge", "w", kernel="?K2"), shapes={"w": W}, domains={"K1": K_DOMAIN, "K2": K_DOMAIN[::-1]}),
    axiom("enlarge_add", "enlarge", N("enlarge", N("add", "w1", "w2"), kernel="?K"),
          N("add", N("enlarge", "w1", kernel="?K"), N("enlarge", "w2", kernel="?K")),
          guard=["shape(w1) == shape(w2)"], shapes={"w1": W, "w2": W}, domains={"K": K_DOMAIN}, both_ways=True),
    axiom("enlarge_relu", "enlarge", N("enlarge", N("relu", "w"), kernel="?K"),
          N("relu", N("enlarge", "w", kernel="?K")), shapes={"w": W}, domains={"K": K_DOMAIN},
          both_ways=True, doc="relu(0) = 0: the zero border is the same either way."),
    axiom("enlarge_concat", "enlarge", N("enlarge", N("concat", "w1", "w2", axis="?ax"), kernel="?K"),
          N("concat", N("enlarge", "w1", kernel="?K"), N("enlarge", "w2", kernel="?K"), axis="?ax"),
          guard=["?ax <= 1"], shapes={"w1": W, "w2": ("o2", "i", "kh", "kw")},
          domains={"K": K_DOMAIN, "ax": (0, 1, 2)}, both_ways=False),
]
