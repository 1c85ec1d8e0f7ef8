"""INT8 calibration in the agent's TensorRT build: the one batch it runs at (TensorRT calibrates at the
calibration profile's OPT shape, so the profile, the calibrator and its device buffer share one number),
the process's CUDA object (the primary context, made before any TensorRT object), and an entropy
calibrator over the images the host sent, reading and writing the calibration cache.
"""

import os
from typing import Any, Dict, List, Optional  # noqa: F401  (type comments: the 3.6 floor)

from . import EngineError, write_atomic


def calibration_batch(profile, wanted):
    # type: (Dict[str, Dict[str, List[int]]], int) -> int
    """The batch int8 calibration runs at: TensorRT calibrates at the calibration profile's OPT shape, so the
    calibrator, its buffer and that profile all use this one number -- ``wanted`` (the host's choice) within
    every input's min..max batch (a fixed-batch input decides it)."""
    batch = int(wanted)
    for name, shapes in sorted(profile.items()):
        low, high = int(shapes["min"][0]), int(shapes["max"][0])
        batch = min(max(batch, low), high)
        if not low <= batch <= high:
            raise EngineError("int8 calibration: the inputs' batch ranges do not overlap ({!r}: {}..{})".format(
                name, low, high))
    return batch


def null_context():
    # type: () -> Any
    class Null(object):
        def __enter__(self):
            # type: () -> None
            return None

        def __exit__(self, *exc):
            # type: (*Any) -> None
            return None

    return Null()


def cuda_for_build():
    # type: () -> Any
    """The process's CUDA object, made before any TensorRT object (the primary context: cuda.shared())."""
    from . import cuda as cuda_module

    return cuda_module.shared()


def entropy_calibrator(calibration, batch, cuda, image_shape=None):
    # type: (Dict[str, Any], int, Any, Optional[List[int]]) -> Any
    """An entropy calibrator over ``calibration["images"]`` (an .npy of images preprocessed as at export),
    ``batch`` images a batch (the calibration profile's OPT batch; its device buffer holds exactly that),
    reading and writing ``calibration["cache"]`` (reused: the images are not run again)."""
    import numpy as np
    import tensorrt as trt

    images = np.ascontiguousarray(np.load(calibration["images"], allow_pickle=False), dtype=np.float32)
    cache_path = calibration.get("cache")
    if len(images) < batch and not (cache_path and os.path.exists(cache_path)):
        raise EngineError("int8 calibration needs at least {} images (one batch), got {}; add dataset images".format(
            batch, len(images)))
    if image_shape is not None and len(images) and list(images.shape[1:]) != list(image_shape):
        raise EngineError("int8 calibration images are {} but the model's input is {}; re-run the engine stage".format(
            list(images.shape[1:]), list(image_shape)))
    nbytes = int(images[:1].nbytes) * batch  # one batch: get_batch never hands TensorRT more than this buffer

    class Entropy(trt.IInt8EntropyCalibrator2):
        def __init__(self):
            # type: () -> None
            trt.IInt8EntropyCalibrator2.__init__(self)
            self.index = 0
            self.reused = False
            with cuda.active():
                self.device = cuda.alloc(nbytes)  # type: Optional[int]

        def get_batch_size(self):
            # type: () -> int
            return batch

        def get_batch(self, names, *args):
            # type: (List[str], *Any) -> List[int]
            if self.device is None or self.index + batch > len(images):
                return []  # no more batches (pyInt8Doc.h: "or an empty list")
            chunk = images[self.index:self.index + batch]
            with cuda.active():
                cuda.copy_to_device(self.device, chunk)
            self.index += batch
            return [int(self.device)]

        def read_calibration_cache(self, *args):
            # type: (*Any) -> Optional[bytes]
            if cache_path and os.path.exists(cache_path):
                self.reused = True
                with open(cache_path, "rb") as f:
                    return f.read()
            return None

        def write_calibration_cache(self, cache, *args):
            # type: (Any, *Any) -> None
            if cache_path:
                write_atomic(cache_path, bytes(cache))

        def release(self):
            # type: () -> None
            if self.device is not None:
                with cuda.active():
                    cuda.free(self.device)
            self.device = None

        def report(self):
            # type: () -> Dict[str, Any]
            return {"cache_reused": self.reused, "images": self.index, "batch_size": batch, "cache": cache_path,
                    "buffer_bytes": nbytes}

    return Entropy()
