"""Image-folder indexing, validation errors, load_images and fingerprint_dataset. No TF."""

import io
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from pipeline.data.folder import fingerprint_dataset, image_hw, index_image_folder, load_images
from pipeline.data.shapes import generate_shapes
from pipeline.errors import DeployError


def _image(path, colour=(200, 30, 60), size=(8, 8), mode="RGB", fmt=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.new(mode, size, colour).save(path, format=fmt)
    return str(path)


def _flat(root, counts):
    """root/<class>/img_XX.png for {class: count}."""
    for name, n in counts.items():
        for i in range(n):
            _image(root / name / f"img_{i:02d}.png", colour=(i * 20, 100, 50))
    return root


@pytest.fixture(scope="module")
def shapes_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data") / "shapes"
    generate_shapes(root, image_size=16, train_per_class=5, val_per_class=2)
    return root


def test_train_val_layout(shapes_dir):
    index = index_image_folder(shapes_dir)
    assert index.classes == ["circle", "cross", "square", "triangle"]
    assert (len(index.train), len(index.val), index.source) == (20, 8, str(shapes_dir))
    for split, items in (("train", index.train), ("val", index.val)):
        for path, label in items:
            assert os.path.isabs(path)
            assert path.startswith(os.path.join(str(shapes_dir), split, index.classes[label]) + os.sep)


def test_flat_layout_split_is_stratified_and_deterministic(tmp_path):
    _flat(tmp_path, {"b": 10, "a": 10, "c": 5})
    index = index_image_folder(tmp_path, val_split=0.2, seed=0, verify=False)
    assert index.classes == ["a", "b", "c"]
    val_per_class = np.bincount([y for _, y in index.val], minlength=3)
    assert val_per_class.tolist() == [2, 2, 1]
    assert len(index.train) == 20
    assert {p for p, _ in index.train}.isdisjoint(p for p, _ in index.val)
    assert index == index_image_folder(tmp_path, val_split=0.2, seed=0)
    assert index.val != index_image_folder(tmp_path, val_split=0.2, seed=1).val
    assert [p for p, _ in index.train] == sorted(p for p, _ in index.train)  # sorted, unshuffled


def test_split_edges(tmp_path):
    _flat(tmp_path, {"one": 1, "two": 2, "many": 10})
    assert index_image_folder(tmp_path, val_split=0).val == []
    index = index_image_folder(tmp_path, val_split=0.2)
    counts = {index.classes[y]: 0 for y in range(3)}
    for _, y in index.val:
        counts[index.classes[y]] += 1
    assert counts == {"many": 2, "one": 0, "two": 1}  # at least 1 in val, and 1 left for train


def test_train_only_is_split_and_validation_is_accepted(tmp_path):
    _flat(tmp_path / "train", {"a": 5, "b": 5})
    index = index_image_folder(tmp_path, val_split=0.4)
    assert (len(index.train), len(index.val)) == (6, 4)
    _flat(tmp_path / "validation", {"a": 1, "b": 1})
    index = index_image_folder(tmp_path, val_split=0.4)
    assert (len(index.train), len(index.val)) == (10, 2)


def test_ignores_other_files_and_hidden_folders(tmp_path):
    _flat(tmp_path, {"a": 2, "b": 2})
    (tmp_path / "README.txt").write_text("about")
    (tmp_path / "a" / "notes.txt").write_text("x")
    (tmp_path / "a" / ".DS_Store").write_bytes(b"\0")
    _image(tmp_path / ".ipynb_checkpoints" / "x.png")
    _image(tmp_path / "b" / ".hidden" / "x.png")
    _image(tmp_path / "b" / "nested" / "UPPER.JPG", fmt="JPEG")
    index = index_image_folder(tmp_path, val_split=0)
    assert index.classes == ["a", "b"]
    assert sorted(os.path.relpath(p, tmp_path) for p, _ in index.train) == [
        os.path.join("a", "img_00.png"), os.path.join("a", "img_01.png"),
        os.path.join("b", "img_00.png"), os.path.join("b", "img_01.png"),
        os.path.join("b", "nested", "UPPER.JPG")]


def test_missing_folder(tmp_path):
    with pytest.raises(DeployError, match=r"dataset folder .*nope does not exist; check the dataset path"):
        index_image_folder(tmp_path / "nope")


def test_path_is_a_file(tmp_path):
    path = _image(tmp_path / "x.png")
    with pytest.raises(DeployError, match=r"dataset path .*x.png is not a folder; point it at a folder "
                                          r"with one subfolder of images per class"):
        index_image_folder(path)


def test_empty_folder(tmp_path):
    with pytest.raises(DeployError, match=r"dataset folder .* has no class subfolders; put images in "
                                          r".*/<class>/ or .*/train/<class>/ and .*/val/<class>/$"):
        index_image_folder(tmp_path)


def test_images_without_class_folders(tmp_path):
    _image(tmp_path / "a.png")
    with pytest.raises(DeployError, match=r"has no class subfolders \(images must be inside one "
                                          r"subfolder per class\); put images in"):
        index_image_folder(tmp_path)


def test_class_folder_without_images(tmp_path):
    _flat(tmp_path, {"square": 2})
    (tmp_path / "circle").mkdir()
    (tmp_path / "circle" / "notes.txt").write_text("x")
    expected = (f"dataset folder {tmp_path / 'circle'} has no images (.png/.jpg/.jpeg/.bmp/.gif); "
                "add images or remove the folder")
    with pytest.raises(DeployError) as caught:
        index_image_folder(tmp_path)
    assert str(caught.value) == expected


def test_single_class(tmp_path):
    _flat(tmp_path, {"only": 3})
    with pytest.raises(DeployError, match=r"dataset folder .* has only 1 class \(only\); "
                                          r"a classifier needs at least 2 class subfolders"):
        index_image_folder(tmp_path)


def test_val_classes_must_match_train(tmp_path):
    _flat(tmp_path / "train", {"a": 2, "b": 2, "c": 2})
    _flat(tmp_path / "val", {"a": 1, "b": 1, "d": 1})
    with pytest.raises(DeployError, match=r"dataset folder .*val has different classes from .*train "
                                          r"\(missing in val: c; only in val: d\); "
                                          r"give both the same class subfolders"):
        index_image_folder(tmp_path)


@pytest.mark.parametrize("val_split", [-0.1, 1, 1.5, "0.2", True])
def test_bad_val_split(tmp_path, val_split):
    _flat(tmp_path, {"a": 2, "b": 2})
    with pytest.raises(DeployError, match=r"val_split must be at least 0 and less than 1, got"):
        index_image_folder(tmp_path, val_split=val_split)


def _truncated(fmt):
    buffer = io.BytesIO()
    Image.fromarray(np.random.RandomState(0).randint(0, 255, (64, 64, 3), np.uint8)).save(buffer, fmt)
    return buffer.getvalue()[: len(buffer.getvalue()) // 2]


@pytest.mark.parametrize("name, content, reason", [
    ("bad.png", b"not an image at all", r"not an image, or an unknown format"),
    ("cut.png", _truncated("PNG"), r".+"),
    ("cut.jpg", _truncated("JPEG"), r".+"),
])
def test_unreadable_image(tmp_path, name, content, reason):
    _flat(tmp_path, {"a": 2, "b": 2})
    (tmp_path / "b" / name).write_bytes(content)
    with pytest.raises(DeployError, match=rf"image file .*b/{name} is not a readable image \({reason}\); "
                                          r"delete or replace it$"):
        index_image_folder(tmp_path)
    index_image_folder(tmp_path, verify=False)  # verify=False skips the check


def test_format_tensorflow_cannot_decode(tmp_path):
    _flat(tmp_path, {"a": 2, "b": 2})
    _image(tmp_path / "a" / "really_a_tiff.png", fmt="TIFF")
    with pytest.raises(DeployError, match=r"image file .*really_a_tiff.png is a TIFF image, which "
                                          r"TensorFlow cannot decode; convert it to PNG or JPEG"):
        index_image_folder(tmp_path)


def test_load_images(tmp_path):
    paths = [_image(tmp_path / "rgb.png", (10, 20, 30), size=(12, 6)),
             _image(tmp_path / "rgba.png", (40, 50, 60, 0), mode="RGBA"),
             _image(tmp_path / "grey.bmp", 70, mode="L"),
             _image(tmp_path / "pal.gif", (80, 90, 100), fmt="GIF")]
    images = load_images(paths, 5)
    assert images.shape == (4, 5, 5, 3) and images.dtype == np.float32
    expected = [(10, 20, 30), (40, 50, 60), (70, 70, 70), (80, 90, 100)]
    colours = np.array(expected, np.float32)[:, None, None]
    np.testing.assert_allclose(images, np.broadcast_to(colours, images.shape))
    assert load_images(paths[:1], (4, 6)).shape == (1, 4, 6, 3)
    assert load_images([], 3).shape == (0, 3, 3, 3)
    (tmp_path / "bad.png").write_bytes(b"nope")
    with pytest.raises(DeployError, match=r"image file .*bad.png is not a readable image \(.+\); "
                                          r"delete or replace it$"):
        load_images([str(tmp_path / "bad.png")], 5)


def test_image_hw():
    assert image_hw(7) == (7, 7) and image_hw((3, 4)) == (3, 4) and image_hw([5, 6]) == (5, 6)


def test_fingerprint(tmp_path):
    root = _flat(tmp_path / "d", {"a": 2, "b": 2})
    first = fingerprint_dataset(root)
    assert first == fingerprint_dataset(str(root)) and len(first) == 64
    (root / ".cache").write_text("hidden files do not count")
    assert fingerprint_dataset(root) == first

    changed = root / "a" / "img_00.png"
    _image(changed, colour=(1, 2, 3), size=(9, 9))
    second = fingerprint_dataset(root)
    assert second != first
    os.utime(changed, ns=(10**18, 10**18))  # same content, new mtime
    third = fingerprint_dataset(root)
    assert third != second
    os.rename(changed, root / "a" / "renamed.png")
    assert fingerprint_dataset(root) != third

    one = fingerprint_dataset(root / "b" / "img_00.png")
    assert one == fingerprint_dataset(str(root / "b" / "img_00.png"))
    assert one != fingerprint_dataset(root / "b" / "img_01.png")
    assert fingerprint_dataset(str(root / "b" / "*.png")) != one
    with pytest.raises(DeployError, match=r"dataset path .*missing does not exist; check the dataset path"):
        fingerprint_dataset(tmp_path / "missing")


def test_no_tensorflow_import():
    code = ("import sys, pipeline.data.folder, pipeline.data.shapes, pipeline.data.tfdata; "
            "sys.exit('tensorflow' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
