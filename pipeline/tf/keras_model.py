"""Load a Keras model file someone gave us: safe mode, and errors that say what is wrong with it.

    model = load_keras_model("model.keras")    # DeployError: "model.keras: not a .keras file: ..."

``safe_mode=True`` (Keras 3's default, stated here so no caller loses it): a Lambda layer's
pickled Python code is refused, not run. A truncated or disguised file is named for what it is
rather than Keras's "File not found" for a file that exists.
"""

import zipfile
from pathlib import Path

from pipeline.errors import DeployError

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
CUSTOM_OBJECTS_ENV = "DEPLOY_CUSTOM_OBJECTS"  # set by --custom-objects FILE.py (and inherited by child processes)


def keras_file_problem(path):
    """Why ``path`` cannot be a Keras model file, or None when it looks like one."""
    path = Path(path)
    if not path.exists():
        return "no such file"
    if path.is_dir():
        return "a directory, not a model file (a SavedModel directory is read as a SavedModel, not a .keras file)"
    try:
        with open(str(path), "rb") as handle:
            head = handle.read(8)
    except OSError as e:
        return "cannot read it ({})".format(e.strerror or e)
    if not head:
        return "the file is empty"
    if path.suffix.lower() == ".keras":
        if not zipfile.is_zipfile(str(path)):
            hint = " (it is an HDF5 file: name it .h5)" if head == HDF5_SIGNATURE else ""
            return "not a .keras file: not a zip archive, so truncated or another format{}".format(hint)
        try:
            with zipfile.ZipFile(str(path)) as archive:
                names = set(archive.namelist())
                broken = archive.testzip()
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            return "not a .keras file: a damaged zip archive ({})".format(e)
        if broken:
            return "not a .keras file: {} inside the archive is damaged".format(broken)
        if "config.json" not in names:
            return "not a .keras file: no config.json in the archive"
    elif path.suffix.lower() in (".h5", ".hdf5") and not _is_hdf5(path, head):
        return "not an HDF5 file (truncated or another format)"
    return None


def _is_hdf5(path, head):
    """HDF5's signature sits at offset 0, 512, 1024, 2048, ... (a user block may come first)."""
    if head == HDF5_SIGNATURE:
        return True
    with open(str(path), "rb") as handle:
        offset = 512
        while True:
            handle.seek(offset)
            chunk = handle.read(8)
            if len(chunk) < 8:
                return False
            if chunk == HDF5_SIGNATURE:
                return True
            offset *= 2


def load_keras_model(path):
    """The Keras model at ``path`` (compile=False; safe_mode=True unless the user passed --trust-model), with the
    user's --custom-objects in scope (``DEPLOY_CUSTOM_OBJECTS``, as deploy check reads it); DeployError for a bad
    file."""
    problem = keras_file_problem(path)
    if problem:
        raise DeployError("{}: {}; save the model again with model.save('model.keras')".format(path, problem))
    from pipeline.tf import import_tf

    import_tf()
    import keras

    from pipeline.tf.screen import trusted

    objects = custom_objects()  # {} unless opted in; its own errors are DeployErrors naming the file
    try:
        with keras.saving.custom_object_scope(objects):
            return keras.models.load_model(str(path), compile=False, safe_mode=not trusted())
    except Exception as e:  # keras raises many types for a bad file
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise DeployError("{}: cannot load as a Keras model ({}); {}".format(path, first, _load_advice(first)))


def _load_advice(message):
    """What to do when Keras refused the file: the opt-ins for a Lambda layer or a custom class, else save it again."""
    if "Lambda" in message or "safe_mode" in message:
        return "its Lambda layers run Python code stored in the file: pass --trust-model if you trust it"
    if "custom" in message.lower() or "Unknown layer" in message or "could not be deserialized" in message:
        return ("it uses layer classes deploy cannot import: pass --custom-objects FILE.py (the file that defines "
                "them)")
    return "save it again with model.save('model.keras')"


def custom_objects():
    """{name: object} from the user's --custom-objects FILE.py (``DEPLOY_CUSTOM_OBJECTS``), or {} when
    not opted in. Opting in runs the file's code, as --trust-model runs a Lambda's: only for files you
    trust. The file's ``CUSTOM_OBJECTS`` dict if it has one, else every class and function it defines,
    by name (and by "package>name" for a class registered with keras.saving.register_keras_serializable)."""
    import os

    path = os.environ.get(CUSTOM_OBJECTS_ENV)
    if not path:
        return {}
    if not os.path.isfile(path):
        raise DeployError("--custom-objects {}: no such file; pass the Python file that defines your Keras layer "
                          "classes".format(path))
    import runpy

    try:
        namespace = runpy.run_path(path, run_name="deploy_custom_objects")
    except Exception as e:  # the user's code: any error, named with its file
        raise DeployError("--custom-objects {}: running it failed ({}: {}); fix the file".format(
            path, type(e).__name__, (str(e).strip().splitlines() or [""])[0]))
    given = namespace.get("CUSTOM_OBJECTS")
    if isinstance(given, dict):
        return dict(given)
    objects = {}
    for name, value in namespace.items():
        if name.startswith("_") or getattr(value, "__module__", None) != "deploy_custom_objects":
            continue
        objects[name] = value
    import keras

    for name, value in list(objects.items()):
        try:
            registered = keras.saving.get_registered_name(value)
        except Exception:  # noqa: BLE001 - not a Keras object
            continue
        objects.setdefault(registered, value)
    return objects
