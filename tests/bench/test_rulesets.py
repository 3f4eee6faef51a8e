"""bench/rulesets: TASO's rules as Tensat spells them, read into graphs and derived with the shipped rules.
The rule lines here are written for these tests (identities any reader knows), in that spelling."""
from __future__ import annotations

import pytest

from bench.rulesets.coverage import check, main, summary
from bench.rulesets.tensat import Unreadable, graphs, read_rules


@pytest.fixture(scope="module")
def index():
    from taso_relay.subst import default_rules
    from taso_relay.subst.incremental import RuleIndex

    return RuleIndex(default_rules())


def ops(graph) -> list[str]:
    return [n.op for n in graph.nodes if n.op not in ("input", "weight")]


def test_both_spellings_read_at_tasos_shapes():
    old, new = read_rules("(relu (conv2d 1 1 0 0 ?input_7 ?input_13))=>(conv2d 1 1 0 2 ?input_7 ?input_13)\n"
                          "(matmul 0 ?input_1 (concat 1 2 ?input_4 ?input_5))=>(concat 1 2 (matmul 0 ?input_1 "
                          "?input_4) (matmul 0 ?input_1 ?input_5))")
    src, tgt = graphs(old)
    conv = next(n for n in tgt.nodes if n.op == "conv2d").attr_dict
    assert conv["padding"] == (0, 1, 0, 1) and conv["activation"] == "relu" and conv["groups"] == 1  # 1x3, SAME
    assert ops(src) == ["conv2d", "relu"] and src.output_types[0].shape == (2, 4, 5, 5)
    src, tgt = graphs(new)
    assert ops(src) == ["concat", "matmul"] and tgt.output_types[0].shape == (2, 8)
    pool, = read_rules("(poolavg 3 3 1 1 0 ?input_7)=>(conv2d 1 1 0 0 ?input_7 (Cpool 3 3))")
    src, tgt = graphs(pool)
    assert src.nodes[-1].attr_dict["count_include_pad"] and tgt.nodes[-1].attr_dict["groups"] == 4  # depthwise


def test_a_split_is_cut_where_its_concat_joined():
    pair = read_rules("(matmul 0 ?input_1 ?input_4)=>(split_0 (split 1 (matmul 0 ?input_1 (concat 1 2 ?input_4 "
                      "(transpose ?input_5)))))\n(matmul 0 ?input_1 ?input_5)=>(split_1 (split 1 (matmul 0 ?input_1 "
                      "(concat 1 2 ?input_4 (transpose ?input_5)))))", multi=True)
    assert len(pair) == 1 and pair[0].outputs == 2
    _, tgt = graphs(pair[0])
    split = next(n for n in tgt.nodes if n.op == "split").attr_dict
    assert split["axis"] == 1 and split["sizes"] == (4, 4)


def test_a_line_that_does_not_parse_is_one_unreadable_rule():
    rules = read_rules("(relu ?input_1=>?input_1\n(relu (relu ?input_1))=>(relu ?input_1)\n(relu ?input_7)")
    assert [bool(r.error) for r in rules] == [True, False, True]
    with pytest.raises(Unreadable):
        graphs(rules[0])
    assert graphs(rules[1])[0].output_types[0].shape == (2, 4)
    odd = read_rules("(relu ?input_1)=>(relu ?input_1)", multi=True)
    assert len(odd) == 1 and "second line" in odd[0].error


def test_unknown_operators_and_bad_shapes_are_unreadable():
    bad_op, bad_shape = read_rules("(frobnicate ?input_1)=>?input_1\n"
                                   "(ewadd ?input_1 ?input_7)=>(ewadd ?input_7 ?input_1)")
    for rule in (bad_op, bad_shape):
        with pytest.raises(Unreadable):
            graphs(rule)


def test_derivations_by_the_shipped_rules(index):
    text = "\n".join([
        "(ewadd ?input_1 ?input_2)=>(ewadd ?input_2 ?input_1)",  # the same graph once operands are ordered
        "(relu (conv2d 1 1 0 0 ?input_7 ?input_10))=>(conv2d 1 1 0 2 ?input_7 ?input_10)",  # relu fused
        "(ewadd (matmul ?input_1 ?input_4) (matmul ?input_1 ?input_5))=>(matmul ?input_1 (ewadd ?input_4 ?input_5))",
        "(relu (ewadd ?input_1 ?input_2))=>(ewadd (relu ?input_1) (relu ?input_2))",  # wrong
    ])
    same, fused, distributed, wrong = [check(r, index) for r in read_rules(text)]
    assert same["holds"] and same["steps"] == 0
    assert fused["holds"] and fused["steps"] == 1 and fused["by"]
    assert distributed["holds"] and distributed["steps"] == 1
    assert wrong["holds"] is False and wrong["steps"] is None
    assert summary([same, fused, distributed, wrong])["not_derived"] == 1


def test_the_command_writes_records_and_a_summary(tmp_path, capsys):
    rules = tmp_path / "rules.txt"
    rules.write_text("(matmul (matmul ?input_1 ?input_4) ?input_5)=>(matmul ?input_1 (matmul ?input_4 ?input_5))\n"
                     "(frobnicate ?input_1)=>?input_1")
    out = tmp_path / "coverage.json"
    assert main([str(rules), "--json", str(out), "--no-text"]) == 0
    import json

    data = json.loads(out.read_text())["rules.txt"]
    assert data["summary"]["read"] == 1 and data["summary"]["one_step"] == 1
    assert "rule" not in data["records"][0] and data["records"][0]["line"] == 1  # no other project's text kept
