"""One registry for TensorFlow and ONNX passes: order, --help, config validation and docs come from it."""

from pathlib import Path

import pytest

from pipeline.errors import DeployError
from pipeline.rewrite import order, registry, rewrite_pass
from pipeline.rewrite.docs import BEGIN, END, pass_tables
from pipeline.rewrite.engine import check_names

ROOT = Path(__file__).resolve().parents[2]


def test_run_order_is_registration_order_by_theme():
    assert order("tf") == ("cut", "set_input_shape", "strip_dropout", "bn_inference", "remove_identity", "prune",
                           "fold_constants", "fold_batchnorm", "fold_pad", "drop_noop_cast", "substitute_activations",
                           "uff_compat", "fold_shape")
    assert order("onnx") == ("onnx_fold_constants", "retype_uint8_input", "lower_opset", "replace_nms_with_plugin",
                             "onnx_remove_identity")
    assert set(registry(None)) == set(order("tf")) | set(order("onnx"))


def test_every_pass_has_a_description_and_declares_what_it_reads():
    for p in registry(None).values():
        assert p.doc and p.description.startswith(p.doc.rstrip(".")[:20]), p.name
        assert set(p.needs) <= set(p.accepts), p.name


def test_unknown_names_say_what_exists_and_which_kind_a_name_belongs_to():
    with pytest.raises(DeployError, match=r"unknown rewrite pass 'strip_dropuot'; did you mean 'strip_dropout'\?"):
        check_names(["strip_dropuot"], "tf")
    with pytest.raises(DeployError, match=r"unknown ONNX rewrite pass 'strip_dropout'; strip_dropout is a pass for "
                                          r"TensorFlow frozen graphs \(ONNX passes: lower_opset, "):
        check_names(["strip_dropout"], "onnx")
    check_names(list(order("onnx")), "onnx")


def test_kind_is_checked_when_a_pass_registers():
    with pytest.raises(ValueError, match="kind must be one of tf, onnx"):
        rewrite_pass("x", kind="uff")


def test_pass_help_lists_every_pass_in_order(capsys):
    from pipeline.cli import main

    with pytest.raises(SystemExit):
        main(["rewrite", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "TensorFlow: " + ", ".join(order("tf")) in text and "ONNX: " + ", ".join(order("onnx")) in text


def test_docs_tables_are_generated_from_the_registry():
    docs = (ROOT / "docs" / "rewrite.md").read_text(encoding="utf-8")
    block = docs[docs.index(BEGIN):docs.index(END) + len(END)]
    assert block == pass_tables(), "docs/rewrite.md is stale: python -m pipeline.rewrite.docs, paste the block"
