"""deploy consistency: alone vs. in a batch, on graphs built here (tf.compat.v1) and tiny 8x8 images."""

import json

import numpy as np
import pytest

from pipeline.backends import load_onnx as onnxruntime_backend, open_session as tensorflow_backend
from pipeline.errors import DeployError
from pipeline.numeric.consistency import batch_consistency, format_report
from pipeline.numeric.divergence import first_divergence

IMAGES = np.random.RandomState(1).uniform(0, 255, (3, 8, 8, 3)).astype("float32")


# ------------------------------------------------------------------------------ numpy backends (no TF)


class FakeSession:
    """The session shape of pipeline.backends over numpy functions of the input batch."""

    name = "fake"

    def __init__(self, shape, output_names, fn):
        self.inputs = [("input", shape, "float32")]
        self.output_names = list(output_names)
        self.outputs = [(n, None, "float32") for n in output_names]
        self.label = {"runtime": "fake"}
        self._fn = fn

    def run(self, feed):
        return self._fn(feed["input"])


def fake(fn, shape=(None, 8, 8, 3)):
    return FakeSession(shape, ["out"], lambda batch: [fn(batch)])


def consistency_command(model, batch_sizes, samples, dataset=None, tolerance=None, format="text"):
    """``deploy consistency`` through the CLI: (what it printed, exit code)."""
    import contextlib
    import io

    from pipeline.cli import main

    sizes = batch_sizes if isinstance(batch_sizes, str) else ",".join(map(str, batch_sizes))
    argv = ["consistency", str(model), "--batch-sizes", sizes, "--samples", str(samples), "--format", format]
    argv += ["--dataset", str(dataset)] if dataset is not None else []
    argv += ["--atol", str(tolerance)] if tolerance is not None else []
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:  # a flag argparse refused (its type= parser): usage error, exit 1
            code = e.code
    errors = "".join(line + "\n" for line in err.getvalue().splitlines() if not line.lstrip().startswith("consistency: "))
    return (out.getvalue() + errors).strip(), code


def test_per_sample_model_passes():
    report = batch_consistency(fake(lambda x: x.mean(axis=(1, 2)) * 2), IMAGES, batch_sizes=(2, 4))
    assert report.passed and report.status == "pass"
    out = report.outputs[0]
    # alone twice + per image and size: one batch of copies + one batch per position
    assert out.cases == 3 * (2 + 4) * 2 and report.runs == 3 * (2 + 1 + 2 + 1 + 4)
    assert "PASS" in format_report(report)


def test_batch_statistics_fail_and_worst_case_is_reported():
    report = batch_consistency(fake(lambda x: x - x.mean(axis=0, keepdims=True)), IMAGES, batch_sizes=(2, 8))
    assert not report.passed and report.status == "inconsistent"
    out = report.outputs[0]
    assert out.max_abs_diff > 1 and out.max_rel_diff > 0.01
    assert out.worst["neighbours"] == "other images" and out.worst["batch_size"] in (2, 8)
    d = report.to_dict()
    json.dumps(d)
    assert d["status"] == "inconsistent" and d["outputs"][0]["passed"] is False and d["outputs"][0]["worst"]["image"] in range(3)


def test_copies_catch_batch_size_dependence():
    # a sum over the batch: the same with any neighbours of equal size, different beside copies
    report = batch_consistency(fake(lambda x: x + x.sum(axis=0, keepdims=True) * 0), IMAGES[:1])
    assert report.passed  # one image: a seeded stranger is the neighbour
    report = batch_consistency(fake(lambda x: x * len(x)), IMAGES[:2], batch_sizes=(2,))
    assert not report.passed


def test_stochastic_output_is_detected():
    rng = np.random.RandomState(0)
    report = batch_consistency(fake(lambda x: x * rng.uniform(size=x.shape)), IMAGES[:2], batch_sizes=(2,))
    assert report.status == "stochastic" and report.outputs[0].stochastic and report.outputs[0].stochastic_diff > 0
    assert "random" in format_report(report)


def test_tolerance_is_absolute_plus_relative():
    noisy = fake(lambda x: x * (1 + 1e-6 * (len(x) > 1)))
    assert batch_consistency(noisy, IMAGES[:2], batch_sizes=(2,)).passed  # rel 1e-6 < rtol 1e-4
    assert not batch_consistency(noisy, IMAGES[:2], batch_sizes=(2,), tolerance=0, rtol=0).passed


def test_fixed_batch_dimension_is_a_deploy_error():
    with pytest.raises(DeployError, match=r"input input has a fixed batch dimension of 1"):
        batch_consistency(fake(lambda x: x, shape=(1, 8, 8, 3)), IMAGES)


@pytest.mark.parametrize("shape, images", [
    ((None, 8, 6, 3), (2, 8, 6, 3)),
    ((None, 3, 8, 6), (2, 3, 8, 6)),  # channels first (an ONNX export of a PyTorch model): fed NCHW
    ((None, 1, 8, 6), (2, 1, 8, 6)),
    ((None, 8, 6, None), (2, 8, 6, 3)),  # a dynamic channel count is fed RGB
    ((None, 3, 3, 3), (2, 3, 3, 3)),
])
def test_sample_images_follow_graph_io_image_input(shape, images, monkeypatch):
    """The image size comes from pipeline.graph.io's one rule (image_input on the shape read as NHWC,
    channels_first for the layout); the rule consistency kept beside it gave these same images."""
    from pipeline.numeric import consistency

    seen, real = [], consistency.image_input
    monkeypatch.setattr(consistency, "image_input", lambda inputs: seen.append(inputs) or real(inputs))
    pixels, source = consistency._images(shape, 2, None, 0)
    assert pixels.shape == images and source == "random pixels, seed 0: no --dataset given" and len(seen) == 1


@pytest.mark.parametrize("shape, message", [
    ((None, 8, 8), r"input has shape \[None, 8, 8\]; consistency needs an image input \[N, H, W, C\]"),
    (None, r"input has shape None; consistency needs an image input"),
    ((None, 8, None, 3), r"input has a dynamic height/width \(shape \[None, 8, None, 3\]\)"),
    ((None, 3, None, 8), r"dynamic height/width"),
    # new: a zero height is refused here instead of running the model on empty images
    ((None, 0, 8, 3), r"input has shape \[None, 0, 8, 3\]; consistency needs an image input \[N, H, W, C\] of pos"),
])
def test_inputs_that_are_not_fixed_size_images_are_deploy_errors(shape, message):
    from pipeline.numeric import consistency

    with pytest.raises(DeployError, match=message):
        consistency._images(shape, 2, None, 0)


def test_output_without_batch_dimension_is_not_compared():
    b = FakeSession((None, 8, 8, 3), ["per_sample", "scalar"], lambda x: [x.mean(axis=(1, 2, 3)), np.float32(x.mean())])
    report = batch_consistency(b, IMAGES[:2], batch_sizes=(2,))
    assert report.passed and not report.outputs[1].compared and "not the batch" in report.outputs[1].note


def test_large_batches_are_checked_at_sampled_positions_and_still_fail_a_batch_dependent_model():
    from pipeline.numeric.consistency import positions

    rng = np.random.RandomState(0)
    chosen = positions(1024, rng)
    assert len(chosen) == 8 and {0, 1, 512, 1022, 1023} <= set(chosen) and chosen == sorted(set(chosen))
    assert positions(1024, np.random.RandomState(0)) == chosen  # seeded: the same positions every run
    assert positions(16, rng) == list(range(16))
    calls = []

    def batch_norm_in_training_mode(x):
        calls.append(len(x))
        return x - x.mean(axis=0, keepdims=True)

    report = batch_consistency(fake(batch_norm_in_training_mode), IMAGES[:2], batch_sizes=(256,))
    assert report.status == "inconsistent"
    # per image: alone twice, one batch of copies, one batch per sampled position (8), not 256
    assert calls.count(256) == 2 * (1 + 8) and report.runs == 2 * (2 + 1 + 8)


def test_a_batch_too_big_for_memory_is_refused_before_any_run():
    calls = []
    session = fake(lambda x: calls.append(len(x)) or x, shape=(None, 224, 224, 3))
    image = np.zeros((1, 224, 224, 3), "float32")  # 100000 of them: 112 GiB, twice
    with pytest.raises(DeployError, match=r"batch size 100000 needs about .* GiB for its input alone .* use batch sizes "
                                          r"up to \d+"):
        batch_consistency(session, image, batch_sizes=(2, 100000))
    from pipeline.numeric import consistency

    with pytest.raises(DeployError, match="available"):
        consistency._check_memory(np.zeros((1, 96, 96, 3), "float32"), (1024,), "float32", available=100 << 20)
    assert calls == []


def test_a_check_estimated_over_the_time_limit_is_refused_after_one_timed_batch():
    import time

    calls = []

    def slow(x):
        calls.append(len(x))
        time.sleep(0.002 * len(x))  # 3 images x (2 + 9 batches of 64) at 2 ms an image: about 3.5 s
        return x

    with pytest.raises(DeployError, match=r"would take about \d+ s .* the limit is 1 s"):
        batch_consistency(fake(slow), IMAGES, batch_sizes=(64,), time_limit_s=1)
    assert calls == [1, 1, 64]  # alone twice, then the one timed batch


def test_progress_is_reported():
    lines = []
    batch_consistency(fake(lambda x: x), IMAGES, batch_sizes=(2, 4), progress=lines.append)
    assert lines[0].startswith("consistency: 3 images x batch 2, 4 (30 runs, about ")
    assert lines[1:] == ["consistency: image {}/3 done".format(i) for i in (1, 2, 3)]


@pytest.mark.parametrize("sizes, message", [("1,8", "batch sizes must be 2 or more"), ("2,x", "'x' is not a whole number"),
                                            ("", "batch sizes must be 2 or more")])
def test_bad_batch_sizes_flag(sizes, message, tmp_path, capsys):
    from pipeline.cli import main

    with pytest.raises(SystemExit) as exit:
        main(["consistency", str(tmp_path / "m.onnx"), "--batch-sizes", sizes])
    assert exit.value.code == 1 and message in capsys.readouterr().err


# ------------------------------------------------------------------------------ TensorFlow graphs


def _tf():
    from pipeline.tf import import_tf

    return import_tf()


def _freeze(tf, graph, path, outputs=("output",)):
    v1 = tf.compat.v1
    with v1.Session(graph=graph) as sess:
        sess.run(v1.global_variables_initializer())
        frozen = v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), list(outputs))
    path.write_bytes(frozen.SerializeToString())
    return path


def bn_graph(path, is_training, batch=None, dropout=False):
    """conv -> fused_batch_norm -> relu [-> dropout(keep_prob 0.5)] -> dense."""
    tf = _tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        rng = np.random.RandomState(0)
        x = v1.placeholder(tf.float32, [batch, 8, 8, 3], name="input")
        y = tf.nn.conv2d(x, tf.Variable(rng.randn(3, 3, 3, 4).astype("float32") * 0.01, name="conv/kernel"), 1, "SAME",
                         name="conv/Conv2D")
        ones, zeros = tf.Variable(np.ones(4, "float32")), tf.Variable(np.zeros(4, "float32"))
        if is_training:
            y, _, _ = v1.nn.fused_batch_norm(y, ones, zeros, is_training=True, name="bn/FusedBatchNormV3")
        else:
            mean, var = tf.constant(rng.randn(4).astype("float32")), tf.constant(np.full(4, 2.0, "float32"))
            y, _, _ = v1.nn.fused_batch_norm(y, ones, zeros, mean=mean, variance=var, is_training=False,
                                             name="bn/FusedBatchNormV3")
        y = tf.nn.relu(y, name="relu")
        if dropout:
            y = v1.nn.dropout(y, keep_prob=0.5, name="dropout")
        y = tf.reshape(y, [-1, 8 * 8 * 4])
        tf.matmul(y, tf.Variable(rng.randn(256, 2).astype("float32")), name="output")
    return _freeze(tf, graph, path)


def reduce_graph(path, axes):
    """x - mean(x, axes): global average pooling over [1, 2] is per sample, over [0] is not."""
    tf = _tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 8, 8, 3], name="input")
        y = tf.nn.relu(x * 0.01, name="scaled")
        m = tf.reduce_mean(y, axis=axes, keepdims=True, name="pool")
        tf.identity(y - m, name="output")
    return _freeze(tf, graph, path)


@pytest.mark.tf
def test_training_batch_norm_fails_and_first_divergence_names_it(tmp_path):
    path = bn_graph(tmp_path / "train.pb", is_training=True)
    report = batch_consistency(tensorflow_backend(path), IMAGES, batch_sizes=(2, 8))
    assert report.status == "inconsistent" and report.outputs[0].worst["neighbours"] == "other images"
    div = first_divergence(path, IMAGES[0], IMAGES[1:])
    assert div.node == "bn/FusedBatchNormV3" and div.op == "FusedBatchNormV3" and div.reason == "batch-dependent"
    assert div.attrs["is_training"] is True and "bn_inference" in div.hint
    assert str(div).startswith("first divergence at bn/FusedBatchNormV3 (FusedBatchNormV3, is_training=true): max abs diff ")
    assert first_divergence(path, IMAGES[0], IMAGES[:1]) is None  # beside a copy of itself: same statistics


@pytest.mark.tf
def test_inference_batch_norm_passes(tmp_path):
    path = bn_graph(tmp_path / "infer.pb", is_training=False)
    report = batch_consistency(tensorflow_backend(path), IMAGES, batch_sizes=(2, 8))
    assert report.passed, format_report(report)
    assert first_divergence(path, IMAGES[0], IMAGES[1:]) is None


@pytest.mark.tf
def test_dropout_is_stochastic(tmp_path):
    path = bn_graph(tmp_path / "dropout.pb", is_training=False, dropout=True)
    report = batch_consistency(tensorflow_backend(path), IMAGES[:2], batch_sizes=(2,))
    assert report.status == "stochastic" and report.outputs[0].stochastic
    div = first_divergence(path, IMAGES[0], IMAGES[1:])
    assert div.reason == "stochastic" and div.op == "RandomUniform" and div.node.startswith("dropout/")
    assert "stochastic" in str(div) and "strip_dropout" in div.hint


@pytest.mark.tf
def test_reduction_over_batch_axis_fails_over_spatial_axes_passes(tmp_path):
    good = reduce_graph(tmp_path / "gap.pb", [1, 2])
    assert batch_consistency(tensorflow_backend(good), IMAGES, batch_sizes=(2, 4)).passed
    assert first_divergence(good, IMAGES[0], IMAGES[1:]) is None
    bad = reduce_graph(tmp_path / "batch_mean.pb", [0])
    assert not batch_consistency(tensorflow_backend(bad), IMAGES, batch_sizes=(2, 4)).passed
    div = first_divergence(bad, IMAGES[0], IMAGES[1:], position=1)
    assert (div.node, div.op, div.attrs["axis"]) == ("pool", "Mean", [0]) and "axis 0" in div.hint


@pytest.mark.tf
def test_fixed_batch_graph_is_a_deploy_error(tmp_path):
    path = bn_graph(tmp_path / "fixed.pb", is_training=False, batch=1)
    with pytest.raises(DeployError, match=r"input input has a fixed batch dimension of 1 \(shape \[1, 8, 8, 3\]\)"):
        batch_consistency(tensorflow_backend(path), IMAGES)
    text, code = consistency_command(path, "2,8", 2)
    assert code == 1 and text.startswith("deploy: error: input input has a fixed batch dimension of 1")


@pytest.mark.tf
def test_io_json_next_to_the_graph_is_used(tmp_path):
    path = bn_graph(tmp_path / "frozen.pb", is_training=False)
    (tmp_path / "io.json").write_text(json.dumps({"inputs": [{"name": "input"}], "outputs": [{"name": "relu"}]}))
    assert tensorflow_backend(path).output_names == ["relu"]
    (tmp_path / "io.json").write_text(json.dumps({"inputs": [{"name": "images"}], "outputs": [{"name": "relu"}]}))
    with pytest.raises(DeployError, match="io.json names images"):
        tensorflow_backend(path)


def _onnx(tmp_path, pb):
    import onnx

    from pipeline.convert import to_onnx
    from pipeline.graph.io import graph_io
    from pipeline.tf.graph import load_graph_def

    graph_def = load_graph_def(pb)
    path = tmp_path / (pb.stem + ".onnx")
    onnx.save(to_onnx(graph_def, graph_io(graph_def), 13), str(path))
    return path


@pytest.mark.tf
def test_onnx_models_converted_with_tf2onnx(tmp_path):
    good = onnxruntime_backend(_onnx(tmp_path, bn_graph(tmp_path / "infer.pb", is_training=False)))
    assert good.name == "onnxruntime" and good.inputs[0][1][0] is None
    assert batch_consistency(good, IMAGES, batch_sizes=(2, 8)).passed
    bad_path = _onnx(tmp_path, bn_graph(tmp_path / "train.pb", is_training=True))
    report = batch_consistency(onnxruntime_backend(bad_path), IMAGES, batch_sizes=(2, 8))
    assert report.status == "inconsistent" and report.outputs[0].max_abs_diff > 1e-3
    text, code = consistency_command(bad_path, "2", 2)
    assert code == 4 and "(onnxruntime)" in text and "first divergence" not in text  # node-level search is TF only


# ------------------------------------------------------------------------------ the command


@pytest.mark.tf
def test_command_text_json_and_exit_codes(tmp_path):
    bad = bn_graph(tmp_path / "train.pb", is_training=True)
    text, code = consistency_command(bad, "2,8", 3)
    assert code == 4 and "FAIL" in text and "random pixels, seed 0" in text  # 4: a comparison found a difference
    assert "first divergence at bn/FusedBatchNormV3 (FusedBatchNormV3, is_training=true): max abs diff" in text
    text, code = consistency_command(bad, [2], 2, format="json")
    d = json.loads(text)
    assert code == 4 and d["status"] == "inconsistent" and d["first_divergence"]["node"] == "bn/FusedBatchNormV3"
    text, code = consistency_command(bn_graph(tmp_path / "infer.pb", is_training=False), (2, 8), 2, tolerance=1e-4)
    assert code == 0 and text.startswith("batch consistency: PASS") and "1e-04" not in text and "0.0001" in text
    assert consistency_command(tmp_path / "missing.pb", (2,), 2)[1] == 1
    assert consistency_command(bad, "2,x", 2)[1] == 1
    assert consistency_command(bad, (1,), 2)[1] == 1
    text, code = consistency_command(tmp_path / "model.h5", (2,), 2, format="json")
    out, _, err = text.partition("\ndeploy: error: ")  # the one JSON error shape on stdout, the line on stderr
    assert code == 1 and json.loads(out)["error"]["exit_code"] == 1 and err


@pytest.mark.tf
def test_command_with_dataset_folder(tmp_path):
    from PIL import Image

    for k, cls in enumerate(("a", "a", "b", "b")):
        (tmp_path / "data" / cls).mkdir(parents=True, exist_ok=True)
        Image.fromarray((np.random.RandomState(k).rand(12, 10, 3) * 255).astype("uint8")).save(tmp_path / "data" / cls / f"{k}.png")
    bad = bn_graph(tmp_path / "train.pb", is_training=True)
    text, code = consistency_command(bad, "2", 3, dataset=tmp_path / "data")
    assert code == 4 and "dataset " in text and "(3 images)" in text and "bn/FusedBatchNormV3" in text
    flat = tmp_path / "flat"
    flat.mkdir()
    Image.fromarray(np.zeros((8, 8, 3), "uint8")).save(flat / "one.png")
    text, code = consistency_command(bn_graph(tmp_path / "infer.pb", is_training=False), "2", 4, dataset=flat)
    assert code == 0 and "(1 image)" in text


@pytest.mark.tf
def test_diagnosis_is_a_pure_function_of_graph_and_seed_and_names_both_causes(tmp_path):
    """Unseeded dropout and training-mode batch norm in one graph: the same answer every run, both
    causes in graph order (batch norm before dropout)."""
    path = bn_graph(tmp_path / "train.pb", is_training=True, dropout=True)
    texts = {consistency_command(path, "2,8", 3)[0] for _ in range(4)}
    assert len(texts) == 1, texts
    text = texts.pop()
    first = text.index("first divergence at bn/FusedBatchNormV3 (FusedBatchNormV3, is_training=true): max abs diff")
    also = text.index("also divergence at dropout/random_uniform/RandomUniform (RandomUniform): stochastic")
    assert first < also
    d = json.loads(consistency_command(path, "2,8", 3, format="json")[0])
    assert [(x["node"], x["reason"]) for x in d["divergences"]] == [
        ("bn/FusedBatchNormV3", "batch-dependent"), ("dropout/random_uniform/RandomUniform", "stochastic")]
    assert d["first_divergence"]["node"] == "bn/FusedBatchNormV3"


@pytest.mark.tf
def test_seeded_graph_def_leaves_seeded_ops_and_the_file_alone(tmp_path):
    from pipeline.tf.graph import DEPLOY_SEED, seeded_graph_def
    from pipeline.tf.graph import load_graph_def

    path = bn_graph(tmp_path / "train.pb", is_training=True, dropout=True)
    original = path.read_bytes()
    graph_def = load_graph_def(path)
    seeded = seeded_graph_def(graph_def)
    random = [n for n in seeded.node if n.op == "RandomUniform"]
    assert random and all(n.attr["seed"].i == DEPLOY_SEED and n.attr["seed2"].i for n in random)
    assert all(n.attr["seed"].i == 0 for n in graph_def.node if n.op == "RandomUniform")  # a copy
    assert path.read_bytes() == original
