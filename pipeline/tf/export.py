"""export_inference_graph for TF2: rebuild a Keras model for inference as a SavedModel.

The serving function calls the model with ``training=False`` (dropout off, batch norm on its
moving statistics), takes a named input with a dynamic batch and returns a named output.

TensorFlow numbers the functions it traces with a process-wide counter, so the same model
exported after other work in one process gets different function names. ``export_saved_model``
therefore runs in a fresh Python process (``python -m pipeline.tf.export``): exporting the same
model twice gives byte-identical files.
"""

import json
import subprocess
import sys

from pipeline.errors import DeployError, StageFailed


def export_saved_model(keras_path, out_dir, input_name="input", output_name="probabilities"):
    """Export ``keras_path`` (.keras/.h5) to the SavedModel directory ``out_dir``; returns its signature."""
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


def _export(keras_path, out_dir, input_name, output_name):
    from pipeline.tf import import_tf

    tf = import_tf()
    from pipeline.errors import DeployError
    from pipeline.tf.keras_model import load_keras_model

    try:
        model = load_keras_model(keras_path)
    except DeployError as e:
        print(e.message)
        return 3
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        print("{}: export supports models with one input and one output, this one has {} and {}".format(
            keras_path, len(model.inputs), len(model.outputs)))
        return 3
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
    out = serve.get_concrete_function().structured_outputs[output_name]
    print(json.dumps({
        "inputs": [{"name": input_name, "dtype": spec.dtype.name, "shape": shape}],
        "outputs": [{"name": output_name, "dtype": out.dtype.name, "shape": [None] + list(out.shape[1:])}],
    }))
    return 0


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
    sys.exit(_export(*sys.argv[1:5]))
