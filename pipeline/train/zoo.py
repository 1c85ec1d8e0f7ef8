"""Keras builders for the zoo. Every layer is named, so graphs built from them have stable names.

Each model takes float32 images of raw pixel values (0..255, NHWC) and outputs class
probabilities; the scaling to [-1, 1] is inside the model, so the exported and frozen graphs
take camera pixels as they come.

``ZOO`` (the names of ``BUILDERS``) is what ``model.zoo`` may name: the config schema reads it from here,
so a new architecture is one builder and one entry in ``BUILDERS``. Keras is imported inside
``build_model`` only: the config imports this module.
"""

from pipeline.errors import DeployError


def build_model(section, num_classes):
    """Build ``section.zoo`` (a ModelSection) for ``num_classes`` classes, named "model"."""
    import keras

    size = section.input_size
    inputs = keras.Input((size, size, 3), name="input")
    x = keras.layers.Rescaling(1.0 / 127.5, offset=-1.0, name="scale")(inputs)
    x = BUILDERS[section.zoo](keras, x, section)
    x = keras.layers.Dropout(section.dropout, name="dropout")(x)
    outputs = keras.layers.Dense(num_classes, activation="softmax", name="probabilities")(x)
    model = keras.Model(inputs, outputs, name="model")
    # Keras applications default to momentum 0.999: after the few hundred steps of a short
    # fine-tune the moving statistics are still near their initial values and the model is
    # at chance in inference mode although training accuracy is fine.
    for layer in all_layers(model):
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = section.bn_momentum
    return model


def all_layers(model):
    for layer in model.layers:
        yield layer
        if hasattr(layer, "layers"):
            yield from all_layers(layer)


def _mobilenet_v2(keras, x, section):
    size = section.input_size
    if size < 32:
        raise DeployError("model.input_size: mobilenet_v2 needs at least 32 pixels, got {}".format(size))
    base = keras.applications.MobileNetV2(
        input_shape=(size, size, 3), alpha=section.alpha, include_top=False, weights=None, pooling="avg"
    )
    return base(x)


def _small_cnn(keras, x, section):
    layers = keras.layers
    for i, filters in enumerate((16, 32, 64)):
        x = layers.Conv2D(filters, 3, padding="same", use_bias=False, name="conv{}".format(i))(x)
        x = layers.BatchNormalization(name="bn{}".format(i))(x)
        x = layers.ReLU(name="relu{}".format(i))(x)
        x = layers.MaxPooling2D(2, name="pool{}".format(i))(x)
    return layers.GlobalAveragePooling2D(name="gap")(x)


# model.zoo name -> builder(keras, x, section): the features the classifier head goes on
BUILDERS = {"mobilenet_v2": _mobilenet_v2, "small_cnn": _small_cnn}
ZOO = tuple(BUILDERS)
