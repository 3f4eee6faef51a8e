"""The layout step: every conv to NHWC, the transposes between convs cancelled, the numbers unchanged."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from taso_relay.cost import AnalyticCost, MachinePeaks
from taso_relay.graph import GraphBuilder, evaluate, random_feeds
from taso_relay.passes import resolve_rules
from taso_relay.search import optimize
from taso_relay.search.layout import convert_layout, layout_matchers
from taso_relay.subst.index import index_of

PEAKS = MachinePeaks(gflops=245.0, gbps=49.0, launch_s=2e-6)


def block():
    """A conv net with what the rules must carry a transpose through: a bias add, a relu with two
    readers, a residual add, a max pool, a three-way concat, a sigmoid, and a head that stays NCHW."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()

    def w(name, shape):
        return b.weight(name, shape, value=(rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype("float32"))

    x = b.input("x", (1, 3, 12, 10))
    c1 = b.op("add", b.op("conv2d", x, w("w1", (8, 3, 3, 3)), padding=(1, 1, 1, 1)), w("b1", (1, 8, 1, 1)))
    r1 = b.op("relu", c1)
    c2 = b.op("conv2d", r1, w("w2", (8, 8, 1, 1)), activation="relu")
    c3 = b.op("conv2d", r1, w("w3", (8, 8, 3, 3)), padding=(1, 1, 1, 1))
    s = b.op("add", c2, c3)
    p = b.op("max_pool2d", s, kernel=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1))
    branches = [b.op("conv2d", p, w(f"wb{i}", (4 + i, 8, 1, 1))) for i in range(3)]
    cat = b.op("sigmoid", b.op("concat", *branches, axis=1))
    head = b.op("mean", cat, axes=(2, 3))
    return b.build([head, r1])


def activation_transposes(graph):
    foldable = index_of(graph).foldable
    return [i for i, n in enumerate(graph.nodes) if n.op == "transpose" and not foldable[i]]


def layouts(graph):
    return Counter(n.attr_dict.get("data_layout", n.attr_dict.get("layout")) for n in graph.nodes
                   if n.op in ("conv2d", "max_pool2d"))


def test_every_conv_goes_nhwc_and_only_the_boundary_transposes_stay():
    g = block()
    converted, trail, complete = convert_layout(g)
    assert complete
    assert layouts(g) == Counter({"NCHW": 7}) and layouts(converted) == Counter({"NHWC": 7})
    used = Counter(m.rule.id for m, _ in trail)
    assert used["l-conv-nhwc"] == 6 and used["l-cancel"] >= 4
    assert {"l-add", "l-add-weight", "l-relu", "l-max_pool2d", "l-concat3", "l-sigmoid"} <= set(used)
    # The input's transpose, and r1's (a graph output read as NCHW); the head's mean reads NHWC
    assert len(activation_transposes(converted)) == 2 and "l-mean23-drop" in used
    users = index_of(converted).users
    assert all(users[i] or any(r.node == i for r in converted.outputs) for i in activation_transposes(converted))
    feeds = random_feeds(g, np.random.default_rng(1))
    for a, b in zip(evaluate(g, feeds), evaluate(converted, feeds)):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)


def test_a_graph_without_convs_is_left_alone():
    b = GraphBuilder()
    x = b.input("x", (1, 4, 5, 6))
    g = b.build([b.op("relu", b.op("max_pool2d", x, kernel=(2, 2), strides=(2, 2)))])
    converted, trail, complete = convert_layout(g)
    assert trail == [] and converted is g and complete


def chain(blocks: int):
    """A residual chain of conv + bias + relu blocks (a deep model, for the conversion's passes)."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    stem = b.weight("stem", (4, 3, 1, 1), value=rng.standard_normal((4, 3, 1, 1)).astype("float32"))
    h = b.op("conv2d", b.input("x", (1, 3, 6, 6)), stem)  # as real nets start: the residual path is a conv's
    for i in range(blocks):
        w = b.weight(f"w{i}", (4, 4, 3, 3), value=(rng.standard_normal((4, 4, 3, 3)) / 6).astype("float32"))
        bias = b.weight(f"b{i}", (1, 4, 1, 1), value=rng.standard_normal((1, 4, 1, 1)).astype("float32"))
        h = b.op("add", h, b.op("relu", b.op("add", b.op("conv2d", h, w, padding=(1, 1, 1, 1)), bias)))
    return b.build([h])


def test_matches_that_do_not_touch_are_applied_together_and_a_deadline_is_reported():
    g = chain(40)
    converted, trail, complete = convert_layout(g)
    assert complete and layouts(converted) == Counter({"NHWC": 41})
    assert len(activation_transposes(converted)) == 2
    # not one pass per conv: two (the first block's conv reads the stem's output, which the stem's
    # match replaces, so it waits for the second)
    assert len({id(before) for m, before in trail if m.rule.id == "l-conv-nhwc"}) == 2
    feeds = random_feeds(g, np.random.default_rng(3))
    np.testing.assert_allclose(evaluate(converted, feeds)[0], evaluate(g, feeds)[0], rtol=1e-4, atol=1e-4)
    cut, steps, complete = convert_layout(g, limit=50)
    assert not complete and len(steps) == 50
    import time
    assert convert_layout(g, deadline=time.perf_counter() - 1)[2] is False  # out of time: not the fixpoint


def dense_block(layers: int, growth: int = 2):
    """DenseNet's block: each layer reads the concat of the stem and every earlier layer's output."""
    rng = np.random.default_rng(6)
    b = GraphBuilder()
    stem = b.weight("stem", (4, 3, 1, 1), value=rng.standard_normal((4, 3, 1, 1)).astype("float32"))
    feats, ch = [b.op("conv2d", b.input("x", (1, 3, 6, 5)), stem)], 4
    for i in range(layers):
        h = b.op("relu", b.op("concat", *feats, axis=1) if len(feats) > 1 else feats[0])
        w = b.weight(f"w{i}", (growth, ch, 3, 3), value=(rng.standard_normal((growth, ch, 3, 3)) / 6).astype("float32"))
        feats.append(b.op("conv2d", h, w, padding=(1, 1, 1, 1)))
        ch += growth
    return b.build([b.op("mean", b.op("concat", *feats, axis=1), axes=(2, 3))])


def test_concats_wider_than_the_direct_rules_are_taken_apart_and_put_back_in_nhwc():
    from taso_relay.generator.layout_rules import MAX_CONCAT

    g = dense_block(2 * MAX_CONCAT + 1)  # concats of 2 to 28 inputs: those of 26 and more nest twice
    converted, trail, complete = convert_layout(g)
    assert complete and layouts(converted) == Counter({"NHWC": 2 * MAX_CONCAT + 2})
    assert len(activation_transposes(converted)) == 1  # the input's; the head's mean reads NHWC
    used = Counter(m.rule.id for m, _ in trail)
    # a concat of 28: its first 13 inputs nested, then the first 13 of the 16 left (the nested one and 12)
    assert used["l-concat-nest28"] == 1 and used["l-concat-nest16"] == 2 and used["l-concat-flatten25-3"] == 1
    assert used["l-concat-flatten13-12"] == 4  # in the concats of 25 to 28 inputs
    widths = lambda graph: sorted(len(n.inputs) for n in graph.nodes if n.op == "concat")  # noqa: E731
    assert widths(converted) == widths(g)  # every wide concat one concat again, not a chain of binary ones
    assert all(n.attr("axis") == 3 for n in converted.nodes if n.op == "concat")
    feeds = random_feeds(g, np.random.default_rng(7))
    np.testing.assert_allclose(evaluate(converted, feeds)[0], evaluate(g, feeds)[0], rtol=1e-5, atol=1e-5)


def test_a_concat_of_one_value_repeated_is_converted_too():
    """torch.cat([h, h, h], 1): the concat rules' one transpose per input needs one per operand."""
    rng = np.random.default_rng(12)
    b = GraphBuilder()
    w1 = b.weight("w1", (4, 3, 3, 3), value=(rng.standard_normal((4, 3, 3, 3)) / 3).astype("float32"))
    w2 = b.weight("w2", (5, 12, 1, 1), value=(rng.standard_normal((5, 12, 1, 1)) / 3).astype("float32"))
    h = b.op("relu", b.op("conv2d", b.input("x", (1, 3, 6, 5)), w1, padding=(1, 1, 1, 1)))
    g = b.build([b.op("conv2d", b.op("concat", h, h, h, axis=1), w2)])
    converted, trail, complete = convert_layout(g)
    assert complete and layouts(converted) == Counter({"NHWC": 2})
    assert Counter(m.rule.id for m, _ in trail)["l-concat3"] == 1
    assert len(activation_transposes(converted)) == 2  # the input's and the output's
    (cat,) = [n for n in converted.nodes if n.op == "concat"]
    assert cat.attr("axis") == 3 and len(set(cat.inputs)) == 1  # the copies merged again
    feeds = random_feeds(g, np.random.default_rng(13))
    np.testing.assert_allclose(evaluate(converted, feeds)[0], evaluate(g, feeds)[0], rtol=1e-5, atol=1e-5)


def shufflenet_unit(second_reader=None):
    """ShuffleNetV2's unit: half the channels through conv, depthwise conv, conv, concatenated with the other
    half, then the channel shuffle as exports spell it (reshape, transpose, reshape)."""
    rng = np.random.default_rng(10)
    b = GraphBuilder()

    def w(name, shape):
        return b.weight(name, shape, value=(rng.standard_normal(shape) / 3).astype("float32"))

    x = b.op("relu", b.op("conv2d", b.input("x", (1, 3, 6, 5)), w("w0", (8, 3, 3, 3)), padding=(1, 1, 1, 1)))
    keep, work = b.op("split", x, axis=1, sizes=(4, 4))
    h = b.op("relu", b.op("conv2d", work, w("w1", (4, 4, 1, 1))))
    h = b.op("conv2d", h, w("w2", (4, 1, 3, 3)), padding=(1, 1, 1, 1), groups=4)
    h = b.op("relu", b.op("conv2d", h, w("w3", (4, 4, 1, 1))))
    cat = b.op("concat", keep, h, axis=1)
    grouped = b.op("reshape", cat, shape=(1, 2, 4, 6, 5))
    split = b.op("transpose", grouped, perm=(0, 2, 1, 3, 4))
    out = b.op("conv2d", b.op("reshape", split, shape=(1, 8, 6, 5)), w("w4", (4, 8, 1, 1)))
    return b.build([out] + ([{"grouped": grouped, "split": split}[second_reader]] if second_reader else []))


def spelled_and_converted(g, op: str, seed: int):
    """`g`'s one shuffle spelled as `op` (computing what the spelling does), then carried into NHWC by l-`op`
    with only the input's and the output's transposes left, the numbers unchanged; the spelled node."""
    from taso_relay.graph.spell_shuffles import spell_shuffles

    spelled, found = spell_shuffles(g)
    nodes = [n for n in spelled.nodes if n.op == op]
    assert found == 1 and len(nodes) == 1
    feeds = random_feeds(g, np.random.default_rng(seed))
    np.testing.assert_array_equal(evaluate(spelled, feeds)[0], evaluate(g, feeds)[0])
    converted, trail, complete = convert_layout(g)
    assert complete and Counter(m.rule.id for m, _ in trail)[f"l-{op}"] == 1
    assert len(activation_transposes(converted)) == 2  # the input's and the output's
    np.testing.assert_allclose(evaluate(converted, feeds)[0], evaluate(g, feeds)[0], rtol=1e-5, atol=1e-5)
    return nodes[0]


def test_channel_shuffles_are_spelled_as_one_operator_and_converted():
    from taso_relay.graph.spell_shuffles import spell_shuffles

    spelled_and_converted(shufflenet_unit(), "channel_shuffle", 11)
    for read in ("grouped", "split"):  # a 5-D value read elsewhere (here: a graph output) keeps the spelling
        assert spell_shuffles(shufflenet_unit(second_reader=read))[1] == 0


def subpixel_upsampler(mode="CRD", block=(2, 3), second_reader=None):
    """Sub-pixel convs: a conv to C * bh * bw channels, a pixel shuffle as exports spell it (a reshape to rank 6,
    a transpose, a reshape), a conv after it; `mode` CRD is PyTorch's PixelShuffle, DCR ONNX's DepthToSpace."""
    rng = np.random.default_rng(12)
    b = GraphBuilder()
    (bh, bw), c, h, w = block, 3, 4, 5
    x = b.op("relu", b.op("conv2d", b.input("x", (1, 2, h, w)), b.weight(
        "w0", (c * bh * bw, 2, 3, 3), value=(rng.standard_normal((c * bh * bw, 2, 3, 3)) / 3).astype("float32")),
        padding=(1, 1, 1, 1)))
    split = (1, c, bh, bw, h, w) if mode == "CRD" else (1, bh, bw, c, h, w)
    perm = (0, 1, 4, 2, 5, 3) if mode == "CRD" else (0, 3, 4, 1, 5, 2)
    phases = b.op("reshape", x, shape=split)
    moved = b.op("transpose", phases, perm=perm)
    y = b.op("conv2d", b.op("reshape", moved, shape=(1, c, h * bh, w * bw)),
             b.weight("w1", (4, c, 1, 1), value=rng.standard_normal((4, c, 1, 1)).astype("float32")))
    return b.build([y] + ([{"phases": phases, "moved": moved}[second_reader]] if second_reader else []))


@pytest.mark.parametrize("mode, block", [("CRD", (2, 3)), ("DCR", (2, 2)), ("CRD", (3, 1))])
def test_pixel_shuffles_are_spelled_as_one_operator_and_converted(mode, block):
    """In NHWC the conv before a pixel shuffle and the one after it need no transposes between them."""
    from taso_relay.graph.spell_shuffles import spell_shuffles

    d2s = spelled_and_converted(subpixel_upsampler(mode, block), "depth_to_space", 14)
    assert d2s.attr("mode") == mode and tuple(d2s.attr("block")) == block
    for read in ("phases", "moved"):  # a rank-6 value read elsewhere keeps the spelling
        assert spell_shuffles(subpixel_upsampler(mode, block, second_reader=read))[1] == 0


def unshuffled_stem(mode="CRD", block=(2, 2)):
    """A pixel unshuffle as exports spell it (PyTorch's PixelUnshuffle, CRD; ONNX's SpaceToDepth, DCR) between
    convs: Restormer's downsampling."""
    rng = np.random.default_rng(17)
    b = GraphBuilder()
    (bh, bw), c, h, w = block, 3, 4 * block[0], 2 * block[1]
    x = b.op("conv2d", b.input("x", (1, 2, h, w)), b.weight(
        "w0", (c, 2, 3, 3), value=(rng.standard_normal((c, 2, 3, 3)) / 3).astype("float32")), padding=(1, 1, 1, 1))
    blocks = b.op("reshape", x, shape=(1, c, h // bh, bh, w // bw, bw))
    moved = b.op("transpose", blocks, perm=(0, 1, 3, 5, 2, 4) if mode == "CRD" else (0, 3, 5, 1, 2, 4))
    y = b.op("conv2d", b.op("reshape", moved, shape=(1, c * bh * bw, h // bh, w // bw)), b.weight(
        "w1", (4, c * bh * bw, 1, 1), value=rng.standard_normal((4, c * bh * bw, 1, 1)).astype("float32")))
    return b.build([y])


@pytest.mark.parametrize("mode, block", [("CRD", (2, 2)), ("DCR", (2, 3))])
def test_pixel_unshuffles_are_spelled_as_one_operator_and_converted(mode, block):
    s2d = spelled_and_converted(unshuffled_stem(mode, block), "space_to_depth", 18)
    assert s2d.attr("mode") == mode and tuple(s2d.attr("block")) == block


def test_a_reshape_transpose_reshape_that_is_no_shuffle_is_left_spelled():
    """The same shapes with the transpose of another order (rows and columns of the block swapped) spell
    neither operator."""
    from taso_relay.graph.spell_shuffles import spell_shuffles

    b = GraphBuilder()
    x = b.input("x", (1, 12, 4, 5))
    moved = b.op("transpose", b.op("reshape", x, shape=(1, 3, 2, 2, 4, 5)), perm=(0, 1, 4, 3, 5, 2))
    assert spell_shuffles(b.build([b.op("reshape", moved, shape=(1, 3, 8, 10))]))[1] == 0


def test_a_transpose_moves_through_resizes():
    """A U-Net's decoder: upsampled (nearest and bilinear), concatenated with the skip path, convolved."""
    rng = np.random.default_rng(8)
    b = GraphBuilder()

    def w(name, shape):
        return b.weight(name, shape, value=(rng.standard_normal(shape) / 3).astype("float32"))

    skip = b.op("relu", b.op("conv2d", b.input("x", (1, 3, 8, 6)), w("w1", (4, 3, 3, 3)), padding=(1, 1, 1, 1)))
    low = b.op("conv2d", skip, w("w2", (4, 4, 3, 3)), strides=(2, 2), padding=(1, 1, 1, 1))
    up = b.op("resize2d", low, size=(8, 6), method="nearest_neighbor", coordinates="asymmetric", rounding="floor")
    h = b.op("conv2d", b.op("concat", up, skip, axis=1), w("w3", (2, 8, 3, 3)), padding=(1, 1, 1, 1))
    out = b.op("resize2d", h, size=(13, 9), method="linear", coordinates="half_pixel")
    g = b.build([out])
    converted, trail, complete = convert_layout(g)
    assert complete and all(n.attr("layout") == "NHWC" for n in converted.nodes if n.op == "resize2d")
    assert Counter(m.rule.id for m, _ in trail)["l-resize2d"] == 2
    assert len(activation_transposes(converted)) == 2  # the input's, and the output's back to NCHW
    feeds = random_feeds(g, np.random.default_rng(9))
    np.testing.assert_allclose(evaluate(converted, feeds)[0], evaluate(g, feeds)[0], rtol=1e-5, atol=1e-5)


def test_the_layout_rules_are_proved_and_not_in_the_search_set():
    ids = {m.rule.id for m in layout_matchers("nhwc")}
    assert "l-conv-nhwc" in ids and "l-cancel" in ids
    assert all(m.rule.status == "PROVED" for m in layout_matchers("nhwc"))
    assert not ids & {m.rule.id for m in resolve_rules(None).matchers}
    with pytest.raises(ValueError, match="unknown layout"):
        layout_matchers("nchw4c")


class PrefersNHWC:
    """A judge under which an NHWC conv is cheaper and every other node costs a little."""

    name = "prefers-nhwc"

    def __init__(self, nhwc_factor):
        self.nhwc_factor = nhwc_factor

    def graph_cost(self, graph) -> float:
        foldable = index_of(graph).foldable
        cost = 0.0
        for i, node in enumerate(graph.nodes):
            if foldable[i] or node.op == "input":
                continue
            if node.op == "conv2d":
                cost += 100.0 * (self.nhwc_factor if node.attr_dict["data_layout"] == "NHWC" else 1.0)
            else:
                cost += 1.0
        return cost


@pytest.mark.parametrize("factor, taken", [(0.7, True), (1.0, False)])
def test_the_judge_takes_the_layout_only_where_it_prices_it_cheaper(factor, taken):
    g = block()
    best, report = optimize(g, resolve_rules(None), AnalyticCost(PEAKS, lowering="tuning"), time_limit=3,
                            judge=PrefersNHWC(factor), layout="nhwc")
    # (the search may merge the three branch convs first: count what is left)
    assert (layouts(best)["NCHW"] == 0 and layouts(best)["NHWC"] > 0) is taken
    assert any(a.rule_id == "l-conv-nhwc" for a in report.applied) is taken
    feeds = random_feeds(g, np.random.default_rng(2))
    for a, b in zip(evaluate(g, feeds), evaluate(best, feeds)):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


def test_the_layout_blind_analytic_model_refuses_the_transposes():
    g = block()
    best, report = optimize(g, resolve_rules(None), AnalyticCost(PEAKS, lowering="tuning"), time_limit=3,
                            layout="nhwc")
    assert layouts(best)["NHWC"] == 0
    assert not any(a.rule_id.startswith("l-") for a in report.applied)


def separable():
    """Dense convs around a depthwise one and a grouped one (NASNet's and ResNeXt's kinds)."""
    rng = np.random.default_rng(4)
    b = GraphBuilder()

    def w(name, shape):
        return b.weight(name, shape, value=(rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype("float32"))

    h = b.op("relu", b.op("conv2d", b.input("x", (1, 3, 9, 8)), w("w1", (8, 3, 3, 3)), padding=(1, 1, 1, 1)))
    h = b.op("conv2d", h, w("dw", (8, 1, 3, 3)), padding=(1, 1, 1, 1), groups=8)
    h = b.op("relu", b.op("conv2d", h, w("pw", (8, 8, 1, 1))))
    h = b.op("conv2d", h, w("gw", (8, 4, 3, 3)), padding=(1, 1, 1, 1), groups=2)
    return b.build([b.op("conv2d", h, w("w2", (4, 8, 1, 1)))])


def conv_layouts(graph):
    return Counter((n.attr("groups") != 1, n.attr("data_layout")) for n in graph.nodes if n.op == "conv2d")


def test_the_dense_only_conversion_leaves_grouped_and_depthwise_convs_nchw():
    g = separable()
    every, _, complete = convert_layout(g)
    assert complete and conv_layouts(every) == Counter({(False, "NHWC"): 3, (True, "NHWC"): 2})
    dense, trail, complete = convert_layout(g, grouped=False)
    assert complete and conv_layouts(dense) == Counter({(False, "NHWC"): 3, (True, "NCHW"): 2})
    assert all(m.rule.id != "l-conv-nhwc" or m.variables["g"] == 1 for m, _ in trail)
    feeds = random_feeds(g, np.random.default_rng(5))
    for converted in (every, dense):
        np.testing.assert_allclose(evaluate(converted, feeds)[0], evaluate(g, feeds)[0], rtol=1e-4, atol=1e-5)


class GroupedDear(PrefersNHWC):
    """NHWC dense convs cheaper; NHWC grouped convs dearer by grouped_factor. Pricing an NHWC graph
    takes `delay` seconds (a judge tuning its new kernels)."""

    def __init__(self, nhwc_factor, grouped_factor, delay=0.0):
        super().__init__(nhwc_factor)
        self.grouped_factor = grouped_factor
        self.delay = delay

    def graph_cost(self, graph) -> float:
        if self.delay and any(n.op == "conv2d" and n.attr("data_layout") == "NHWC" for n in graph.nodes):
            import time
            time.sleep(self.delay)
        extra = sum(100.0 * (self.grouped_factor - self.nhwc_factor) for n in graph.nodes
                    if n.op == "conv2d" and n.attr("groups") != 1 and n.attr("data_layout") == "NHWC")
        return super().graph_cost(graph) + extra


@pytest.mark.parametrize("grouped_factor, grouped_layout, delay", [(0.5, "NHWC", 0.0), (2.0, "NCHW", 0.0),
                                                                   (2.0, "NCHW", 2.0), (0.5, "NHWC", 2.0)])
def test_the_judge_chooses_between_every_conv_and_the_dense_ones_only(grouped_factor, grouped_layout, delay):
    """Also when pricing a conversion outlasts the conversions' time (a judge tuning kernels)."""
    g = separable()
    judge = GroupedDear(0.7, grouped_factor, delay)
    best, report = optimize(g, [], AnalyticCost(PEAKS, lowering="tuning"), time_limit=2, judge=judge, layout="nhwc")
    assert conv_layouts(best) == Counter({(False, "NHWC"): 3, (True, grouped_layout): 2})
    # the report names every graph the judge weighed, at the judge's price; the one kept is the cheapest
    named = {p["graph"]: p for p in report.priced}
    assert list(named) == ["input", "first phase", "search", "NHWC, dense convs", "NHWC, every conv"]
    dense, every = named["NHWC, dense convs"], named["NHWC, every conv"]
    assert (dense["cost"] < every["cost"]) is (grouped_layout == "NCHW")
    assert min(p["cost"] for p in report.priced) == report.cost_after == judge.graph_cost(best)
    assert 0 < dense["rewrites"] < every["rewrites"]
    assert (dense if grouped_layout == "NCHW" else every)["rewrites"] == len(report.applied)
    assert "priced: input" in report.to_text() and "NHWC, every conv" in report.to_text()
    feeds = random_feeds(g, np.random.default_rng(6))
    np.testing.assert_allclose(evaluate(best, feeds)[0], evaluate(g, feeds)[0], rtol=1e-4, atol=1e-5)


def mobile():
    """What other conv nets put between convs: relu6 (a clip), silu, gelu, a scale by a per-channel
    weight (div), a difference of two branches, and a head whose spatial mean drops H and W."""
    rng = np.random.default_rng(7)
    b = GraphBuilder()

    def w(name, shape):
        return b.weight(name, shape, value=(rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype("float32"))

    h = b.op("clip", b.op("conv2d", b.input("x", (1, 3, 8, 9)), w("w1", (8, 3, 3, 3)), padding=(1, 1, 1, 1)),
             min=0.0, max=6.0)
    a = b.op("silu", b.op("conv2d", h, w("wa", (8, 8, 1, 1))))
    c = b.op("div", b.op("gelu", b.op("conv2d", h, w("wc", (8, 8, 3, 3)), padding=(1, 1, 1, 1))),
             b.weight("s", (1, 8, 1, 1), value=rng.uniform(1.0, 2.0, (1, 8, 1, 1)).astype("float32")))
    h = b.op("conv2d", b.op("maximum", b.op("sub", a, c), h), w("w2", (6, 8, 1, 1)))
    return b.build([b.op("mean", h, axes=(2, 3), keepdims=False)])


def test_relu6_silu_gelu_binaries_and_the_head_mean_carry_the_transpose_to_the_end():
    g = mobile()
    converted, trail, complete = convert_layout(g)
    assert complete and layouts(converted) == Counter({"NHWC": 4})
    used = {m.rule.id for m, _ in trail}
    assert {"l-relu6", "l-silu", "l-gelu", "l-div-weight", "l-sub", "l-maximum", "l-mean23-drop"} <= used
    # only the input's transpose is left: the head's mean reads the NHWC tensor directly
    assert len(activation_transposes(converted)) == 1
    feeds = random_feeds(g, np.random.default_rng(8))
    np.testing.assert_allclose(evaluate(converted, feeds)[0], evaluate(g, feeds)[0], rtol=1e-4, atol=1e-5)


def test_convs_that_read_one_value_share_its_transpose():
    rng = np.random.default_rng(9)
    b = GraphBuilder()
    x = b.input("x", (1, 3, 7, 7))
    weights = [b.weight(f"w{i}", (2 + i, 3, 1, 1), value=rng.standard_normal((2 + i, 3, 1, 1)).astype("float32"))
               for i in range(3)]
    branches = [b.op("relu", b.op("conv2d", x, w)) for w in weights]
    g = b.build([b.op("concat", *branches, axis=1)])
    converted, _, complete = convert_layout(g)
    assert complete and layouts(converted) == Counter({"NHWC": 3})
    # the input's transpose (one, not one per conv) and the output's
    assert len(activation_transposes(converted)) == 2
    feeds = random_feeds(g, np.random.default_rng(10))
    np.testing.assert_allclose(evaluate(converted, feeds)[0], evaluate(g, feeds)[0], rtol=1e-5, atol=1e-5)


def test_hardswish_and_hardsigmoid_as_imported_carry_the_transpose():
    """TVM's ONNX importer spells them with rank-0 constants on either side and literal clips:
    x * clip(x + 3, 0, 6) / 6, then clip(0.2 * x + 0.5, 0, 1)."""
    rng = np.random.default_rng(11)
    b = GraphBuilder()

    def scalar(name, value):
        return b.weight(name, (), value=np.array(value, "float32"))

    c = b.op("conv2d", b.input("x", (1, 3, 6, 7)), b.weight("w", (4, 3, 3, 3), value=rng.standard_normal(
        (4, 3, 3, 3)).astype("float32")), padding=(1, 1, 1, 1))
    hs = b.op("mul", c, b.op("div", b.op("clip", b.op("add", c, scalar("three", 3.0)), min=0.0, max=6.0),
                             scalar("six", 6.0)))
    sig = b.op("clip", b.op("add", b.op("mul", scalar("k", 0.2), hs), scalar("half", 0.5)), min=0.0, max=1.0)
    g = b.build([b.op("conv2d", sig, b.weight("w2", (2, 4, 1, 1), value=rng.standard_normal(
        (2, 4, 1, 1)).astype("float32")))])
    converted, trail, complete = convert_layout(g)
    assert complete and layouts(converted) == Counter({"NHWC": 2})
    used = {m.rule.id for m, _ in trail}
    assert {"l-add-scalar", "l-relu6", "l-div-scalar", "l-mul", "l-mul-scalar", "l-clip01"} <= used
    assert len(activation_transposes(converted)) == 2  # the input's and the output's
    feeds = random_feeds(g, np.random.default_rng(12))
    np.testing.assert_allclose(evaluate(converted, feeds)[0], evaluate(g, feeds)[0], rtol=1e-5, atol=1e-5)


def shifted_paths():
    """NASNet's factorized reduction: one path pools the input, the other pads H and W by one after,
    drops the first row and column (a strided slice on two axes) and pools; then a channel slice."""
    rng = np.random.default_rng(13)
    b = GraphBuilder()

    def w(name, shape):
        return b.weight(name, shape, value=(rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype("float32"))

    r = b.op("relu", b.op("conv2d", b.input("x", (1, 3, 8, 8)), w("w0", (6, 3, 3, 3)), padding=(1, 1, 1, 1)))
    pool = dict(kernel=(1, 1), strides=(2, 2), count_include_pad=False)
    p1 = b.op("conv2d", b.op("avg_pool2d", r, **pool), w("w1", (4, 6, 1, 1)))
    shifted = b.op("strided_slice", b.op("pad", r, pad_width=(0, 0, 0, 0, 0, 1, 0, 1)), axes=(2, 3), begin=(1, 1),
                   end=(9, 9), strides=(1, 1))
    p2 = b.op("conv2d", b.op("avg_pool2d", shifted, **pool), w("w2", (4, 6, 1, 1)))
    cat = b.op("concat", p1, p2, axis=1)
    head = b.op("strided_slice", cat, axes=(1,), begin=(2,), end=(7,), strides=(1,))
    return b.build([b.op("conv2d", head, w("w3", (3, 5, 1, 1)))])


def test_a_pad_and_slices_on_two_axes_or_the_channels_carry_the_transpose():
    g = shifted_paths()
    converted, trail, complete = convert_layout(g)
    assert complete and layouts(converted) == Counter({"NHWC": 4})
    assert [n.attr_dict["layout"] for n in converted.nodes if n.op == "avg_pool2d"] == ["NHWC"] * 2
    used = {m.rule.id for m, _ in trail}
    assert {"l-pad", "l-slice23", "l-slice1", "l-avg_pool2d", "l-concat2"} <= used
    assert len(activation_transposes(converted)) == 2  # the input's and the output's
    pads = [n for n in converted.nodes if n.op == "pad"]
    assert [n.attr_dict["pad_width"] for n in pads] == [(0, 0, 0, 1, 0, 1, 0, 0)]  # H and W are axes 1, 2 now
    feeds = random_feeds(g, np.random.default_rng(14))
    np.testing.assert_allclose(evaluate(converted, feeds)[0], evaluate(g, feeds)[0], rtol=1e-5, atol=1e-5)


def channel_halves():
    """ShuffleNetV2's unit as exported (a channel split in halves, one half through convs, concat) and
    the search's merged relus (two convs' relus joined by a concat, split back into three readers)."""
    rng = np.random.default_rng(15)
    b = GraphBuilder()

    def w(name, shape):
        return b.weight(name, shape, value=(rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype("float32"))

    c = b.op("relu", b.op("conv2d", b.input("x", (1, 3, 9, 8)), w("w0", (8, 3, 3, 3)), padding=(1, 1, 1, 1)))
    left, right = b.op("split", c, axis=1, sizes=(4, 4))
    right = b.op("conv2d", right, w("w1", (4, 4, 1, 1)), activation="relu")
    unit = b.op("concat", left, right, axis=1)
    a = b.op("conv2d", unit, w("w2", (3, 8, 1, 1)))
    d = b.op("conv2d", unit, w("w3", (5, 8, 3, 3)), padding=(1, 1, 1, 1))
    p, q, r = b.op("split", b.op("relu", b.op("concat", a, d, axis=1)), axis=1, sizes=(3, 2, 3))
    return b.build([b.op("conv2d", b.op("add", b.op("concat", p, q, r, axis=1), b.op("concat", r, q, p, axis=1)),
                         w("w4", (2, 8, 1, 1)))])


def assert_same_in_tvm(graph, converted, seed: int) -> None:
    """The converted graph computes what the original does, in the interpreter and built by TVM."""
    import tvm
    from tvm import relax

    from taso_relay.bridge.to_relax import module_from_graph
    from taso_relay.cost.lowering import compile_module

    feeds = random_feeds(graph, np.random.default_rng(seed))
    want = evaluate(graph, feeds)[0]
    np.testing.assert_allclose(evaluate(converted, feeds)[0], want, rtol=1e-4, atol=1e-5)
    ex = compile_module(module_from_graph(converted), tvm.target.Target({"kind": "llvm", "num-cores": 2}))
    got = relax.VirtualMachine(ex, tvm.cpu())["main"](tvm.runtime.tensor(feeds["x"])).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_channel_splits_carry_the_transpose_and_tvm_computes_the_same():
    g = channel_halves()
    converted, trail, complete = convert_layout(g)
    assert complete and layouts(converted) == Counter({"NHWC": 5})
    used = {m.rule.id for m, _ in trail}
    assert {"l-split2", "l-split3", "l-concat2", "l-concat3"} <= used
    assert len(activation_transposes(converted)) == 2  # the input's and the output's
    assert [n.attr_dict["axis"] for n in converted.nodes if n.op == "split"] == [3, 3]
    assert_same_in_tvm(g, converted, seed=16)


def convnext_block():
    """torchvision's ConvNeXt block as exported: a depthwise 7x7 conv, then permuted to NHWC for the layer
    norm and the two linear layers, permuted back, scaled per channel by a (C, 1, 1) weight (layer scale,
    as the weight's left operand) and added to the block's input; then a downsampling conv."""
    rng = np.random.default_rng(17)
    b = GraphBuilder()

    def w(name, shape, scale=1.0):
        return b.weight(name, shape, value=(scale * rng.standard_normal(shape)).astype("float32"))

    x = b.op("conv2d", b.input("x", (1, 3, 12, 12)), w("stem", (8, 3, 2, 2), 0.3), strides=(2, 2))
    d = b.op("conv2d", x, w("dw", (8, 1, 7, 7), 0.2), groups=8, padding=(3, 3, 3, 3))
    h = b.op("layer_norm", b.op("transpose", d, perm=(0, 2, 3, 1)), w("g", (8,)), w("beta", (8,)), axes=(-1,))
    h = b.op("gelu", b.op("add", b.op("matmul", h, w("fc1", (8, 32), 0.3)), w("b1", (32,))))
    h = b.op("add", b.op("matmul", h, w("fc2", (32, 8), 0.2)), w("b2", (8,)))
    y = b.op("add", x, b.op("mul", w("scale", (8, 1, 1)), b.op("transpose", h, perm=(0, 3, 1, 2))))
    return b.build([b.op("conv2d", y, w("down", (16, 8, 2, 2), 0.3), strides=(2, 2))])


def test_a_convnext_block_runs_in_nhwc_from_end_to_end():
    """The block's own permutes cancel against the depthwise conv's transposes, and the layer scale, a
    rank-3 weight, carries the transpose (l-mul-weight3): only the input's and the output's stay."""
    g = convnext_block()
    converted, trail, complete = convert_layout(g)
    assert complete and layouts(converted) == Counter({"NHWC": 3})
    used = {m.rule.id for m, _ in trail}
    assert {"l-mul-weight3", "l-add", "l-cancel"} <= used
    assert len(activation_transposes(converted)) == 2
    assert_same_in_tvm(g, converted, seed=18)


class TransposedConvDear(PrefersNHWC):
    """A transposed conv priced like an NCHW conv: its sub-pixel conv is dearer in NCHW (the pixel shuffle's
    nodes on top) and cheaper in NHWC."""

    def graph_cost(self, graph) -> float:
        return super().graph_cost(graph) + sum(99.0 for n in graph.nodes if n.op == "conv2d_transpose")


def test_the_layout_is_offered_on_the_search_result_where_the_judge_kept_the_input():
    """The judge prices the search's sub-pixel convs dearer than the transposed convs in NCHW, and the input has
    no conv to convert: the search's graph converted (its pixel shuffles in NHWC) is offered too, and taken."""
    rng = np.random.default_rng(15)
    b = GraphBuilder()
    x = b.input("x", (1, 32, 6, 5))
    w = b.weight("w", (32, 16, 4, 4), value=(rng.standard_normal((32, 16, 4, 4)) / 8).astype("float32"))
    g = b.build([b.op("relu", b.op("conv2d_transpose", x, w, strides=(2, 2), padding=(1, 1, 1, 1)))])
    best, report = optimize(g, resolve_rules(None), AnalyticCost(PEAKS, lowering="tuning"), time_limit=3,
                            judge=TransposedConvDear(0.5), layout="nhwc")
    named = {p["graph"]: p["cost"] for p in report.priced}
    assert named["search"] > named["input"] > named["NHWC, every conv (of search)"] == report.cost_after
    assert [n.attr("layout") for n in best.nodes if n.op == "depth_to_space"] == ["NHWC"]
    assert [r.rule_id for r in report.applied].count("h-convT-subpixel") == 1
    feeds = random_feeds(g, np.random.default_rng(16))
    np.testing.assert_allclose(evaluate(best, feeds)[0], evaluate(g, feeds)[0], rtol=1e-4, atol=1e-5)
