"""tf.data pipelines for a DatasetIndex (image folder) or a TFRecordIndex.

Both datasets yield (images float32 [B, H, W, 3] with raw 0..255 RGB values, labels int32 [B]):
images are decoded with ``tf.io.decode_image(channels=3, expand_animations=False)`` and resized
bilinearly to image_size. The train set is shuffled with ``seed`` (a different but reproducible
order every epoch); the val set keeps its order.

TFRecord validation split, by record index: record i, counted from 0 across the index's files in
order, is a validation record when floor((i + 1) * val_split) > floor(i * val_split)
(``is_val_record``): every 1/val_split-th record, spread evenly through the files,
floor(count * val_split) records in all (``TFRecordIndex.val_count``).

TensorFlow is imported inside the functions only.
"""

import math

from pipeline.data.folder import DatasetIndex, TFRecordIndex, image_hw
from pipeline.errors import DeployError

_MAX_SHUFFLE_BUFFER = 10_000  # TFRecord train records held in memory for shuffling


def is_val_record(i, val_split):
    """Whether TFRecord record ``i`` (0-based, across files) is in the validation split."""
    return math.floor((i + 1) * val_split) > math.floor(i * val_split)


def make_datasets(index, image_size, batch_size, seed=0, augment=False):
    """(train_ds, val_ds), batched and prefetched; val_ds is None when there is no val data.

    ``augment`` adds a random left-right flip to the train set (reproducible from ``seed``).
    """
    import tensorflow as tf

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise DeployError(f"batch_size must be a whole number of at least 1, got {batch_size!r}")
    if isinstance(index, DatasetIndex):
        train, val = _folder_dataset(tf, index.train, seed), _folder_dataset(tf, index.val, None)
    elif isinstance(index, TFRecordIndex):
        train, val = _tfrecord_datasets(tf, index, seed)
    else:
        raise TypeError(f"make_datasets needs a DatasetIndex or a TFRecordIndex, not {type(index)}")
    size = image_hw(image_size)

    def decode(encoded, label):
        image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
        image = tf.image.resize(image, size, method="bilinear")  # float32, still 0..255
        return tf.ensure_shape(image, (*size, 3)), label

    train = train.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    if augment:
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
        train = tf.data.Dataset.zip((train, seeds)).map(
            lambda xy, s: (tf.image.stateless_random_flip_left_right(xy[0], seed=s), xy[1]),
            num_parallel_calls=tf.data.AUTOTUNE)
    train = train.batch(batch_size).prefetch(tf.data.AUTOTUNE)
    if val is not None:
        val = val.map(decode, num_parallel_calls=tf.data.AUTOTUNE).batch(batch_size)
        val = val.prefetch(tf.data.AUTOTUNE)
    return train, val


def _folder_dataset(tf, items, shuffle_seed):
    """(encoded bytes, int32 label) for (path, label) items; None when there are none."""
    if not items:
        return None
    paths, labels = zip(*items)
    ds = tf.data.Dataset.from_tensor_slices((list(paths), tf.constant(labels, tf.int32)))
    if shuffle_seed is not None:
        ds = ds.shuffle(len(items), seed=shuffle_seed, reshuffle_each_iteration=True)
    return ds.map(lambda path, label: (tf.io.read_file(path), label),
                  num_parallel_calls=tf.data.AUTOTUNE)


def _tfrecord_datasets(tf, index, seed):
    """(train, val) of (encoded bytes, int32 label), split by record index (module docstring)."""
    features = {index.image_key: tf.io.FixedLenFeature([], tf.string),
                index.label_key: tf.io.FixedLenFeature([], tf.int64)}
    fraction = float(index.val_split)

    def in_val(i, _):
        i = tf.cast(i, tf.float64)  # the same float64 arithmetic as is_val_record
        return tf.math.floor((i + 1.0) * fraction) > tf.math.floor(i * fraction)

    def parse(_, record):
        example = tf.io.parse_single_example(record, features)
        return example[index.image_key], tf.cast(example[index.label_key], tf.int32)

    records = tf.data.TFRecordDataset(index.files).enumerate()
    train = records.filter(lambda i, r: tf.logical_not(in_val(i, r)))
    train = train.shuffle(max(1, min(index.train_count, _MAX_SHUFFLE_BUFFER)), seed=seed,
                          reshuffle_each_iteration=True)
    train = train.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    if not index.val_count:
        return train, None
    return train, records.filter(in_val).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
