"""Two-operand einsums read as transposes, reshapes and a matmul: the plan computes numpy's einsum, and
TVM's own einsum (relax.einsum, and topi's via the ONNX importer's call_tir) becomes graph ops."""
import numpy as np
import pytest

from taso_relay.bridge.einsum import plan
from taso_relay.graph.graph import GraphBuilder
from taso_relay.graph.interpreter import evaluate

READ = [
    ("bhid,bhjd->bhij", (2, 3, 4, 5), (2, 3, 6, 5)),  # attention scores
    ("bhij,bhjd->bhid", (2, 3, 4, 6), (2, 3, 6, 5)),  # attention output
    ("B G H I D, B G H J D -> B G H I J", (1, 4, 2, 3, 5), (1, 4, 2, 6, 5)),  # MaxViT's, as exported
    ("ij,jk->ik", (3, 4), (4, 5)),
    ("ij,kj->ki", (3, 4), (5, 4)),  # output transposed
    ("i,j->ij", (3,), (4,)),  # outer product: nothing contracted
    ("ij,ij->", (3, 4), (3, 4)),  # to a scalar
    ("bij,bjk", (2, 3, 4), (2, 4, 5)),  # implicit output
    ("...ij,...jk->...ik", (2, 3, 4, 5), (2, 3, 5, 6)),
    ("abcd,cbe->aed", (2, 3, 4, 5), (4, 3, 6)),  # two contracted indices, not adjacent
    ("nqhd,nkhd->nhqk", (1, 7, 2, 8), (1, 9, 2, 8)),  # transformers' layout
]
NOT_READ = [
    ("ii,ij->j", (3, 3), (3, 4)),  # a diagonal
    ("ij,jk->i", (3, 4), (4, 5)),  # k summed in one operand only
    ("bij,jk->bik", (1, 3, 4), (2, 4, 5)),  # j fine but sizes of a shared index differ below
    ("ij,jk,kl->il", (3, 4), (4, 5)),  # three operands
    ("...ij,...jk->ik", (2, 3, 4), (2, 4, 5)),  # the ellipsis summed away: numpy refuses it
]


def run_plan(equation, sa, sb, a, b):
    steps = plan(equation, sa, sb)
    assert steps is not None and sum(op == "matmul" for op, _, _ in steps) == 1
    g = GraphBuilder()
    refs = [g.input("a", sa, "float64"), g.input("b", sb, "float64")]
    for op, attrs, inputs in steps:
        refs.append(g.op(op, *(refs[k] for k in inputs), **attrs))
    return evaluate(g.build([refs[-1]]), {"a": a, "b": b})[0]


@pytest.mark.parametrize("equation,sa,sb", READ)
def test_the_plan_computes_numpys_einsum(equation, sa, sb):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=sa), rng.normal(size=sb)
    want = np.einsum(equation.replace(" ", ""), a, b)
    got = run_plan(equation, sa, sb, a, b)
    assert got.shape == want.shape and np.allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("equation,sa,sb", NOT_READ)
def test_what_is_not_a_matmul_is_not_read(equation, sa, sb):
    if equation == "bij,jk->bik":
        sb = (5, 5)  # j of size 4 in a, 5 in b
    assert plan(equation, sa, sb) is None


def test_no_step_is_spent_on_a_plain_batched_matmul():
    steps = plan("bij,bjk->bik", (2, 3, 4), (2, 4, 5))
    assert [op for op, _, _ in steps] == ["matmul"]
    assert [op for op, _, _ in plan("bhid,bhjd->bhij", (2, 3, 4, 5), (2, 3, 6, 5))] == ["transpose", "matmul"]


def test_onnx_einsum_imports_as_matmuls_and_computes_what_topi_does(run_module, rng):
    """TVM's importer writes ONNX Einsum as call_tir of topi's einsum; the equation is read off the
    PrimFunc and checked structurally. The function emitted from the graph (matmuls now) computes
    what the imported one does."""
    from bridge_onnx_models import einsum_attention, import_onnx

    from taso_relay.bridge import function_from_graph, graph_from_function

    mod = import_onnx(einsum_attention())
    imported = graph_from_function(mod["main"], "main", mod)
    graph = imported.graph
    assert graph.op_counts()["matmul"] == 3 + 2  # the projections and the two attention einsums
    assert [graph.nodes[i].attr("label") for i in graph.nodes_of("opaque")] == ["relax.call_tir"]  # the sum
    x = [rng.uniform(-1, 1, (1, 4, 8)).astype("float32")]
    changed = mod.clone()
    changed["main"] = function_from_graph(graph, "main", imported.signature)
    for want, got in zip(run_module(mod, x), run_module(changed, x)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_relax_einsum_imports_as_a_matmul(run_module, rng):
    """PyTorch's Relax frontend keeps torch.einsum as relax.einsum: read the same way."""
    import tvm
    from tvm import relax

    from taso_relay.bridge import function_from_graph, graph_from_function

    bb = relax.BlockBuilder()
    a = relax.Var("a", relax.TensorType((2, 3, 4, 5), "float32"))
    b = relax.Var("b", relax.TensorType((2, 3, 6, 5), "float32"))
    with bb.function("main", [a, b]):
        with bb.dataflow():
            s = bb.emit(relax.op.einsum((a, b), "bhid,bhjd->bhij"))
            t = bb.emit(relax.op.einsum((s, b), "bhij,bhjd->bhid"))
            u = bb.emit(relax.op.einsum((a, b), "bhid,bhjd->bhj"))  # i summed in a alone: not read
            out = bb.emit_output(relax.Tuple([t, u]))
        bb.emit_func_output(out)
    mod = bb.get()
    imported = graph_from_function(mod["main"], "main", mod)
    graph = imported.graph
    assert graph.op_counts()["matmul"] == 2
    assert [graph.nodes[i].attr("label") for i in graph.nodes_of("opaque")] == ["relax.einsum"]
    xs = [rng.uniform(-1, 1, (2, 3, 4, 5)).astype("float32"), rng.uniform(-1, 1, (2, 3, 6, 5)).astype("float32")]
    changed = tvm.IRModule({"main": function_from_graph(graph, "main", imported.signature)})
    for want, got in zip(run_module(mod, xs), run_module(changed, xs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_pass_rewrites_around_an_einsum_and_keeps_the_results(run_module, rng):
    """The duplicate projection merged; the einsums emitted as matmuls; the compiled result agrees."""
    from bridge_onnx_models import einsum_attention, import_onnx

    from taso_relay.bridge.execute import random_inputs
    from taso_relay.passes import TASOPass

    mod = import_onnx(einsum_attention())
    taso = TASOPass(time_limit=2, verify_speed=False)
    out = taso(mod)
    report = taso.report["main"]
    assert report.status == "optimized", report.summary()
    assert report.ops_after["matmul"] < report.ops_before["matmul"]
    inputs = random_inputs(mod["main"].params, rng)
    for want, got in zip(run_module(mod, inputs), run_module(out, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("equation,sa,sb", [("zyx,zyw->xw", (2, 3, 4), (2, 3, 5)),  # summed in topi's order
                                            ("bhid,bhjd->bhij", (1, 2, 3, 4), (1, 2, 5, 4))])
def test_topis_einsum_is_read_back_from_its_primfunc(equation, sa, sb, run_module, rng):
    """The equation is read off the PrimFunc whatever letters it was written with (topi loops over the
    summed indices in sorted order), then checked structurally against topi's own."""
    import tvm
    from tvm import relax, topi

    from taso_relay.bridge import function_from_graph, graph_from_function

    bb = relax.BlockBuilder()
    a, b = relax.Var("a", relax.TensorType(sa, "float32")), relax.Var("b", relax.TensorType(sb, "float32"))
    with bb.function("main", [a, b]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit_te(topi.einsum, equation, a, b))
        bb.emit_func_output(out)
    mod = bb.get()
    imported = graph_from_function(mod["main"], "main", mod)
    assert imported.graph.op_counts().get("matmul") == 1 and not imported.graph.nodes_of("opaque")
    xs = [rng.uniform(-1, 1, sa).astype("float32"), rng.uniform(-1, 1, sb).astype("float32")]
    changed = tvm.IRModule({"main": function_from_graph(imported.graph, "main", imported.signature)})
    np.testing.assert_allclose(run_module(changed, xs)[0], run_module(mod, xs)[0], rtol=1e-5, atol=1e-6)
