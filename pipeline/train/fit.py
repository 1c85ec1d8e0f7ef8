"""Fit a model on a dataset index: the train stage's work, taking values and returning a ``Fit``.

    result = fit(model_cfg, opts, index, checkpoints=Path("run/train/checkpoints"), progress=progress)
    result.model.save("model.keras"); result.epochs  # [{"loss": ..., "accuracy": ...}, ...]

``model_cfg`` is the config's ``model:`` section (a zoo model, or ``source``: the user's Keras model),
``opts`` the ``stages.train`` options, ``index`` the dataset's index (``pipeline.data.dataset.dataset_index``).
The checkpoints (one ``epoch_NNN.weights.h5`` an epoch) go into ``checkpoints``, which must not exist; the
model and the history are the caller's to write.
"""

import contextlib
from dataclasses import dataclass
from typing import Any, Optional

from pipeline.errors import DeployError
from pipeline.train.checkpoints import weights_file_exists


@dataclass
class Fit:
    """What a fit gives: the trained Keras model, one dict of metrics per epoch, the partial-restore
    report (``init_from``; else None), the number of classes and the TensorFlow version."""
    model: Any
    epochs: list
    restore: Optional[dict]
    num_classes: int
    tf_version: str


def check_init_from(init_from, where=None):
    """A DeployError when ``stages.train.init_from`` names nothing there to read weights from; ``where`` (the
    config's ``file:line``, ``Config.where``) leads the message. The one check: ``deploy validate``
    (``Config.path_problems``), the train stage and ``fit`` all call it."""
    if init_from and not weights_file_exists(init_from):
        raise DeployError("{}stages.train.init_from: {} not found; give a checkpoint (directory or prefix, e.g. "
                          "dir/model.ckpt-60), a .keras/.weights.h5/.h5 file or a frozen .pb".format(
                              where + " " if where else "", init_from))


def fit(model_cfg, opts, index, *, checkpoints, progress):
    """Build the zoo model (or load ``model_cfg.source``), restore ``opts.init_from`` into it, and fit it on
    ``index`` for ``opts.epochs``, a checkpoint an epoch into ``checkpoints``; ``progress`` (a
    ``pipeline.progress.Progress``) gets a bar over epochs, a line and an event per epoch."""
    check_init_from(opts.init_from)
    num_classes = model_cfg.num_classes or len(index.classes)
    if len(index.classes) > num_classes:
        raise DeployError("model.num_classes: {} but the dataset has {} classes".format(num_classes, len(index.classes)))

    from pipeline.tf import import_tf

    tf = import_tf()
    import keras

    from pipeline.data.tfdata import make_datasets
    from pipeline.train.distributed import fit_distributed, make_strategy

    strategy = make_strategy(tf, opts.distribute.strategy) if opts.distribute else None  # before other TF ops
    keras.utils.set_random_seed(opts.seed)
    if model_cfg.source is None:
        train_ds, val_ds = make_datasets(index, model_cfg.input_size, opts.batch_size, seed=opts.seed,
                                         augment=opts.augment)
    with strategy.scope() if strategy else contextlib.nullcontext():
        if model_cfg.source is not None:  # fine-tuning the user's own model (runner: only with init_from)
            model = _source_model(model_cfg, index)
            train_ds, val_ds = make_datasets(index, int(model.inputs[0].shape[1]), opts.batch_size, seed=opts.seed,
                                             augment=opts.augment)
        else:
            model = _zoo_model(model_cfg, num_classes)
        restore = _restore(model, opts, progress) if opts.init_from else None
        optimizers = {"adam": keras.optimizers.Adam, "sgd": keras.optimizers.SGD, "rmsprop": keras.optimizers.RMSprop}
        optimizer = optimizers[opts.optimizer](learning_rate=opts.learning_rate)
    checkpoints.mkdir()
    progress_cb = _ProgressCallback(keras, progress, opts.epochs)
    if strategy is None:
        model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                      run_eagerly=opts.run_eagerly)
        callbacks = [
            keras.callbacks.ModelCheckpoint(str(checkpoints / "epoch_{epoch:03d}.weights.h5"), save_weights_only=True),
            progress_cb,
        ]
        history = model.fit(train_ds, validation_data=val_ds, epochs=opts.epochs, callbacks=callbacks, shuffle=False,
                            verbose=0).history
    else:
        def on_epoch(epoch, logs):
            model.save_weights(str(checkpoints / "epoch_{:03d}.weights.h5".format(epoch + 1)))
            progress_cb.on_epoch_end(epoch, logs)

        progress_cb.on_train_begin()
        history = fit_distributed(tf, keras, strategy, model, optimizer, train_ds, val_ds, opts.epochs,
                                  opts.batch_size, on_epoch)
        progress_cb.on_train_end()
    epochs = [{k: round(float(v[i]), 6) for k, v in history.items()} for i in range(len(history["loss"]))]
    return Fit(model=model, epochs=epochs, restore=restore, num_classes=num_classes, tf_version=tf.__version__)


def _source_model(model_cfg, index):
    """The user's Keras model (``model.source``), checked against the dataset: enough outputs, a square input."""
    from pipeline.train.restore import source_model

    model = source_model(model_cfg.source)
    classes_out = model.outputs[0].shape[-1] if model.outputs else None
    if classes_out is not None and len(index.classes) > classes_out:
        raise DeployError("model.source: {} has {} outputs but the dataset has {} classes".format(
            model_cfg.source, classes_out, len(index.classes)))
    size = model.inputs[0].shape[1]
    if not size or model.inputs[0].shape[2] != size:
        raise DeployError("model.source: {} has input shape {}; training needs a square image input "
                          "[N, S, S, C]".format(model_cfg.source, list(model.inputs[0].shape)))
    return model


def _zoo_model(model_cfg, num_classes):
    from pipeline.train.zoo import build_model

    try:
        return build_model(model_cfg, num_classes)
    except ValueError as e:
        raise DeployError("model: cannot build {} with input_size {} and alpha {}: {}".format(
            model_cfg.zoo, model_cfg.input_size, model_cfg.alpha, str(e).splitlines()[0]))


def _restore(model, opts, progress):
    from pipeline.train.restore import restore

    try:
        return restore(model, opts.init_from, opts.exclude_scopes, opts.trainable_scopes or None,
                       opts.name_map or None, progress)
    except DeployError as e:
        raise DeployError("stages.train.init_from: " + e.message)


class _ProgressCallback:
    """A Keras callback: a progress bar over epochs and a line per epoch."""

    def __new__(cls, keras, progress, epochs):
        class Callback(keras.callbacks.Callback):
            def on_train_begin(self, logs=None):
                self.bar = progress.bar(total=epochs, desc="train", unit="epoch")

            def on_epoch_end(self, epoch, logs=None):
                logs = logs or {}
                self.bar.update(1)
                parts = ["{} {:.4f}".format(k, float(v)) for k, v in sorted(logs.items()) if k != "learning_rate"]
                progress.log("  epoch {}/{}: {}".format(epoch + 1, epochs, ", ".join(parts)))
                progress.event("epoch", stage="train", epoch=epoch + 1, **{k: float(v) for k, v in logs.items()})

            def on_train_end(self, logs=None):
                self.bar.close()

        return Callback()
