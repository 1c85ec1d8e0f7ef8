"""TensorRT 11 has no fp16 builder flag (networks are strongly typed), so an fp16 engine there is built from
an ONNX model the host typed fp16 (onnxconverter-common, inputs and outputs kept float32) and sent with
``typed: fp16``; a TensorRT 10 board gets the model as it is. Both builders (Python API, trtexec) alike."""

import shutil
import sys
from pathlib import Path

import pytest

from pipeline.config.schema import EngineOptions
from pipeline.device.engine import build, profile_for, trt_major_minor
from pipeline.errors import DeployError
from pipeline.targets import load_target

from devicekit import tiny_onnx

FLOAT, FLOAT16 = 1, 10  # onnx.TensorProto.FLOAT, FLOAT16


class _Board:
    """A device whose probe says ``tensorrt``; its transport keeps a copy of each file sent (as the board's
    content-addressed blobs would) and its agent answers a build by writing the engine where it is told."""

    def __init__(self, tmp_path, tensorrt):
        self.tensorrt, self.requests, self.received = tensorrt, [], []
        board = self

        class Transport:
            work = str(tmp_path / "work")

            def send(self, path):
                kept = tmp_path / "received" / "{}-{}".format(len(board.received), Path(path).name)
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(str(path), str(kept))
                board.received.append(kept)
                return str(kept)

            def exec(self, command, what):
                pass

            def fetch(self, remote, local):
                if remote.endswith(".log"):
                    raise DeployError("no log")
                Path(local).write_bytes(b"plan")

        self.transport = Transport()

    def check_tensorrt(self, target, warn):
        pass

    def probe(self):
        return {"board": "agx_orin", "tensorrt": self.tensorrt}

    def describe(self):
        return "board"

    def call(self, request, what):
        self.requests.append(request)
        return {"engine_bytes": 4, "build_s": 0.1, "tensorrt_version": self.tensorrt, "precision": request["precision"]}


def _build(tmp_path, tensorrt, precision="fp16", builder="python"):
    model = tiny_onnx(tmp_path / "m.onnx")
    board = _Board(tmp_path, tensorrt)
    opts = EngineOptions(precision=precision, max_batch_size=4, builder=builder)
    profile = profile_for([("input", [None, 4, 4, 3])], opts, [1, 4])
    build(board, model, opts, profile, target=load_target("agx_orin"), engine_path=tmp_path / "stage" / "model.engine",
          log_path=tmp_path / "stage" / "build.log")
    return model, board


def _types(path):
    import onnx

    model = onnx.load(str(path))
    return ({i.name: i.data_type for i in model.graph.initializer},
            [v.type.tensor_type.elem_type for v in list(model.graph.input) + list(model.graph.output)])


@pytest.mark.parametrize("builder", ["python", "trtexec"])
def test_tensorrt_11_fp16_gets_the_model_typed_fp16_with_float32_io(tmp_path, builder):
    model, board = _build(tmp_path, "11.1.0.7", builder=builder)
    (request,) = board.requests
    assert request["typed"] == "fp16" and request["builder"] == builder and request["precision"] == "fp16"
    (sent,) = board.received
    assert request["onnx"] == str(sent)
    initializers, io = _types(sent)
    assert initializers == {"w": FLOAT16}  # the weights are half
    assert io == [FLOAT, FLOAT]  # the benchmark and the consistency check feed and read float32
    assert _types(model) == ({"w": FLOAT}, [FLOAT, FLOAT])  # the stage's own model is left as it was


@pytest.mark.parametrize("tensorrt, precision", [("10.3.0", "fp16"), ("8.2.1", "fp16"), ("11.1.0.7", "fp32"),
                                                 (None, "fp16")])
def test_other_boards_and_precisions_get_the_model_as_it_is(tmp_path, tensorrt, precision):
    """TensorRT 10 and older take fp16 as a builder flag; fp32 on 11 builds as is; a device without TensorRT's
    Python bindings (probe None: the trtexec route treats it as 8.x) is not typed either."""
    model, board = _build(tmp_path, tensorrt, precision)
    (request,) = board.requests
    assert "typed" not in request
    (sent,) = board.received
    assert sent.read_bytes() == model.read_bytes()


def test_a_host_without_the_converter_is_told_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxconverter_common", None)  # import fails as if not installed
    with pytest.raises(DeployError) as err:
        _build(tmp_path, "11.1.0.7")
    message = str(err.value)
    assert "\n" not in message and "pip install onnxconverter-common" in message and "TensorRT 11.1.0.7" in message
    assert not (tmp_path / "received").exists() and not (tmp_path / "stage").exists()  # nothing sent, nothing written
    _build(tmp_path, "10.3.0")  # TensorRT 10 does not need it


def test_the_typed_model_runs_in_onnx_runtime_with_float32_io_and_close_outputs(tmp_path):
    """Evidence the typed model is a valid model: ONNX Runtime loads it, takes float32 and gives float32 close to
    the untyped model's."""
    import numpy as np

    ort = pytest.importorskip("onnxruntime")
    model, board = _build(tmp_path, "11.0.0")
    feed = {"input": np.random.default_rng(1).uniform(0, 255, (3, 4, 4, 3)).astype(np.float32)}
    runs = [ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feed)[0]
            for path in (model, board.received[0])]
    assert runs[1].dtype == np.float32 and runs[1].shape == (3, 3)
    assert np.abs(runs[0] - runs[1]).max() < 1e-2


def test_tensorrt_versions_are_read_as_major_minor():
    assert trt_major_minor("11.1.0.7") == (11, 1) and trt_major_minor("10") == (10, 0)
    assert trt_major_minor(None) == (0, 0) and trt_major_minor("unknown") == (0, 0)
