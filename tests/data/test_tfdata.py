"""tf.data pipelines and TFRecord indexing (imports TensorFlow, inside the tests only, so that
``-m 'not tf'`` collects this file without importing it)."""

import io
import math
import os

import numpy as np
import pytest
from PIL import Image

from pipeline.data.folder import index_image_folder, index_tfrecords
from pipeline.data.shapes import generate_shapes
from pipeline.data.tfdata import is_val_record, make_datasets
from pipeline.errors import DeployError

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module", autouse=True)
def tf():
    return pytest.importorskip("tensorflow")


def _png(colour, size=(10, 12)):
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, "PNG")
    return buffer.getvalue()


def _example(features):
    import tensorflow as tf

    def feature(value):
        if isinstance(value, bytes):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
        if isinstance(value, float):
            return tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(np.atleast_1d(value))))

    return tf.train.Example(features=tf.train.Features(
        feature={k: feature(v) for k, v in features.items()})).SerializeToString()


def _write(path, records):
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return str(path)


def _records(labels, image_key="image/encoded", label_key="image/class/label"):
    return [_example({image_key: _png((40 * y, 10, 10)), label_key: y}) for y in labels]


@pytest.fixture(scope="module")
def shapes_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("data") / "shapes"
    generate_shapes(root, image_size=16, train_per_class=5, val_per_class=2)
    return index_image_folder(root)


def _labels(ds):
    return np.concatenate([y.numpy() for _, y in ds])


def test_folder_datasets(tf, shapes_index):
    train, val = make_datasets(shapes_index, 12, 8)
    images, labels = next(iter(train))
    assert images.shape == (8, 12, 12, 3) and images.dtype == tf.float32
    assert labels.dtype == tf.int32
    assert 0 <= float(tf.reduce_min(images)) and float(tf.reduce_max(images)) <= 255
    assert float(tf.reduce_max(images)) > 1  # raw 0..255 values, not normalised
    assert train.element_spec[0].shape.as_list() == [None, 12, 12, 3]
    assert sorted(_labels(train)) == sorted(y for _, y in shapes_index.train)
    assert _labels(val).tolist() == [y for _, y in shapes_index.val]  # val keeps its order
    assert [b[0].shape[0] for b in val] == [8]


def test_shuffle_is_seeded(shapes_index):
    first = _labels(make_datasets(shapes_index, 8, 4, seed=3)[0])
    assert _labels(make_datasets(shapes_index, 8, 4, seed=3)[0]).tolist() == first.tolist()
    assert _labels(make_datasets(shapes_index, 8, 4, seed=4)[0]).tolist() != first.tolist()
    assert first.tolist() != [y for _, y in shapes_index.train]


def test_augment_flips_some_images(shapes_index):
    plain = next(iter(make_datasets(shapes_index, (8, 10), 20, seed=1)[0]))[0].numpy()
    flipped = next(iter(make_datasets(shapes_index, (8, 10), 20, seed=1, augment=True)[0]))[0].numpy()
    assert flipped.shape == (20, 8, 10, 3)
    same = [np.array_equal(a, b) for a, b in zip(plain, flipped)]
    mirrored = [np.array_equal(a[:, ::-1], b) for a, b in zip(plain, flipped)]
    assert all(s or m for s, m in zip(same, mirrored))
    assert any(same) and any(mirrored)


def test_no_val_data(shapes_index):
    flat = index_image_folder(os.path.join(shapes_index.source, "train"), val_split=0)
    train, val = make_datasets(flat, 8, 4)
    assert val is None and len(_labels(train)) == 20


def test_tfrecord_index_and_datasets(tf, tmp_path):
    labels = [i % 3 for i in range(23)]
    first = _write(tmp_path / "a.tfrecord", _records(labels[:10]))
    _write(tmp_path / "b.tfrecord", _records(labels[10:]))
    index = index_tfrecords(str(tmp_path / "*.tfrecord"), val_split=0.25)
    assert index.files == [first, str(tmp_path / "b.tfrecord")]
    assert (index.count, index.num_classes, index.val_count, index.train_count) == (23, 3, 5, 18)
    assert index.classes == ["0", "1", "2"]
    train, val = make_datasets(index, 6, 4, seed=0)
    images, batch_labels = next(iter(train))
    assert images.shape == (4, 6, 6, 3)
    assert (images.dtype, batch_labels.dtype) == (tf.float32, tf.int32)
    expected_val = [y for i, y in enumerate(labels) if is_val_record(i, 0.25)]
    assert _labels(val).tolist() == expected_val and len(expected_val) == math.floor(23 * 0.25)
    assert sorted(_labels(train)) == sorted(y for i, y in enumerate(labels) if not is_val_record(i, 0.25))
    pixel = next(iter(val))[0][0, 0, 0].numpy()
    np.testing.assert_allclose(pixel, [40 * expected_val[0], 10, 10])

    assert index_tfrecords(tmp_path, val_split=0).val_count == 0  # a folder of TFRecord files
    assert make_datasets(index_tfrecords([first], val_split=0), 6, 4)[1] is None


def test_tfrecord_custom_keys(tmp_path):
    path = _write(tmp_path / "r.tfrecord", _records([0, 1, 1, 0], "img", "cls"))
    index = index_tfrecords(path, val_split=0.5, image_key="img", label_key="cls", num_classes=5)
    assert (index.num_classes, index.val_count) == (5, 2)
    train, val = make_datasets(index, 4, 8)
    assert _labels(val).tolist() == [1, 0] and sorted(_labels(train)) == [0, 1]


def test_tfrecord_no_files(tmp_path):
    with pytest.raises(DeployError, match=r"no TFRecord files match .*\*.tfrecord; "
                                          r"check the path or glob pattern$"):
        index_tfrecords(str(tmp_path / "*.tfrecord"))


def test_tfrecord_corrupt(tmp_path):
    good = open(_write(tmp_path / "good.tfrecord", _records([0, 1, 0])), "rb").read()
    (tmp_path / "cut.tfrecord").write_bytes(good[:-7])
    with pytest.raises(DeployError, match=r"TFRecord file .*cut.tfrecord is corrupt or not a TFRecord file "
                                          r"\(.+\); re-create it or remove it from the dataset$"):
        index_tfrecords(str(tmp_path / "cut.tfrecord"))
    (tmp_path / "junk.tfrecord").write_bytes(b"this is not a TFRecord file at all" * 3)
    with pytest.raises(DeployError, match=r"file .*junk.tfrecord is corrupt or not a TFRecord file"):
        index_tfrecords([tmp_path / "good.tfrecord", tmp_path / "junk.tfrecord"])


def test_tfrecord_missing_key(tmp_path):
    path = _write(tmp_path / "r.tfrecord", _records([0, 1], label_key="label"))
    with pytest.raises(DeployError, match=r"TFRecord file .*r.tfrecord record 0 has no feature "
                                          r"'image/class/label' \(it has: image/encoded, label\); "
                                          r"set label_key to the feature that holds the label$"):
        index_tfrecords(path)
    with pytest.raises(DeployError, match=r"has no feature 'pixels' \(it has: image/encoded, label\); "
                                          r"set image_key to the feature that holds the image$"):
        index_tfrecords(path, image_key="pixels", label_key="label")


def _label(value):
    return lambda: [_example({"image/encoded": _png(0), "image/class/label": value})]


@pytest.mark.parametrize("records, message", [
    (_label(0.5), r"record 0: feature 'image/class/label' must hold one int64 value; "
                  r"set label_key to the right feature$"),
    (_label([0, 1]), r"record 0: feature 'image/class/label' must hold one int64 value"),
    (_label(-1), r"record 0 has label -1; labels must be 0 or more: fix the labels$"),
    (lambda: _records([0, 1]) + [_example({"image/encoded": b"garbage", "image/class/label": 1})],
     r"record 2 'image/encoded' is not a readable image \(not an image, or an unknown format\); "
     r"re-create it$"),
    (lambda: [b"\x01\x02 not a proto"], r"record 0 is not a tf.train.Example; re-create the file$"),
    (lambda: _records([1, 1, 1]), r"TFRecord files .* have only 1 class \(label 1\); a classifier "
                                  r"needs at least 2 classes: check label_key and the labels$"),
    (lambda: [], r"TFRecord files .* hold no records; check the path$"),
], ids=["float-label", "two-labels", "negative-label", "bad-image", "not-example", "one-class", "empty"])
def test_tfrecord_bad_records(tmp_path, records, message):
    path = _write(tmp_path / "r.tfrecord", records())
    with pytest.raises(DeployError, match=message):
        index_tfrecords(path)


def test_tfrecord_label_above_num_classes(tmp_path):
    path = _write(tmp_path / "r.tfrecord", _records([0, 1, 3]))
    with pytest.raises(DeployError, match=r"record 2 has label 3; labels must be 0 to 2 \(num_classes\)"):
        index_tfrecords(path, num_classes=3)


@pytest.mark.parametrize("val_split", [0.1, 0.2, 0.25, 1 / 3, 0.5, 0.7])
def test_is_val_record_matches_the_tf_filter(tmp_path, val_split):
    labels = [i % 2 for i in range(31)]
    path = _write(tmp_path / "r.tfrecord", _records(labels))
    index = index_tfrecords(path, val_split=val_split, verify=False)
    val = make_datasets(index, 4, 64)[1]
    expected = [y for i, y in enumerate(labels) if is_val_record(i, val_split)]
    assert len(expected) == index.val_count == math.floor(31 * val_split)
    assert _labels(val).tolist() == expected
