"""TensorRT plugins per TensorRT version (data: targets/ops/trt_plugins.yaml)."""

from pipeline.targets.files import data_file


def _table():
    return data_file("trt_plugins.yaml").get("versions", {})


def _version_key(versions, trt):
    """The table key for a TensorRT version: "8.2.1" -> "8.2", "10.3" -> "10.3" or "10"."""
    if not trt:
        return None
    parts = str(trt).split(".")
    for n in (len(parts), 2, 1):
        key = ".".join(parts[:n])
        if key in versions:
            return key
    return None


def plugins_for(trt_version):
    """{plugin name: [plugin versions]} shipped with that TensorRT; {} when unknown."""
    versions = _table()
    key = _version_key(versions, trt_version)
    return dict(versions.get(key) or {}) if key else {}


def known_plugin_names():
    return frozenset(name for plugins in _table().values() for name in (plugins or {}))
