"""export_inference_graph for TF2: rebuild a Keras model for inference as a SavedModel.

The serving function calls the model with ``training=False`` (dropout off, batch norm on its
moving statistics), takes a named input with a dynamic batch and returns a named output.

TensorFlow numbers the functions it traces with a process-wide counter, so the same model
exported after other work in one process gets different function names. ``export_saved_model``
therefore exports in this process only while TensorFlow has not been imported yet (its counters
are fresh: ``deploy run`` with train cached, ``--from export``), and otherwise in a fresh Python
process (``python -m pipeline.tf.export``). Either way, exporting the same model twice gives
byte-identical files (the in-process export saves a second TensorFlow import and teardown, ~7 s).
"""

import json
import os
import subprocess
import sys

from pipeline.errors import DeployError, StageFailed


def export_saved_model(keras_path, out_dir, input_name="input", output_name="probabilities"):
    """Export ``keras_path`` (.keras/.h5) to the SavedModel directory ``out_dir``; returns its signature."""
    if "tensorflow" not in sys.modules and "keras" not in sys.modules:  # fresh counters: the same bytes here
        try:
            return export(keras_path, out_dir, input_name, output_name)
        except DeployError:
            raise
        except Exception as e:  # TensorFlow's own errors, as the child's would be reported
            reason = (" ".join(str(e).split()) or type(e).__name__)[:300]
            raise StageFailed("export of {} failed: {}".format(keras_path, reason)) from None
    from pipeline.files import die_with_parent

    cmd = [sys.executable, "-m", "pipeline.tf.export", str(keras_path), str(out_dir), input_name, output_name]
    # run() kills the child when this process is interrupted (Ctrl-C, SIGTERM); die_with_parent
    # also when it is killed outright (kill -9), so no export keeps writing under the next run's lock
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          preexec_fn=die_with_parent)
    if proc.returncode == 3:
        raise DeployError(proc.stdout.strip() or "cannot load {}".format(keras_path))
    if proc.returncode != 0:
        tail = [line for line in proc.stderr.strip().splitlines() if line.strip()][-1:] or ["no output"]
        raise StageFailed("export of {} failed: {}".format(keras_path, tail[0]))
    return json.loads(proc.stdout)


def export(keras_path, out_dir, input_name, output_name):
    """The export itself, in this process: the signature ({"inputs": [...], "outputs": [...]});
    DeployError for a model it cannot export. Byte-identical only in a process with fresh counters."""
    from pipeline.tf import import_tf

    tf = import_tf()
    from pipeline.tf.keras_model import load_keras_model

    model = load_keras_model(keras_path)
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise DeployError("{}: export supports models with one input and one output, this one has {} and {}".format(
            keras_path, len(model.inputs), len(model.outputs)))
    shape = [None] + list(model.inputs[0].shape[1:])
    spec = tf.TensorSpec(shape, model.inputs[0].dtype, name=input_name)

    @tf.function(input_signature=[spec])
    def serve(x):
        return {output_name: model(x, training=False)}

    module = tf.Module()
    module.model = model
    module.serve = serve
    tf.saved_model.save(module, out_dir, signatures={"serving_default": serve})
    _clear_fingerprint_uuid(out_dir)
    dtype, out_shape = _saved_output(tf, out_dir, output_name)  # read back: no retrace (0.5-0.8 s)
    return {
        "inputs": [{"name": input_name, "dtype": spec.dtype.name, "shape": shape}],
        "outputs": [{"name": output_name, "dtype": dtype, "shape": [None] + out_shape[1:]}],
    }


def _saved_output(tf, out_dir, output_name):
    """(dtype name, dims with None for unknown) of the serving signature's output, from saved_model.pb."""
    import os

    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(out_dir, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    info = saved.meta_graphs[0].signature_def["serving_default"].outputs[output_name]
    dims = [d.size if d.size >= 0 else None for d in info.tensor_shape.dim]
    return tf.as_dtype(info.dtype).name, dims


def _main(argv):
    """The child process: the signature as JSON on stdout (exit 0), or the error (exit 3)."""
    import gc

    gc.disable()  # tracing and saving make many short-lived objects and no cycles worth the passes
    try:
        signature = export(*argv)
    except DeployError as e:
        print(e.message)
        return 3
    print(json.dumps(signature))
    sys.stdout.flush()
    os._exit(0)  # skip TensorFlow's teardown (0.6-0.8 s); everything is written and flushed


def _clear_fingerprint_uuid(out_dir):
    """fingerprint.pb carries a random UUID per save; drop it so equal models give equal files."""
    import os

    path = os.path.join(out_dir, "fingerprint.pb")
    if not os.path.exists(path):
        return
    from tensorflow.core.protobuf import fingerprint_pb2

    fp = fingerprint_pb2.FingerprintDef()
    with open(path, "rb") as f:
        fp.ParseFromString(f.read())
    if any(field.name == "uuid" for field in fp.DESCRIPTOR.fields):
        fp.ClearField("uuid")
    with open(path, "wb") as f:
        f.write(fp.SerializeToString(deterministic=True))


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:5]))
