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
    """Up to ``count`` real images (float32 NHWC, 0..255) from the config's image-folder dataset,
    val split first; seeded random pixels when it has none. Returns (images, source)."""
    from pipeline.data.samples import sample_images as samples

    ds = config.dataset
    return samples(ds.path if ds is not None and ds.format == "folder" else None, count, image_size)
