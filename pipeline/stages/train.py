"""train: build a zoo model (or start from ``init_from``) and fit it on the dataset."""

from pipeline.errors import DeployError
from pipeline.stages import stage


@stage(
    "train",
    outputs={"keras_model": "model.keras", "history": "history.json", "checkpoints": "checkpoints"},
    version=1,
    uses=("model", "dataset"),
    tools=("tensorflow", "keras", "numpy"),
    pause_gc=False,  # epochs of Python objects: the collector must run
)
def train(ctx):
    """Train the zoo model on the dataset; a checkpoint per epoch, loss and accuracy per epoch."""
    opts, model_cfg = ctx.options, ctx.config.model
    from pipeline.train.checkpoints import weights_file_exists

    if opts.init_from and not weights_file_exists(opts.init_from):
        raise DeployError("stages.train.init_from: {} not found; give an existing checkpoint (directory or prefix, "
                          "e.g. dir/model.ckpt-60), .keras, .weights.h5 or frozen .pb".format(opts.init_from))
    from pipeline.data.dataset import dataset_index

    index = dataset_index(ctx.config)
    num_classes = model_cfg.num_classes or len(index.classes)
    if len(index.classes) > num_classes:
        raise DeployError("model.num_classes: {} but the dataset has {} classes".format(num_classes, len(index.classes)))

    from pipeline.tf import import_tf

    tf = import_tf()
    import keras

    from pipeline.data.tfdata import make_datasets
    from pipeline.train.zoo import build_model

    import contextlib

    from pipeline.train.distributed import fit_distributed, make_strategy

    strategy = make_strategy(tf, opts.distribute.strategy) if opts.distribute else None  # before other TF ops
    keras.utils.set_random_seed(opts.seed)
    if model_cfg.source is None:
        train_ds, val_ds = make_datasets(index, model_cfg.input_size, opts.batch_size, seed=opts.seed,
                                         augment=opts.augment)
    with strategy.scope() if strategy else contextlib.nullcontext():
        if model_cfg.source is not None:  # fine-tuning the user's own model (runner: only with init_from)
            from pipeline.train.restore import config_model

            model = config_model(ctx.config)
            classes_out = model.outputs[0].shape[-1] if model.outputs else None
            if classes_out is not None and len(index.classes) > classes_out:
                raise DeployError("model.source: {} has {} outputs but the dataset has {} classes".format(
                    model_cfg.source, classes_out, len(index.classes)))
            size = model.inputs[0].shape[1]
            if not size or model.inputs[0].shape[2] != size:
                raise DeployError("model.source: {} has input shape {}; training needs a square image input "
                                  "[N, S, S, C]".format(model_cfg.source, list(model.inputs[0].shape)))
            train_ds, val_ds = make_datasets(index, int(size), opts.batch_size, seed=opts.seed, augment=opts.augment)
        else:
            try:
                model = build_model(model_cfg, num_classes)
            except ValueError as e:
                raise DeployError("model: cannot build {} with input_size {} and alpha {}: {}".format(
                    model_cfg.zoo, model_cfg.input_size, model_cfg.alpha, str(e).splitlines()[0]))
        restore = None
        if opts.init_from:
            from pipeline.train.restore import restore as restore_weights

            try:
                restore = restore_weights(model, opts.init_from, opts.exclude_scopes, opts.trainable_scopes or None,
                                          opts.name_map or None, ctx.progress)
            except DeployError as e:
                raise DeployError("stages.train.init_from: " + e.message)
        optimizers = {"adam": keras.optimizers.Adam, "sgd": keras.optimizers.SGD, "rmsprop": keras.optimizers.RMSprop}
        optimizer = optimizers[opts.optimizer](learning_rate=opts.learning_rate)
    ckpt_dir = ctx.output("checkpoints")
    ckpt_dir.mkdir()
    progress_cb = _ProgressCallback(keras, ctx.progress, opts.epochs)
    if strategy is None:
        model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        callbacks = [
            keras.callbacks.ModelCheckpoint(str(ckpt_dir / "epoch_{epoch:03d}.weights.h5"), save_weights_only=True),
            progress_cb,
        ]
        history = model.fit(train_ds, validation_data=val_ds, epochs=opts.epochs, callbacks=callbacks, shuffle=False,
                            verbose=0).history
    else:
        def on_epoch(epoch, logs):
            model.save_weights(str(ckpt_dir / "epoch_{:03d}.weights.h5".format(epoch + 1)))
            progress_cb.on_epoch_end(epoch, logs)

        progress_cb.on_train_begin()
        history = fit_distributed(tf, keras, strategy, model, optimizer, train_ds, val_ds, opts.epochs,
                                  opts.batch_size, on_epoch)
        progress_cb.on_train_end()
    model.save(str(ctx.output("keras_model")))

    epochs = [{k: round(float(v[i]), 6) for k, v in history.items()} for i in range(len(history["loss"]))]
    from pipeline import records

    records.write(ctx.output("history"), {"classes": list(index.classes), "epochs": epochs, "restore": restore},
                  "history")  # schema deploy.history/1 (pipeline.records)
    last = epochs[-1]
    summary = "acc {:.3f}".format(last["accuracy"])
    if "val_accuracy" in last:
        summary += ", val_acc {:.3f}".format(last["val_accuracy"])
    return {
        "summary": summary,
        "classes": list(index.classes),
        "num_classes": num_classes,
        "train_images": _count(index, "train"),
        "val_images": _count(index, "val"),
        "final": last,
        "restore": restore,
        "tf_version": tf.__version__,
    }


def _count(index, split):
    if hasattr(index, "train_count"):
        return index.train_count if split == "train" else index.val_count
    return len(getattr(index, split))


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
