"""pipeline/data/dataset.py: the config's dataset as an image folder, the one rule the rewrite stage and the
numeric samples share. No TF."""

import types

import pytest

from pipeline.config.schema import DatasetSection
from pipeline.data import dataset


def _config(ds):
    return types.SimpleNamespace(dataset=ds)


@pytest.mark.parametrize("ds, expected", [
    (DatasetSection(path="data/shapes"), "data/shapes"),
    (DatasetSection(path="data/shapes", format="folder"), "data/shapes"),
    (DatasetSection(path="data/train-*.tfrecord", format="tfrecord"), None),
    (None, None),
])
def test_image_folder_is_the_path_of_a_folder_dataset_only(ds, expected):
    assert dataset.image_folder(_config(ds)) == expected


def test_dataset_samples_reads_the_image_folder(monkeypatch):
    """dataset_samples hands sample_images what image_folder says: None (random pixels) for TFRecords."""
    import pipeline.data.samples as samples

    seen = []
    monkeypatch.setattr(samples, "sample_images", lambda folder, count, size, channels=3: seen.append(folder) or ([], "x"))
    dataset.dataset_samples(_config(DatasetSection(path="d", format="tfrecord")), 2, (8, 8))
    dataset.dataset_samples(_config(DatasetSection(path="d")), 2, (8, 8))
    assert seen == [None, "d"]


def test_a_model_of_other_than_3_channels_gets_random_pixels_not_the_config_s_rgb_folder():
    """deploy run's convert stage on a 1-channel model (a TF1 MNIST-style graph): the config's dataset (base.yaml's
    shapes, there for every stage) is RGB; the samples were RGB and TensorFlow raised 'Cannot feed value of shape
    (16, 28, 28, 3)' as a traceback. Now: random pixels of the model's channels, and the source says why."""
    images, source = dataset.dataset_samples(_config(DatasetSection(path="data/shapes")), 4, (28, 28), channels=1)
    assert images.shape == (4, 28, 28, 1)
    assert source == ("random pixels, seed 0 (dataset.path data/shapes not used: its images are RGB, the model takes 1 "
                      "channel)")
    images, _ = dataset.dataset_samples(_config(None), 2, (8, 8), channels=4)
    assert images.shape == (2, 8, 8, 4)
