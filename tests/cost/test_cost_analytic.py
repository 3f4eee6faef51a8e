"""The analytic model is deterministic, monotone in size, fusion-aware; its peaks are cached."""
from __future__ import annotations

import json

import pytest

import cost_graphs
from taso_relay.cost import AnalyticCost, MachinePeaks, load_peaks
from taso_relay.cost.analytic import compute_flops, kernel_bytes, kernel_flops
from taso_relay.graph import GraphBuilder


def test_same_graph_same_cost(peaks):
    a = AnalyticCost(peaks).graph_cost(cost_graphs.residual_block())
    b = AnalyticCost(peaks).graph_cost(cost_graphs.residual_block())
    assert a == b and a > 0


def test_node_order_does_not_matter(peaks):
    def build(swap: bool):
        b = GraphBuilder()
        x = b.input("x", (1, 8, 8, 8))
        ws = [b.weight("w1", (8, 8, 3, 3)), b.weight("w2", (8, 8, 1, 1))]
        convs = {}
        for name, w in (reversed(list(zip(("a", "b"), ws))) if swap else zip(("a", "b"), ws)):
            convs[name] = b.op("conv2d", x, w, padding=(1, 1, 1, 1) if name == "a" else (0, 0, 0, 0))
        return b.build([b.op("add", convs["a"], convs["b"])])

    one, two = build(False), build(True)
    assert one.hash == two.hash
    assert AnalyticCost(peaks).graph_cost(one) == AnalyticCost(peaks).graph_cost(two)


@pytest.mark.parametrize("make, sizes", [
    (lambda s: cost_graphs.conv_bias_relu(c=s), (8, 16, 32, 64)),
    (lambda s: cost_graphs.conv_bias_relu(hw=s), (4, 8, 16, 32)),
    (lambda s: cost_graphs.attention(seq=s), (8, 16, 32, 64)),
    (lambda s: cost_graphs.transpose_of_activations(n=s), (8, 16, 32, 64)),
])
def test_bigger_shapes_cost_more(peaks, make, sizes):
    costs = [AnalyticCost(peaks).graph_cost(make(s)) for s in sizes]
    assert costs == sorted(costs) and len(set(costs)) == len(costs)


def test_flops_and_bytes_of_a_fused_kernel():
    (k,) = AnalyticCost(MachinePeaks(1, 1)).kernels(cost_graphs.conv_bias_relu(c=16, hw=8))
    conv = 2 * 16 * 8 * 8 * 16 * 9
    assert kernel_flops(k) == conv + 2 * 16 * 8 * 8  # + bias add and relu
    # input, weight, bias, output: the intermediate results of the add and relu never touch memory
    assert kernel_bytes(k) == 4 * (16 * 64 + 16 * 16 * 9 + 16 + 16 * 64)


@pytest.mark.parametrize("stride, groups", [(1, 1), (2, 1), (2, 4)])
def test_a_transposed_conv_costs_the_conv_tvm_runs_for_it(stride, groups):
    """TVM computes conv2d_transpose as a conv over the input spread out by the stride (zeros between its values)
    and padded by k - 1 - padding: the flops of that conv, about stride ** 2 times the multiply-adds that count."""
    def flops(op, x, w, **attrs):
        b = GraphBuilder()
        (k,) = AnalyticCost(MachinePeaks(1, 1)).kernels(b.build([b.op(op, b.input("x", x), b.weight("w", w), **attrs)]))
        return compute_flops(k)

    spread = 6 * stride + 1  # 7 values, stride - 1 zeros between each two
    as_conv = flops("conv2d", (1, 8, spread, spread), (16, 8 // groups, 4, 4), padding=(2, 2, 2, 2), groups=groups)
    transposed = flops("conv2d_transpose", (1, 8, 7, 7), (8, 16 // groups, 4, 4), strides=(stride, stride),
                       padding=(1, 1, 1, 1), groups=groups)
    assert transposed == as_conv > 2 * 8 * 7 * 7 * (16 // groups) * 16  # (the products of an input value)


def test_a_transposed_conv_as_a_subpixel_conv_spends_no_multiply_adds_on_zeros():
    """h-convT-subpixel on DCGAN's k4 s2 p1 layer: the stride-1 conv does 9 multiply-adds per output value and input
    channel where TVM's transposed conv does 16; its kernel is weights only (no kernel of its own), and the pixel
    shuffle's copy costs less than the work saved, so the analytic cost prefers it."""
    from taso_relay.subst.apply import apply
    from taso_relay.subst.match import Matcher
    from taso_relay.subst.rule_io import load_rules, shipped_rules_dir

    (rule,) = [r for r in load_rules(shipped_rules_dir() / "handwritten_subpixel.json") if r.id == "h-convT-subpixel"]
    b = GraphBuilder()
    g = b.build([b.op("conv2d_transpose", b.input("x", (1, 64, 16, 16)), b.weight("w", (64, 32, 4, 4)),
                      strides=(2, 2), padding=(1, 1, 1, 1))])
    (m,) = Matcher(rule).find(g)
    sub = apply(g, m).graph
    model = AnalyticCost(MachinePeaks(50, 10))
    (before,), after = model.kernels(g), model.kernels(sub)
    (conv,) = [k for k in after if "conv2d" in k.ops]
    assert compute_flops(conv) * 16 == compute_flops(before) * 9
    assert not [k for k in after if "subpixel_kernel" in k.ops]
    assert model.graph_cost(sub) < model.graph_cost(g)


def test_a_kernel_reading_a_slice_pays_for_the_slice_only():
    """A merged projection's parts, each sliced inside the kernel that reshapes it: each kernel reads its
    third of the merged tensor, not all of it (else merging Q/K/V would look dearer the wider they are)."""
    b = GraphBuilder()
    y = b.input("y", (1, 128, 3 * 768))
    heads = [b.op("transpose", b.op("reshape", b.op("strided_slice", y, axes=(2,), begin=(i * 768,),
                                                   end=((i + 1) * 768,), strides=(1,)), shape=(1, 128, 12, 64)),
                  perm=(0, 2, 1, 3)) for i in range(3)]
    kernels = AnalyticCost(MachinePeaks(1, 1)).kernels(b.build(heads))
    assert len(kernels) == 3 and all(k.ops == ["strided_slice", "reshape", "transpose"] for k in kernels)
    part = 4 * 128 * 768
    assert [kernel_bytes(k) for k in kernels] == [part + part] * 3  # its part read, its heads written
    b = GraphBuilder()
    y = b.input("y", (1, 128, 3 * 768))
    (k,) = AnalyticCost(MachinePeaks(1, 1)).kernels(b.build([b.op("relu", y)]))
    assert kernel_bytes(k) == 2 * 3 * part  # read through anything else: the whole tensor


def test_fusion_is_cheaper_than_separate_kernels(peaks):
    from taso_relay.cost.protocol import per_node_partition

    class Unfused(AnalyticCost):
        def _partition(self, graph):
            return per_node_partition(graph)

    graph = cost_graphs.conv_bn_relu_chain(n=3)
    assert AnalyticCost(peaks).graph_cost(graph) < Unfused(peaks).graph_cost(graph)


def test_roofline(peaks):
    model = AnalyticCost(peaks)
    for k in model.kernels(cost_graphs.attention()):
        expected = max(compute_flops(k) / 100e9, kernel_bytes(k) / 20e9) + 2e-6
        assert model.kernel_cost(k) == pytest.approx(expected)


def test_peaks_measured_once_and_cached(tmp_path):
    path = tmp_path / "peaks.json"
    first = load_peaks(path)
    assert first.gflops > 0 and first.gbps > 0
    data = json.loads(path.read_text())
    data.update(gflops=123.0, gbps=45.0, busy_cores=None)  # measured on a quiet machine
    path.write_text(json.dumps(data))
    again = load_peaks(path)
    assert (again.gflops, again.gbps) == (123.0, 45.0)  # read, not re-measured
    path.write_text("{not json")
    assert load_peaks(path).gflops > 0  # unreadable: measured again


def test_peaks_measured_on_a_busy_machine_are_measured_again_when_it_is_quieter(tmp_path, monkeypatch):
    """Peaks taken beside 2 cores of other work are kept while the machine stays as busy, and measured
    again once it is quieter, keeping the higher of each figure (a quiet measurement is never lowered)."""
    from taso_relay.cost import analytic

    path = tmp_path / "peaks.json"
    runs = iter([MachinePeaks(100.0, 10.0), MachinePeaks(250.0, 8.0), MachinePeaks(1.0, 1.0)])
    monkeypatch.setattr(analytic, "measure_peaks", lambda: next(runs))
    monkeypatch.setattr(analytic, "_busy_cores", lambda: 2.0)
    assert load_peaks(path).gflops == 100.0
    assert json.loads(path.read_text())["busy_cores"] == 2.0
    assert load_peaks(path).gflops == 100.0  # as busy as then: read, not measured
    monkeypatch.setattr(analytic, "_busy_cores", lambda: 0.1)
    again = load_peaks(path)
    assert (again.gflops, again.gbps) == (250.0, 10.0)
    assert json.loads(path.read_text())["busy_cores"] is None
    assert load_peaks(path).gflops == 250.0  # a quiet measurement stands: the third run is never taken
    monkeypatch.setattr(analytic, "_busy_cores", lambda: None)  # no load average (Windows): read as it is
    assert load_peaks(path).gflops == 250.0


def test_default_peaks_live_in_the_user_cache(_private_cache_dir):
    AnalyticCost()
    assert (_private_cache_dir / "peaks.json").exists()


def test_peaks_of_an_older_method_are_measured_again(tmp_path):
    """Peaks cached by the first method (one timed copy, page faults included) are not trusted."""
    path = tmp_path / "peaks.json"
    first = load_peaks(path)
    data = json.loads(path.read_text())
    data.pop("method")
    data.update(gbps=0.428)
    path.write_text(json.dumps(data))
    assert load_peaks(path).gbps != 0.428
    assert first.gbps > 2.0  # a steady copy; the page-faulting first copy measured 0.4-0.9 GB/s here


def _conv_relu_then_shuffle(swap_hw: bool):
    """conv + bias, relu, then a channel shuffle's reshape/transpose (ShuffleNet's block end)."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 8, 8))
    y = b.op("add", b.op("conv2d", x, b.weight("w", (16, 16, 3, 3)), padding=(1, 1, 1, 1)), b.weight("b", (16, 1, 1)))
    if swap_hw:
        y = b.op("transpose", b.op("relu", b.op("transpose", y, perm=(0, 1, 3, 2))), perm=(0, 1, 3, 2))
    else:
        y = b.op("relu", y)
    y = b.op("transpose", b.op("reshape", y, shape=(1, 2, 8, 8, 8)), perm=(0, 2, 1, 3, 4))
    return b.build([b.op("reshape", y, shape=(1, 16, 8, 8))])


@pytest.mark.parametrize("gflops", [10.0, 100.0, 1000.0])
def test_a_relu_moved_between_transposes_of_the_innermost_axis_costs_more(gflops):
    """relu(x) => T(relu(T(x))) with T swapping H and W: the relu leaves the compute-bound conv kernel for the
    memory-bound shuffle kernel, where its flops are hidden; the two strided transposes must outweigh that."""
    model = AnalyticCost(MachinePeaks(gflops, 20.0, 2e-6))
    assert model.graph_cost(_conv_relu_then_shuffle(True)) > model.graph_cost(_conv_relu_then_shuffle(False))


def test_only_a_transpose_that_moves_the_innermost_axis_is_charged_a_pass():
    from taso_relay.cost.analytic import moves_innermost

    assert moves_innermost((0, 1, 3, 2), (1, 16, 8, 8))  # H and W swapped
    assert moves_innermost((0, 2, 3, 1), (1, 16, 8, 8))  # NCHW -> NHWC
    assert not moves_innermost((0, 2, 1, 3, 4), (1, 2, 8, 8, 8))  # channel shuffle: rows stay whole
    assert not moves_innermost((0, 1, 3, 2), (1, 16, 8, 1))  # W is 1: a reshape in effect
    assert not moves_innermost((1, 0, 2), (4, 1, 8))


def _fire(relu_after_concat: bool):
    """SqueezeNet's fire module's end: two convs with bias, their relus, a concat."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 14, 14))
    e1 = b.op("add", b.op("conv2d", x, b.weight("w1", (32, 16, 1, 1))), b.weight("b1", (32, 1, 1)))
    e3 = b.op("conv2d", x, b.weight("w3", (32, 16, 3, 3)), padding=(1, 1, 1, 1))
    e3 = b.op("add", e3, b.weight("b3", (32, 1, 1)))
    if relu_after_concat:
        return b.build([b.op("relu", b.op("concat", e1, e3, axis=1))])
    return b.build([b.op("concat", b.op("relu", e1), b.op("relu", e3), axis=1)])


@pytest.mark.parametrize("lowering", ["default", "tuning"])
def test_an_activation_moved_out_of_a_conv_epilogue_is_not_cheaper(lowering):
    """relu(x1), relu(x2) => split(relu(concat(x1, x2))) takes the relus out of two convs' epilogues, where they
    cost nothing beside the multiply-adds, into the concat's memory-bound kernel, where they cost nothing either."""
    model = AnalyticCost(MachinePeaks(100.0, 20.0, 2e-6), lowering=lowering)
    assert model.graph_cost(_fire(True)) >= model.graph_cost(_fire(False))


def test_only_the_multiply_adds_of_a_conv_kernel_take_compute_time():
    (k,) = AnalyticCost(MachinePeaks(1, 1)).kernels(cost_graphs.conv_bias_relu(c=16, hw=8))
    assert compute_flops(k) == 2 * 16 * 8 * 8 * 16 * 9 < kernel_flops(k)
