"""A model on the device, run through the device agent: the session shape of ``pipeline.backends``.

Each ``run`` is one agent call (an .npz each way), so batch consistency and accuracy checks use the
same code on a Jetson's TensorRT engine as on the host's ONNX Runtime.
"""

import base64
import io


class DeviceSession:
    def __init__(self, device, remote_model, backend, dla_core=None):
        self.device = device
        self.request = {"model": remote_model, "backend": backend, "dla_core": dla_core}
        described = device.call(dict(self.request, command="describe"), what="loading the model")
        self.name = backend
        self.inputs = [(i["name"], _shape(i["shape"]), i["dtype"]) for i in described["inputs"]]
        self.outputs = [(o["name"], _shape(o["shape"]), o["dtype"]) for o in described["outputs"]]
        self.output_names = [o[0] for o in self.outputs]
        self.label = dict(described["label"], device=device.describe())

    def run(self, feed):
        import numpy as np

        buffer = io.BytesIO()
        np.savez(buffer, **{name: np.asarray(value) for name, value in feed.items()})
        answer = self.device.call(dict(self.request, command="infer", feed=base64.b64encode(buffer.getvalue()).decode()),
                                  what="inference")
        data = np.load(io.BytesIO(base64.b64decode(answer["outputs"])), allow_pickle=False)
        return [data[name] for name in answer["order"]]


def _shape(shape):
    return None if shape is None else tuple(shape)
