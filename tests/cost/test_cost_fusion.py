"""Kernels as FuseOps forms them: the rules of cost/fusion.py on small graphs (no TVM)."""
from __future__ import annotations

import cost_graphs
from taso_relay.cost import partition
from taso_relay.cost.protocol import per_node_partition
from taso_relay.graph import GraphBuilder


def labels(graph, lowering="default"):
    return [k.label for k in partition(graph, lowering=lowering).kernels]


def test_conv_bias_relu_is_one_kernel():
    assert labels(cost_graphs.conv_bias_relu()) == ["conv2d+add+relu"]


def test_batch_norm_fuses_into_conv_only_when_decomposed():
    # default lowering: batch norm is its own (out-elementwise-fusable) kernel and takes the relu
    assert labels(cost_graphs.conv_bn_relu_chain(n=2)) == ["conv2d", "batch_norm+relu"] * 2
    # static_shape_tuning decomposes it into arithmetic that joins the conv
    assert labels(cost_graphs.conv_bn_relu_chain(n=2), "tuning") == ["conv2d+batch_norm+relu"] * 2


def test_two_batch_norms_join_their_add_under_the_default_lowering():
    graph = cost_graphs.bottleneck_with_projection()
    assert sorted(labels(graph)) == ["batch_norm+batch_norm+add+relu", "conv2d", "conv2d"]
    tuned = sorted(labels(graph, "tuning"))  # one conv takes the add and relu, the other only its bn
    assert tuned == ["conv2d+batch_norm", "conv2d+batch_norm+add+relu"]


def test_residual_add_fuses_into_second_conv():
    assert labels(cost_graphs.residual_block()) == ["conv2d+relu", "conv2d+add+relu"]


def test_concat_of_activations_is_a_kernel():
    part = partition(cost_graphs.concat_of_activations())
    assert [k.label for k in part.kernels] == ["conv2d", "conv2d", "concat", "conv2d"]
    concat = part.kernels[2]
    assert concat.weights == (False, False)


def test_weight_transpose_is_folded_and_free():
    graph = cost_graphs.gemm_with_weight_transpose()
    part = partition(graph)
    assert [k.label for k in part.kernels] == ["matmul+add"]
    transpose = graph.nodes_of("transpose")[0]
    assert transpose in part.folded and part.group_of[transpose] == -1
    assert part.kernels[0].weights == (False, True, True)  # x, transpose(W) (a constant now), b


def test_concat_of_weights_is_folded():
    part = partition(cost_graphs.parallel_convs(merged=True))
    assert len(part.folded) == 1
    # the relus are returned (external), so the split cannot fuse into them: it copies on its own
    assert [k.label for k in part.kernels] == ["conv2d", "split", "relu", "relu"]


def test_transpose_of_activations_costs():
    assert labels(cost_graphs.transpose_of_activations()) == ["matmul", "transpose", "matmul"]


def test_lone_reshape_is_a_view_unless_returned():
    part = partition(cost_graphs.head())
    assert [k.label for k in part.kernels] == ["relu", "mean", "matmul+add"]
    assert len(part.views) == 1
    b = GraphBuilder()
    x = b.input("x", (2, 8))
    returned = b.build([b.op("reshape", b.op("relu", x), shape=(16,)), b.op("reshape", x, shape=(16,))])
    assert [k.label for k in partition(returned).kernels] == ["relu+reshape", "reshape"]


def test_elementwise_prologue_fuses_into_injective_and_reduce():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    y = b.op("sum", b.op("exp", b.op("relu", x)), axes=(1,))
    assert labels(b.build([y])) == ["relu+exp+sum"]


def test_softmax_and_layer_norm_take_elementwise_epilogues_not_prologues():
    assert sorted(labels(cost_graphs.attention())) == sorted([
        "matmul", "matmul", "matmul", "transpose", "matmul+div", "softmax", "matmul+add", "layer_norm"])


def test_inception_branches_and_concat():
    assert sorted(labels(cost_graphs.inception_like())) == ["concat+relu", "conv2d+relu", "conv2d+relu",
                                                            "conv2d+relu", "max_pool2d"]


def test_split_items_fuse_into_their_consumers():
    assert labels(cost_graphs.split_slice_chain()) == ["matmul", "split+sigmoid+tanh+mul+strided_slice+expand_dims+squeeze"]


def test_opaque_nodes_stay_alone():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    (o,) = b.opaque([b.op("relu", x)], [b.type_of(x)], payload=None, key="op0", label="relax.mystery")
    assert labels(b.build([b.op("relu", o)])) == ["relu", "opaque", "relu"]


def test_sources_are_no_kernel_and_outputs_of_weights_fold():
    b = GraphBuilder()
    w = b.weight("w", (4, 4))
    g = b.build([b.op("relu", w)])
    part = partition(g)
    assert part.kernels == () and len(part.folded) == 1


def test_per_node_partition_has_one_kernel_per_running_node():
    graph = cost_graphs.conv_bias_relu()
    assert [k.label for k in per_node_partition(graph).kernels] == ["conv2d", "add", "relu"]


def test_workload_key_ignores_node_identity_but_not_shapes():
    a = partition(cost_graphs.residual_block(c=16)).kernels
    b = partition(cost_graphs.residual_block(c=16)).kernels
    c = partition(cost_graphs.residual_block(c=32)).kernels
    assert [k.key for k in a] == [k.key for k in b]
    assert a[0].key != a[1].key  # the second conv also reads the residual
    assert {k.key for k in a}.isdisjoint(k.key for k in c)


def test_same_kernel_in_different_graphs_has_the_same_key():
    chain1 = partition(cost_graphs.conv_bn_relu_chain(n=1), lowering="tuning").kernels
    chain3 = partition(cost_graphs.conv_bn_relu_chain(n=3), lowering="tuning").kernels
    assert {k.key for k in chain3} == {chain1[0].key}


def test_weights_and_activations_key_differently():
    def add(weight: bool):
        b = GraphBuilder()
        x = b.input("x", (4, 8))
        y = b.weight("y", (4, 8)) if weight else b.input("y", (4, 8))
        return partition(b.build([b.op("add", x, y)])).kernels[0]

    assert add(True).key != add(False).key


def test_unknown_lowering_is_refused():
    import pytest

    with pytest.raises(ValueError, match="lowering"):
        partition(cost_graphs.head(), lowering="fast")


def test_kernel_subgraph_is_standalone():
    k = partition(cost_graphs.residual_block()).kernels[1]
    sub = k.subgraph()
    assert sub.op_counts() == {"input": 2, "weight": 1, "conv2d": 1, "add": 1, "relu": 1}
    assert sub.output_types == k.output_types
