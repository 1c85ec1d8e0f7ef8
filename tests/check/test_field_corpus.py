"""Prediction against the real converter, on graphs built the ways the field builds them
(tests/check/field_graphs.py): for each, the onnx route's verdict from the offline prediction
(tf2onnx not run) and from tf2onnx's real output. They agree; where they cannot, the prediction
is never YES where the conversion is NO.

On jetson_tx2 (TensorRT 8.2, the issue's own target: the parser's INT32 shape arithmetic, e.g. the
ReduceProd of Keras Flatten's shape vector, and a TF2 while loop's int32 inputs are accepted) and
on agx_orin (TensorRT 10). The corpus is converted once per opset, in one tf2onnx subprocess
(convert_probe.convert_many); check_model then finds each conversion in the per-process cache."""

import pytest

from pipeline.check import check_model, convert_probe
from pipeline.targets import load_target
from pipeline.targets.tf2onnx import load_tf2onnx_table

pytestmark = [pytest.mark.tf, pytest.mark.slow]

# name: (onnx verdict on tf2onnx's output, basis of the answer when check may convert)
EXPECTED = {
    "tf1_dropout_const": ("NO", "converted"),  # today's TF applies the mask with SelectV2: not rewritten
    "tf1_dropout_placeholder": ("NO", "converted"),
    "tf115_dropout_const": ("YES", "converted"),  # Cast -> Mul with a constant rate: ONNX Dropout
    "tf115_dropout_placeholder": ("NO", "converted"),  # "does not have a constant ratio"
    "tf2_dropout_const": ("NO", "converted"),
    "tf2_dropout_placeholder": ("NO", "converted"),
    "keras_dropout_training": ("NO", "converted"),  # StatelessRandomUniformV2: no conversion
    "keras_flatten_tf1": ("YES", "converted"),  # Prod over the shape vector is not a batch reduction
    "keras_flatten_tf2": ("YES", "converted"),
    "batch_mean": ("NO", "converted"),  # a real reduction over the batch
    "tf_cond": ("YES", "converted"),
    "tf_case": ("NO", "predicted"),  # _SwitchN is TensorFlow-internal: the screen refuses it; tf2onnx cannot convert it either
    "tf1_while": ("YES", "converted"),
    "tf2_while": ("YES", "converted"),
    "placeholder_with_default": ("YES", "converted"),
    "queue_input": ("NO", "predicted"),  # not an inference graph: NO before any conversion
    "string_input": ("NO", "converted"),  # DecodeJpeg, a STRING input
    "lstm_unrolled": ("YES", "converted"),
    "lstm_dynamic": ("YES", "converted"),
}
# where the prediction cannot follow tf2onnx (it is NO where the conversion is YES, never the reverse)
PREDICTION_STRICTER = {"lstm_dynamic"}  # the table has no TensorArray handlers; the loop rewriter takes them


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    import field_graphs

    return field_graphs.build_corpus(tmp_path_factory.mktemp("field"))


TARGETS = ("jetson_tx2", "agx_orin")


@pytest.fixture(scope="module")
def answers(corpus):
    """{target: {name: (predicted report, converted report)}}."""
    out = {}
    for target_name in TARGETS:
        target = load_target(target_name)
        opset = min(target.max_opset, load_tf2onnx_table().max_opset)  # what check_model converts at
        done = convert_probe.convert_many(list(corpus.values()), opset)
        assert set(done) == {str(p.resolve()) for p in corpus.values()}, "the batch conversion answered every graph"
        out[target_name] = {name: (check_model(path, target, convert=False), check_model(path, target))
                            for name, path in corpus.items()}
    return out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_prediction_and_conversion_agree(answers, target, name):
    predicted, converted = answers[target][name]
    verdict, basis = EXPECTED[name]
    assert predicted.route("onnx").basis == "predicted"
    assert converted.route("onnx").basis == basis, converted.route("onnx").note
    assert converted.verdict("onnx") == verdict, [f.cause for f in converted.route("onnx").findings]
    if name in PREDICTION_STRICTER:
        assert predicted.verdict("onnx") == "NO"
    else:
        assert predicted.verdict("onnx") == verdict, [f.cause for f in predicted.route("onnx").findings]
    # never YES where the conversion says NO
    assert not (predicted.verdict("onnx") == "YES" and converted.verdict("onnx") == "NO")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", [n for n in sorted(EXPECTED) if "dropout" in n])
def test_dropout_op_for_op(answers, target, name):
    """The dropout nodes the prediction blames are the ones tf2onnx left random (or replaced)."""
    predicted, converted = answers[target][name]

    def random_nodes(report):
        return sorted(n for f in report.route("onnx").accepted_but_wrong + report.route("onnx").findings
                      if f.severity != "info" for n in f.nodes if "random" in n.lower() or "dropout" in n.lower())

    assert random_nodes(predicted) == random_nodes(converted)


def test_flatten_int32_shape_arithmetic_is_taken_on_tensorrt_8_2(corpus, answers):
    """h7's question: tf2onnx turns Keras Flatten's Prod over the shape vector into ReduceProd on an
    INT32 tensor; the 8.2 parser takes INT32 for Reduce* (onnx-tensorrt 8.2.1's parser source), so
    jetson_tx2 does not refuse it, and the prediction (YES) stands."""
    onnx = pytest.importorskip("onnx")
    _, converted = answers["jetson_tx2"]["keras_flatten_tf1"]
    route = converted.route("onnx")
    assert route.basis == "converted" and "ReduceProd" in route.converter["ops"]
    conversion = convert_probe.convert(corpus["keras_flatten_tf1"], route.opset)  # the cached conversion
    model = onnx.shape_inference.infer_shapes(onnx.load(conversion.onnx_path))
    types = {v.name: v.type.tensor_type.elem_type for v in list(model.graph.value_info) + list(model.graph.input)}
    types.update({t.name: t.data_type for t in model.graph.initializer})
    prods = [n for n in model.graph.node if n.op_type == "ReduceProd"]
    assert prods and all(types.get(n.input[0]) == onnx.TensorProto.INT32 for n in prods)
    assert not [f for f in route.findings if f.kind == "dtype" and f.severity == "blocker"]
    assert converted.verdict("onnx") == "YES"
