"""The versions of the tools a stage uses, for its cache key and manifest (no tool is imported).

    tool_versions(("tensorflow", "tf2onnx"))  # {"python": ..., "deploy": ..., "tensorflow": "2.21.0", "tf2onnx": ...}
    tool_versions()                           # every tool deploy uses, by package name (the manifest's "tools")
"""

import functools
import platform

from pipeline import files

TOOLS = ("tensorflow-cpu", "tensorflow", "keras", "tf2onnx", "onnx", "onnxruntime", "numpy")  # in every manifest
DISTRIBUTIONS = {"tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-aarch64")}  # a stage's tool -> packages


def tool_versions(names=None):
    """Versions of the tools that shape the artifacts (package metadata, no imports): python and
    deploy always, then ``names`` (a stage's declared tools; default: every tool deploy uses).
    A stage's "tensorflow" is whichever of tensorflow, tensorflow-cpu is installed."""
    return dict(_tool_versions(None if names is None else tuple(names)))


@functools.lru_cache(maxsize=None)
def _tool_versions(names):
    installed = installed_versions()
    versions = {"python": platform.python_version(), "deploy": _deploy_version()}
    for name in TOOLS if names is None else names:
        for dist in DISTRIBUTIONS.get(name, (name,)) if names is not None else (name,):
            version = installed.get(_normal(dist))
            if version is not None:
                versions[name] = version
                break
    return tuple(sorted(versions.items()))


def installed_versions():
    """{normalized distribution name: version} of what is installed (read once per process)."""
    return files.installed_versions()


def _normal(name):
    return files.distribution_name(name)


def _deploy_version():
    from pipeline import __version__

    return __version__


def clear_cache():
    """Forget what was read (tests; a long-lived process after pip install)."""
    _tool_versions.cache_clear()
    files.installed_versions.cache_clear()
