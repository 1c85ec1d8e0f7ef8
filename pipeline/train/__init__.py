"""Training: the model zoo, partial restore from checkpoints, and the distributed fit loop.

    zoo.py          build_model("mobilenet_v2", ...): architectures deploy trains from scratch
                    (no weights are downloaded); every layer is named, so graph names are stable
    checkpoints.py  read_weights(path) -> {name: array} from TF1/TF2 checkpoints, Keras files, frozen .pb
    restore.py      restore(model, path): copy what a changed network still has, with a report
    distributed.py  fit under tf.distribute (stages.train.distribute)
    fit.py          fit(model_cfg, opts, index, checkpoints=..., progress=...) -> Fit: the train stage's work

The train stage (pipeline/stages/train.py) turns the config into fit's arguments and its result into the
stage's files; it is the only stage that imports this package.
"""
