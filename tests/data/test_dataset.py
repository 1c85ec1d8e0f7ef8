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
    monkeypatch.setattr(samples, "sample_images", lambda folder, count, size: seen.append(folder) or ([], "x"))
    dataset.dataset_samples(_config(DatasetSection(path="d", format="tfrecord")), 2, (8, 8))
    dataset.dataset_samples(_config(DatasetSection(path="d")), 2, (8, 8))
    assert seen == [None, "d"]
