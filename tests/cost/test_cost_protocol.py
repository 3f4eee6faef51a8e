"""The CostModel protocol, the incremental memo, and FixedCost."""
from __future__ import annotations

import cost_graphs
from taso_relay.cost import AnalyticCost, CostModel, FixedCost, KernelCostModel


class Counting(KernelCostModel):
    """Costs 1 ms per kernel node and remembers what it was asked."""

    def __init__(self):
        super().__init__()
        self.asked = []

    def _compute(self, kernels):
        self.asked.extend(k.label for k in kernels)
        return [1e-3 * len(k.nodes) for k in kernels]


def test_models_satisfy_the_protocol(peaks):
    assert isinstance(FixedCost(), CostModel)
    assert isinstance(AnalyticCost(peaks), CostModel)


def test_graph_cost_is_the_sum_of_its_kernels():
    model = Counting()
    graph = cost_graphs.inception_like()
    assert model.graph_cost(graph) == sum(model.kernel_cost(k) for k in model.kernels(graph))


def test_one_rewrite_recosts_only_new_kernels():
    model = Counting()
    model.graph_cost(cost_graphs.parallel_convs(c=16, relu=False))
    assert model.asked == ["conv2d"]  # two convs, one workload
    model.asked.clear()
    model.graph_cost(cost_graphs.parallel_convs(c=16, merged=True, relu=False))
    assert model.asked == ["conv2d", "split"]  # the merged conv and the split are new
    model.asked.clear()
    model.graph_cost(cost_graphs.parallel_convs(c=16, relu=False))
    model.graph_cost(cost_graphs.parallel_convs(c=16, merged=True, relu=False))
    assert model.asked == [] and model.stats.graph_hits == 2


def test_repeated_kernels_are_costed_once():
    model = Counting()
    model.graph_cost(cost_graphs.conv_bn_relu_chain(n=5))
    assert sorted(model.asked) == ["batch_norm+relu", "conv2d"]  # 10 kernels, 2 workloads
    assert model.stats.computed == 2


def test_stats_count_time_and_calls():
    model = Counting()
    for _ in range(3):
        model.graph_cost(cost_graphs.residual_block())
    assert model.stats.graph_calls == 3 and model.stats.graph_hits == 2 and model.stats.seconds > 0
    assert "graph costs" in str(model.stats)


def test_fixed_cost_per_node():
    model = FixedCost({"conv2d": 10.0, "relu": 1.0, "add": 1.0}, default=0.5)
    assert model.graph_cost(cost_graphs.residual_block()) == 10 + 1 + 10 + 1 + 1
    assert model.graph_cost(cost_graphs.gemm_with_weight_transpose()) == 0.5 + 1.0  # transpose folded


def test_fixed_cost_fused_counts_anchors_only():
    model = FixedCost({"conv2d": 10.0, "relu": 1.0, "add": 1.0}, fuse=True)
    assert model.graph_cost(cost_graphs.residual_block()) == 20.0
    assert [k.label for k in model.kernels(cost_graphs.residual_block())] == ["conv2d+relu", "conv2d+add+relu"]


def test_breakdown_lists_kernels_in_order(peaks):
    model = AnalyticCost(peaks)
    rows = model.breakdown(cost_graphs.head())
    assert [k.label for k, _ in rows] == ["relu", "mean", "matmul+add"]
    assert sum(c for _, c in rows) == model.graph_cost(cost_graphs.head())
