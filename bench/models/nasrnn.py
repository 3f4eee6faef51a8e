"""NasRNN: the NAS-discovered recurrent cell, as in TASO's ``nasrnn`` benchmark.

For time step ``s`` with input ``x`` [1, hidden] and state ``h`` [1, hidden]::

    t_i = x @ W_i + h @ U_i            for i = 0..7   (MatMul, MatMul, Add)
    m0 = relu(t0) + sigmoid(t3)
    m1 = sigmoid(t1) + tanh(t2)
    m2 = sigmoid(t4) * tanh(t5)
    m3 = sigmoid(t6) * relu(t7)
    m4 = sigmoid(m1) + tanh(m2)
    m5 = tanh(m0) * tanh(m3)
    m6 = tanh(m4) * tanh(m5)
    h' = tanh(m6)

Like TASO's script, every time step gets its own fresh W_i / U_i (the graph is
an unrolled chain of cells, not weight-tied) and the initial state is a
weight (an initializer here), not an input.  TASO feeds one [1, hidden] input
per step; to keep a single graph input, ``input`` is [steps, hidden] (batch 1
is implicit) and one Split along axis 0 yields the per-step [1, hidden] rows.
Output: the final state [1, hidden].

quick=True: 2 time steps and hidden size 128 instead of 5 and 512.
"""

from __future__ import annotations

import onnx

from ._builder import GraphBuilder

FULL_HIDDEN, FULL_STEPS = 512, 5
QUICK_HIDDEN, QUICK_STEPS = 128, 2
NUM_GATES = 8


def nas_cell(g: GraphBuilder, x: str, h: str, hidden: int, name: str,
             out_name: str | None = None) -> str:
    def combine(i: int) -> str:
        wx = g.he_weight([hidden, hidden], hidden, f"{name}.W{i}")
        wh = g.he_weight([hidden, hidden], hidden, f"{name}.U{i}")
        return g.add(g.op("MatMul", [x, wx], f"{name}.xW{i}"),
                     g.op("MatMul", [h, wh], f"{name}.hU{i}"), f"{name}.t{i}")

    def act(kind: str, v: str) -> str:
        return g.op(kind, [v], f"{name}.{kind.lower()}")

    t = [combine(i) for i in range(NUM_GATES)]
    m0 = g.add(act("Relu", t[0]), act("Sigmoid", t[3]), f"{name}.m0")
    m1 = g.add(act("Sigmoid", t[1]), act("Tanh", t[2]), f"{name}.m1")
    m2 = g.mul(act("Sigmoid", t[4]), act("Tanh", t[5]), f"{name}.m2")
    m3 = g.mul(act("Sigmoid", t[6]), act("Relu", t[7]), f"{name}.m3")
    m4 = g.add(act("Sigmoid", m1), act("Tanh", m2), f"{name}.m4")
    m5 = g.mul(act("Tanh", m0), act("Tanh", m3), f"{name}.m5")
    m6 = g.mul(act("Tanh", m4), act("Tanh", m5), f"{name}.m6")
    return g.op("Tanh", [m6], out_name or f"{name}.h")


def build(quick: bool = False, seed: int = 0) -> onnx.ModelProto:
    hidden, steps = (QUICK_HIDDEN, QUICK_STEPS) if quick else (FULL_HIDDEN, FULL_STEPS)
    g = GraphBuilder("nasrnn", seed)
    inp = g.add_input([steps, hidden])
    xs = g.op("Split", [inp, g.ints([1] * steps, "split_sizes")], "x", num_outputs=steps, axis=0)
    h = g.const(g.rng.uniform(-1.0, 1.0, size=(1, hidden)).astype("float32"), "h0")
    for s, x in enumerate(xs):
        h = nas_cell(g, x, h, hidden, f"step{s}", "output" if s == steps - 1 else None)
    return g.finish([h])
