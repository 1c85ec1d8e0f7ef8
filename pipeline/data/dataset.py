"""The config's dataset: generated before a run when missing (and the config says how),
fingerprinted for cache keys, indexed for training, sampled for numeric checks."""

import shutil
from pathlib import Path

from pipeline.errors import DeployError


def prepare_dataset(config, progress):
    """Generate the config's dataset when it is missing and ``dataset.generate`` says how.

    Several runs may share one generated dataset (the shipped configs all use data/shapes): the
    first takes a lock beside the folder and generates it; the others wait for the lock, then find
    the folder there and use it. Temporary folders a killed generation left are removed first."""
    ds = config.dataset
    if ds is None or Path(ds.path).exists() or ds.format != "folder":
        return
    if ds.generate is None:
        raise DeployError(
            "dataset.path: {} not found; point it at an image folder, or set dataset.generate: shapes "
            "to generate a small synthetic one (deploy data shapes {})".format(ds.path, ds.path)
        )
    from pipeline.data.shapes import generate_shapes
    from pipeline.lock import wait_for_lock

    path = Path(ds.path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DeployError("dataset.path: cannot create {} ({})".format(path.parent, e.strerror or e))
    with wait_for_lock(path.parent / ".{}.lock".format(path.name), progress,
                       "dataset  waiting for another run generating {}".format(path)):
        for stale in path.parent.glob(".{}.tmp-*".format(path.name)):  # a killed generation's leftovers
            shutil.rmtree(stale, ignore_errors=True)
        if path.exists():  # another run made it while we waited
            return
        progress.log("dataset  generating '{}' images at {}".format(ds.generate, ds.path))
        summary = generate_shapes(path, train_per_class=ds.train_per_class, val_per_class=ds.val_per_class, seed=ds.seed)
    progress.log("dataset  {} classes, {} train / {} val images".format(len(summary["classes"]), summary["train"], summary["val"]))


def fingerprint_dataset(config):
    import glob

    from pipeline.data.folder import fingerprint_dataset as fingerprint_folder

    ds = config.dataset
    if ds is None:
        return None
    exists = Path(ds.path).exists() if ds.format == "folder" else bool(glob.glob(ds.path))
    return fingerprint_folder(ds.path) if exists else "missing"


def dataset_index(config, verify=True):
    """The config's dataset as a DatasetIndex (image folder) or TFRecordIndex."""
    ds = config.dataset
    if ds is None:
        raise DeployError("{}: dataset: is missing; the train stage needs a dataset (dataset.path)".format(config.path))
    if ds.format == "folder":
        from pipeline.data.folder import index_image_folder

        return index_image_folder(ds.path, val_split=ds.val_split, seed=ds.seed, verify=verify)
    from pipeline.data.folder import index_tfrecords

    return index_tfrecords(ds.path, val_split=ds.val_split, num_classes=config.model.num_classes)


def image_folder(config):
    """The config's dataset as an image folder: its path when it is one (format: folder), else None (no
    dataset, or TFRecords). What the numeric checks and benchmarks sample their images from."""
    ds = config.dataset
    return ds.path if ds is not None and ds.format == "folder" else None


def dataset_samples(config, count, image_size, channels=3):
    """Up to ``count`` real images (float32 NHWC, 0..255) from the config's image-folder dataset,
    val split first; seeded random pixels when it has none, or when the model takes other than 3 channels (the
    folder's images are RGB; the config's dataset is there for every stage). Returns (images, source)."""
    from pipeline.data.samples import sample_images as samples

    folder = image_folder(config)
    if folder is not None and channels != 3:
        images, source = samples(None, count, image_size, channels=channels)
        return images, "{} (dataset.path {} not used: its images are RGB, the model takes {} channel{})".format(
            source, folder, channels, "" if channels == 1 else "s")
    return samples(folder, count, image_size, channels=channels)
