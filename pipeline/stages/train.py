"""train: build a zoo model (or start from ``init_from``) and fit it on the dataset."""

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
    from pipeline.data.dataset import dataset_index
    from pipeline.train.fit import check_init_from, fit

    check_init_from(ctx.options.init_from, ctx.config.where("stages", "train", "init_from"))  # before the dataset
    index = dataset_index(ctx.config)
    result = fit(ctx.config.model, ctx.options, index, checkpoints=ctx.output("checkpoints"), progress=ctx.progress)
    result.model.save(str(ctx.output("keras_model")))
    from pipeline import records

    records.write(ctx.output("history"), {"classes": list(index.classes), "epochs": result.epochs,
                                          "restore": result.restore}, "history")  # schema deploy.history/1
    last = result.epochs[-1]
    summary = "acc {:.3f}".format(last["accuracy"])
    if "val_accuracy" in last:
        summary += ", val_acc {:.3f}".format(last["val_accuracy"])
    return {
        "summary": summary,
        "classes": list(index.classes),
        "num_classes": result.num_classes,
        "train_images": _count(index, "train"),
        "val_images": _count(index, "val"),
        "final": last,
        "restore": result.restore,
        "tf_version": result.tf_version,
    }


def _count(index, split):
    if hasattr(index, "train_count"):
        return index.train_count if split == "train" else index.val_count
    return len(getattr(index, split))
