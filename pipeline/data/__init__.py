"""Datasets: a synthetic shapes generator, image-folder and TFRecord indexing, tf.data pipelines."""
