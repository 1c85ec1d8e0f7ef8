"""Training under tf.distribute (``stages.train.distribute``): MirroredStrategy on one machine, or
MultiWorkerMirroredStrategy across machines (the cluster comes from TF_CONFIG, as TensorFlow
defines it). Keras 3's ``fit`` does not take distributed datasets, so this is a small custom
loop: per-replica losses averaged over the global batch, gradients all-reduced by the strategy."""

import os

from pipeline.errors import DeployError


def make_strategy(tf, kind):
    """The strategy; create it before any other TensorFlow op (collectives are set up first)."""
    if kind == "mirrored":
        return tf.distribute.MirroredStrategy()
    if not os.environ.get("TF_CONFIG"):
        raise DeployError("stages.train.distribute.strategy: multi_worker needs TF_CONFIG (the cluster and this "
                          "worker's index) in the environment of every worker")
    return tf.distribute.MultiWorkerMirroredStrategy()


def synchronize_batch_norm(keras, model):
    """Batch norm statistics over the global batch, not each worker's shard: every worker then
    updates the moving mean and variance alike (and the model is the same on every worker)."""
    from pipeline.train.zoo import all_layers

    for layer in all_layers(model):
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.synchronized = True


def fit_distributed(tf, keras, strategy, model, optimizer, train_ds, val_ds, epochs, batch_size, on_epoch):
    """Train ``epochs`` epochs; returns Keras-style history {"loss": [...], "accuracy": [...], ...}."""
    synchronize_batch_norm(keras, model)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    train = strategy.experimental_distribute_dataset(train_ds.with_options(options))
    with strategy.scope():
        per_example = keras.losses.SparseCategoricalCrossentropy(reduction=None)
    global_batch = batch_size * strategy.num_replicas_in_sync

    def sums(x, y, training):
        probs = model(x, training=training)
        loss = per_example(y, probs)
        correct = tf.cast(tf.equal(tf.argmax(probs, axis=-1, output_type=tf.int32), tf.cast(y, tf.int32)), tf.float32)
        return loss, tf.reduce_sum(correct), tf.cast(tf.shape(y)[0], tf.float32)

    @tf.function
    def train_step(x, y):
        def replica(x, y):
            with tf.GradientTape() as tape:
                loss, correct, count = sums(x, y, True)
                scaled = tf.nn.compute_average_loss(loss, global_batch_size=global_batch)
            grads = tape.gradient(scaled, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return tf.reduce_sum(loss), correct, count

        results = strategy.run(replica, args=(x, y))
        return [strategy.reduce(tf.distribute.ReduceOp.SUM, r, axis=None) for r in results]

    @tf.function
    def eval_step(x, y):
        loss, correct, count = sums(x, y, False)
        return tf.reduce_sum(loss), correct, count

    history = {}
    for epoch in range(epochs):
        totals = [0.0, 0.0, 0.0]
        for x, y in train:
            totals = [t + float(v) for t, v in zip(totals, train_step(x, y))]
        logs = {"loss": totals[0] / totals[2], "accuracy": totals[1] / totals[2]}
        if val_ds is not None:
            totals = [0.0, 0.0, 0.0]
            for x, y in val_ds:
                totals = [t + float(v) for t, v in zip(totals, eval_step(x, y))]
            logs.update(val_loss=totals[0] / totals[2], val_accuracy=totals[1] / totals[2])
        for key, value in logs.items():
            history.setdefault(key, []).append(value)
        on_epoch(epoch, logs)
    return history
