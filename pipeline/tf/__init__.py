"""The TensorFlow side of deploy. Importing this package is cheap; ``import_tf()`` is not."""

import os


def import_tf():
    """Import TensorFlow with its start-up chatter silenced; returns the module."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # same numbers run to run
    import absl.logging
    import tensorflow as tf

    absl.logging.set_verbosity(absl.logging.ERROR)
    tf.get_logger().setLevel("ERROR")
    return tf
