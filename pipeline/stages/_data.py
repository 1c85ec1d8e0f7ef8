"""Dataset access shared by the stages: the index, and real sample images for numeric checks."""

from pipeline.errors import DeployError


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


def sample_images(config, count, image_size):
    """Up to ``count`` real images (float32 NHWC, 0..255) from the dataset, val split first.

    Returns (images, source) where source says where they came from; random pixels (fixed seed)
    when the config has no image-folder dataset.
    """
    import numpy as np

    ds = config.dataset
    if ds is not None and ds.format == "folder":
        from pipeline.data.folder import load_images

        index = dataset_index(config, verify=False)
        paths = [p for p, _ in (index.val + index.train)][:count]
        if paths:
            return load_images(paths, image_size), "dataset ({} images)".format(len(paths))
    rng = np.random.RandomState(0)
    h, w = (image_size, image_size) if isinstance(image_size, int) else image_size
    return rng.uniform(0, 255, size=(count, h, w, 3)).astype("float32"), "random (seed 0)"
