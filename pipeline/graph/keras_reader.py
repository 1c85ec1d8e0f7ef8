"""Keras models (.keras / .h5) into the graph view: the one reader that needs TensorFlow.

A Lambda layer is Python code pickled into the file. Keras's safe mode refuses to load it, and so
does deploy: such a model is rebuilt from its stored model config and weights with each Lambda
replaced by an opaque stand-in that passes its (first) input through, never running the
Lambda's code. In the graph the stand-in is a ``PyFunc`` node named
``<layer>/keras_lambda_not_run`` (attribute ``token``: "keras Lambda layer <name> ..."): Python
code, which no converter translates and deploy does not run without ``--trust-model``, so the
check reports it on every route. With ``--trust-model`` (DEPLOY_TRUST_MODEL=1) the file is loaded
with ``safe_mode=False`` and the Lambda's real ops are traced.

A custom layer class (a ``module`` in the stored config that is not Keras's) lives in the user's
code, not in the file: when Keras cannot import it, the error names the class(es) and the routes
that work (the SavedModel from ``model.export()``, a frozen .pb, or ``--custom-objects FILE.py``,
which sets DEPLOY_CUSTOM_OBJECTS: the file is run and its classes given to Keras; opt-in only).
"""

import json
import re

from pipeline.errors import DeployError
from pipeline.graph.tf_reader import lazy_tensor_types, pruned_view
from pipeline.tf.keras_model import CUSTOM_OBJECTS_ENV, custom_objects


def read_keras(path):
    """Load with Keras, trace ``model(x, training=False)`` as a concrete function and freeze it
    (variables to constants, as deploy's export and freeze stages do), then view that graph.

    The view is pruned from the traced outputs and inlined like a SavedModel's.
    """
    if path.stat().st_size == 0:
        raise DeployError("{}: file is empty; expected a Keras model saved with model.save()".format(path))
    from pipeline.tf import import_tf

    try:
        tf = import_tf()
        import keras  # noqa: F401 - Keras must be installed to read the file
    except ImportError as e:
        raise DeployError("{}: reading a Keras model needs TensorFlow ({}); install deploy[tf], or pass the "
                          "exported SavedModel or frozen .pb".format(path, e))
    from pipeline.graph import proto

    from pipeline.tf.keras_model import load_keras_model

    from pipeline.tf.keras_model import keras_file_problem

    lambdas = []
    config = _stored_config(path) if keras_file_problem(path) is None else None
    given = custom_objects()
    import keras

    with keras.saving.custom_object_scope(given):
        try:
            if config is not None and _has_lambda(config):
                model, lambdas = _load_lambda_model(path, config)
            else:
                model = load_keras_model(path)
        except DeployError as e:
            missing = [c for c in custom_classes(config) if c not in given] if config is not None else []
            if missing:
                raise DeployError(_custom_message(path, missing)) from None
            raise e
    try:
        model_inputs = list(model.inputs)
    except (AttributeError, ValueError):
        model_inputs = []
    if not model_inputs:
        raise DeployError("{}: the Keras model has no defined inputs (a subclassed model that was never built); "
                          "save a functional or Sequential model".format(path))
    specs = [tf.TensorSpec(t.shape, t.dtype, name=re.sub(r"[^A-Za-z0-9_.\-/]", "_", t.name.split(":")[0]))
             for t in model_inputs]

    @tf.function
    def call(*xs):
        return model(xs[0] if len(xs) == 1 else list(xs), training=False)

    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    concrete = convert_variables_to_constants_v2(call.get_concrete_function(*specs))
    graph_def = proto.GraphDef()
    graph_def.ParseFromString(concrete.graph.as_graph_def().SerializeToString())
    if lambdas:
        _mark_lambdas(graph_def, lambdas)
    input_names = [t.name for t in concrete.inputs[:len(specs)]]
    output_names = [t.name for t in concrete.outputs]
    graph = pruned_view(graph_def, input_names, output_names, str(path), "keras")
    known = {}
    for tensor, spec in zip(concrete.inputs[:len(specs)], specs):
        known[tensor.name] = spec.dtype.name
        graph.input_shapes[tensor.name] = list(spec.shape) if spec.shape.rank is not None else None
    for name, tensor in zip(graph.outputs, concrete.outputs):
        known[name] = tensor.dtype.name
        graph.output_shapes[name] = list(tensor.shape) if tensor.shape.rank is not None else None
    lazy_tensor_types(graph, known)
    return graph


_KERAS_MODULES = ("keras", "tf_keras", "tensorflow")


def custom_classes(config):
    """Names of the custom (user-written) layer and object classes a stored Keras config uses: each
    registered entry whose ``module`` is not Keras's or TensorFlow's (None for a class defined in a
    script's __main__), by its registered name."""
    found = []

    def walk(value):
        if isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            module = value.get("module")
            if "class_name" in value and value.get("registered_name") and not (
                    isinstance(module, str) and module.split(".")[0] in _KERAS_MODULES):
                name = str(value["registered_name"])
                if name not in found:
                    found.append(name)
            for v in value.values():
                walk(v)

    walk(config)
    return found


def _custom_message(path, missing):
    return ("{}: uses custom Keras class(es) {} that deploy cannot import (they live in your code, not in the file); "
            "pass the SavedModel from model.export('DIR') or a frozen .pb instead, or --custom-objects FILE.py "
            "({}=FILE.py in the environment; a Python file defining {}: deploy runs it, as --trust-model runs Lambda "
            "code, so only for code you trust)".format(
                path, ", ".join(missing), CUSTOM_OBJECTS_ENV, "them" if len(missing) > 1 else "it"))


LAMBDA_MARK = "keras_lambda_not_run"  # the stand-in's node name (last component); its op becomes PyFunc


def _has_lambda(config):
    if isinstance(config, list):
        return any(_has_lambda(c) for c in config)
    if isinstance(config, dict):
        return config.get("class_name") == "Lambda" or any(_has_lambda(v) for v in config.values())
    return False


def _load_lambda_model(path, config):
    """(model, [Lambda layer names]): the model rebuilt from its stored config and weights, each
    Lambda an opaque stand-in (see the module doc); with --trust-model, Keras's own unsafe load
    (a Lambda of a named function also needs that function importable)."""
    import keras

    from pipeline.tf.screen import trusted

    if trusted():
        try:
            return keras.models.load_model(str(path), compile=False, safe_mode=False), []
        except Exception as e:  # keras raises many types for a bad file
            raise DeployError("{}: cannot load as a Keras model even with --trust-model ({})".format(
                path, (str(e).strip().splitlines() or [type(e).__name__])[0]))
    names = []
    config = _replace_lambdas(config, names)
    try:
        custom = {"DeployOpaqueLambda": _opaque_lambda_class()}
        if path.suffix.lower() == ".keras":
            with keras.saving.custom_object_scope(custom):
                model = keras.models.model_from_json(json.dumps(config))
        else:  # an .h5 config is the legacy format: Keras's own .h5 loader rebuilds it this way
            from keras.src.legacy.saving import saving_utils

            model = saving_utils.model_from_config(config, custom_objects=custom)
        model.load_weights(str(path))
    except Exception as e:  # keras raises many types
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise DeployError("{}: holds Keras Lambda layer(s) {} (Python code, not loaded: only with --trust-model) and "
                          "the model could not be rebuilt around them from its stored config and weights ({}); pass "
                          "--trust-model if you trust the file, or replace the Lambda layers with standard layers".format(
                              path, ", ".join(names), why if len(why) <= 200 else why[:200] + "..."))
    return model, names


def _stored_config(path):
    """The model config a .keras (config.json) or .h5 (attribute model_config) file stores, or None."""
    try:
        if path.suffix.lower() == ".keras":
            import zipfile

            with zipfile.ZipFile(str(path)) as archive:
                return json.loads(archive.read("config.json").decode("utf-8"))
        import h5py

        with h5py.File(str(path), "r") as f:
            raw = f.attrs.get("model_config")
            if raw is None:
                return None
            return json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except (OSError, KeyError, ValueError):
        return None


def _replace_lambdas(config, names):
    """The config with every Lambda layer (nested models too) an opaque stand-in of the same name;
    the Lambda's code and arguments are dropped, never deserialized."""
    if isinstance(config, list):
        return [_replace_lambdas(c, names) for c in config]
    if not isinstance(config, dict):
        return config
    if config.get("class_name") == "Lambda" and isinstance(config.get("config"), dict):
        inner = config["config"]
        names.append(str(inner.get("name")))
        shape = inner.get("output_shape")
        stand_in = {"name": inner.get("name"), "trainable": inner.get("trainable", True),
                    "lambda_output_shape": shape if isinstance(shape, (list, tuple)) and all(
                        d is None or isinstance(d, int) for d in shape) else None}
        if "dtype" in inner:
            stand_in["dtype"] = inner["dtype"]
        out = dict(config, class_name="DeployOpaqueLambda", config=stand_in)
        out.pop("module", None)
        out["registered_name"] = "DeployOpaqueLambda"
        return out
    return {k: _replace_lambdas(v, names) for k, v in config.items()}


_OPAQUE = []


def _opaque_lambda_class():
    if _OPAQUE:
        return _OPAQUE[0]
    import keras
    import tensorflow as tf

    class DeployOpaqueLambda(keras.layers.Layer):
        """Stands for a Keras Lambda layer deploy did not load: passes its first input through."""

        def __init__(self, lambda_output_shape=None, **kwargs):
            super().__init__(**kwargs)
            self.lambda_output_shape = lambda_output_shape

        def call(self, inputs, mask=None, **kwargs):
            first = inputs[0] if isinstance(inputs, (list, tuple)) else inputs
            return tf.identity(first, name=LAMBDA_MARK)

        def compute_output_shape(self, input_shape):
            if isinstance(input_shape, list):
                input_shape = input_shape[0]
            if self.lambda_output_shape is not None:
                return (input_shape[0],) + tuple(self.lambda_output_shape)
            return input_shape

        def get_config(self):
            return dict(super().get_config(), lambda_output_shape=self.lambda_output_shape)

    _OPAQUE.append(DeployOpaqueLambda)
    return DeployOpaqueLambda


def _mark_lambdas(graph_def, names):
    """The stand-ins' Identity nodes become PyFunc nodes saying which Lambda layer they stand for."""
    for node in graph_def.node:
        last = node.name.rsplit("/", 1)[-1]
        if node.op == "Identity" and re.fullmatch(re.escape(LAMBDA_MARK) + r"(_\d+)?", last):
            scope = node.name.rsplit("/", 1)[0] if "/" in node.name else ""
            layer = next((n for n in names if scope == n or scope.endswith("/" + n)), scope or "?")
            dtype = node.attr["T"].type
            node.op = "PyFunc"
            node.attr.clear()
            node.attr["token"].s = ("keras Lambda layer {}: Python code stored in the file, not loaded or run "
                                    "(Keras safe mode)".format(layer)).encode("utf-8")
            node.attr["Tin"].list.type.append(dtype)
            node.attr["Tout"].list.type.append(dtype)
