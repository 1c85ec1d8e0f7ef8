"""The synthetic shapes dataset: layout, determinism, atomic writes, argument errors. No TF."""

import os
import time

import numpy as np
import pytest
from PIL import Image

from pipeline.data import shapes
from pipeline.data.shapes import CLASSES, generate_shapes
from pipeline.errors import DeployError

SMALL = dict(image_size=32, train_per_class=5, val_per_class=2)


def _files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def _read_all(root):
    return {rel: open(os.path.join(root, rel), "rb").read() for rel in _files(root)}


def test_layout_and_summary(tmp_path):
    out = tmp_path / "shapes"
    summary = generate_shapes(out, **SMALL)
    assert summary == {"classes": ["circle", "cross", "square", "triangle"], "train": 20, "val": 8,
                       "image_size": 32, "path": str(out)}
    files = _files(out)
    assert len(files) == 28
    assert os.path.join("train", "circle", "circle_0000.png") in files
    assert os.path.join("val", "triangle", "triangle_0001.png") in files
    with Image.open(out / "train" / "cross" / "cross_0004.png") as im:
        assert (im.format, im.mode, im.size) == ("PNG", "RGB", (32, 32))
        assert not im.info  # no metadata, no timestamps
    assert os.listdir(tmp_path) == ["shapes"]  # no temp dir left behind


def test_byte_identical_for_same_arguments(tmp_path):
    generate_shapes(tmp_path / "a", **SMALL)
    generate_shapes(tmp_path / "b", **SMALL)
    generate_shapes(tmp_path / "c", seed=1, **SMALL)
    a, b, c = (_read_all(tmp_path / n) for n in "abc")
    assert a == b
    assert a.keys() == c.keys() and all(a[k] != c[k] for k in a)


def test_smaller_dataset_is_a_prefix(tmp_path):
    generate_shapes(tmp_path / "small", image_size=32, train_per_class=2, val_per_class=1)
    generate_shapes(tmp_path / "big", **SMALL)
    assert _read_all(tmp_path / "small").items() <= _read_all(tmp_path / "big").items()


def test_images_vary(tmp_path):
    generate_shapes(tmp_path / "s", **SMALL)
    pixels = [np.asarray(Image.open(tmp_path / "s" / "train" / "square" / f"square_{i:04d}.png"))
              for i in range(5)]
    assert all(p.std() > 5 for p in pixels)  # a shape on a background, not a flat image
    assert len({p.tobytes() for p in pixels}) == 5


def test_val_per_class_zero_writes_no_val_folder(tmp_path):
    summary = generate_shapes(tmp_path / "s", image_size=16, train_per_class=1, val_per_class=0)
    assert summary["val"] == 0
    assert sorted(os.listdir(tmp_path / "s")) == ["train"]
    assert sorted(os.listdir(tmp_path / "s" / "train")) == list(CLASSES)


def test_existing_empty_folder_is_used(tmp_path):
    (tmp_path / "s").mkdir()
    generate_shapes(tmp_path / "s", **SMALL)
    assert len(_files(tmp_path / "s")) == 28


def test_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "keep.txt").write_text("mine")
    with pytest.raises(DeployError, match=r"output folder .*s already exists and is not empty; "
                                          r"remove it or choose another folder"):
        generate_shapes(tmp_path / "s", **SMALL)
    assert os.listdir(tmp_path / "s") == ["keep.txt"]


def test_refuses_a_file(tmp_path):
    (tmp_path / "s").write_text("x")
    with pytest.raises(DeployError, match=r"s is a file; choose a folder path for the generated dataset"):
        generate_shapes(tmp_path / "s", **SMALL)


@pytest.mark.parametrize("args, name", [
    (dict(image_size=4), "image_size"),
    (dict(image_size=32.0), "image_size"),
    (dict(train_per_class=0), "train_per_class"),
    (dict(val_per_class=-1), "val_per_class"),
    (dict(seed=-1), "seed"),
])
def test_bad_arguments(tmp_path, args, name):
    with pytest.raises(DeployError, match=rf"shapes dataset: {name} must be a whole number "
                                          rf"from \d+ to \d+, got"):
        generate_shapes(tmp_path / "s", **{**SMALL, **args})
    assert os.listdir(tmp_path) == []


def test_nothing_left_behind_on_failure(tmp_path, monkeypatch):
    real, calls = shapes.draw_shape, []

    def failing(*args):
        calls.append(1)
        if len(calls) > 3:
            raise RuntimeError("boom")
        return real(*args)

    monkeypatch.setattr(shapes, "draw_shape", failing)
    with pytest.raises(RuntimeError):
        generate_shapes(tmp_path / "s", **SMALL)
    assert os.listdir(tmp_path) == []


def test_defaults_are_fast(tmp_path):
    start = time.process_time()  # CPU time: not flaky on a busy machine
    summary = generate_shapes(tmp_path / "s")
    assert time.process_time() - start < 5
    assert (summary["train"], summary["val"], summary["image_size"]) == (240, 80, 96)
    with Image.open(tmp_path / "s" / "val" / "circle" / "circle_0019.png") as im:
        assert im.size == (96, 96)
