"""Which CUDA binding this Python has, its version and what is wrong with it, without starting CUDA:
the CUDA runtime library itself through ctypes (``libcudart``, ``cudart_ctypes``: the default, on every
JetPack with nothing to install), else the optional pycuda (JetPack 4/5) or NVIDIA's cuda-python, 12.x as
``cuda.cudart`` and 13.x as ``cuda.bindings.runtime`` (13.0 removed the ``cuda.cudart`` trampoline).
``binding_info()`` is what the probe reports; ``choose()`` is what ``cuda.Cuda`` loads.
"""

import os
import sys
from typing import Any, Dict, List, Optional, Tuple  # noqa: F401  (type comments: the 3.6 floor)

FIX_CUDA_PYTHON = "pip3 install 'cuda-python<13'"
BINDINGS = ("libcudart", "pycuda", "cuda-python")  # the order choose() tries them in


class CudaError(Exception):
    pass


def _dist_version(names):
    # type: (Tuple[str, ...]) -> Optional[str]
    """An installed distribution's version without importing it: importlib.metadata (3.8+), else the
    *.dist-info / *.egg-info folder names on sys.path (3.6)."""
    try:
        from importlib import metadata  # type: ignore  # novermin  (3.8+; the folder scan below on 3.6)
    except ImportError:
        metadata = None  # type: ignore
    for name in names:
        if metadata is not None:
            try:
                return metadata.version(name)
            except Exception:
                pass
        wanted = name.replace("-", "_").lower()
        for folder in sys.path:
            try:
                entries = os.listdir(folder or ".")
            except OSError:
                continue
            for entry in entries:
                for suffix in (".dist-info", ".egg-info"):
                    if entry.endswith(suffix):
                        stem = entry[:-len(suffix)]
                        dist, _, version = stem.partition("-")
                        if dist.replace("-", "_").lower() == wanted and version:
                            return version.split("-")[0]
    return None


def _cuda_python_version():
    # type: () -> Optional[str]
    version = _dist_version(("cuda-python", "cuda-bindings"))
    if version:
        return version
    for name in ("cuda.bindings", "cuda"):
        module = sys.modules.get(name)
        value = getattr(module, "__version__", None) if module is not None else None
        if value:
            return str(value)
    return None


def _pycuda_version(driver=None):
    # type: (Any) -> Optional[str]
    version = _dist_version(("pycuda",))
    if version:
        return version
    package = sys.modules.get("pycuda")
    text = getattr(package, "VERSION_TEXT", None) or getattr(package, "__version__", None)
    return str(text) if text else None


def _load_pycuda():
    # type: () -> Tuple[Any, Optional[str]]
    """(pycuda.driver or None, problem or None). None, None: pycuda is not installed."""
    try:
        import pycuda.driver as driver
    except ImportError as e:
        if getattr(e, "name", None) == "pycuda":
            return None, None
        return None, "pycuda is installed but does not load ({}): is the CUDA driver (libcuda) there?".format(e)
    except Exception as e:  # a broken build raises what it likes
        return None, "pycuda is installed but does not load: {}: {}".format(type(e).__name__, e)
    return driver, None


def _load_cudart():
    # type: () -> Tuple[Any, Optional[str]]
    """(the runtime module or None, problem or None). None, None: cuda-python is not installed.
    13.x: cuda.bindings.runtime only (the cuda.cudart trampoline was removed); 12.x: cuda.cudart (and from
    12.6 cuda.bindings.runtime too)."""
    try:
        import cuda  # noqa: F401
    except ImportError:
        return None, None
    errors = []  # type: List[str]
    try:
        from cuda.bindings import runtime as cudart
        return cudart, None
    except ImportError as e:
        errors.append("cuda.bindings.runtime: {}".format(e))
    except Exception as e:
        errors.append("cuda.bindings.runtime: {}: {}".format(type(e).__name__, e))
    try:
        from cuda import cudart  # type: ignore
        return cudart, None
    except ImportError as e:
        errors.append("cuda.cudart: {}".format(e))
    except Exception as e:
        errors.append("cuda.cudart: {}: {}".format(type(e).__name__, e))
    version = _cuda_python_version()
    return None, ("cuda-python {} is installed but neither cuda.cudart (12.x) nor cuda.bindings.runtime (13.x) "
                  "imports ({}); on JetPack 6 / CUDA 12: {}".format(version or "(version unknown)", "; ".join(errors),
                                                                     FIX_CUDA_PYTHON))


def choose(binding=None):
    # type: (Optional[str]) -> Tuple[Optional[str], Any, Optional[str], Optional[str]]
    """(binding, module, version, problem): libcudart through ctypes first (what JetPack ships), then the
    optional pycuda and cuda-python; nothing is started. ``binding`` forces one of BINDINGS."""
    if binding is not None and binding not in BINDINGS:
        return None, None, None, "unknown CUDA binding {!r} ({})".format(binding, ", ".join(BINDINGS))
    problems = []  # type: List[str]
    if binding in (None, "libcudart"):
        from .cudart_ctypes import load

        runtime, problem = load()
        if runtime is not None:
            return "libcudart", runtime, runtime.version(), None
        if binding == "libcudart":
            return None, None, None, problem
        problems.append(problem or "no libcudart")
    if binding in (None, "pycuda"):
        driver, problem = _load_pycuda()
        if driver is not None:
            return "pycuda", driver, _pycuda_version(driver), None
        if problem:
            problems.append(problem)
    if binding in (None, "cuda-python"):
        cudart, problem = _load_cudart()
        if cudart is not None:
            return "cuda-python", cudart, _cuda_python_version(), None
        if problem:
            return None, None, _cuda_python_version(), "; ".join(problems + [problem])
    if binding is None:
        return None, None, None, ("{}; the optional pycuda and cuda-python are not installed for this Python "
                                  "({}) either".format("; ".join(problems), sys.executable))
    if problems:
        return None, None, _pycuda_version(), "; ".join(problems)
    return None, None, None, "{} is not installed for this Python ({})".format(binding, sys.executable)


def binding_info(binding=None):
    # type: (Optional[str]) -> Dict[str, Optional[str]]
    """{"binding": "libcudart" | "pycuda" | "cuda-python" | None, "version": str | None, "problem": str | None,
    "module": the module imported ("pycuda.driver", "cuda.bindings.runtime", "cuda.cudart") or the library
    loaded ("libcudart (ctypes: /usr/local/cuda/lib64/libcudart.so.10.2)") | None} -- which
    binding the agent would use (or, given ``binding``, whether that one loads), without creating a CUDA
    context."""
    binding, module, version, problem = choose(binding)
    return {"binding": binding, "version": version, "problem": problem,
            "module": getattr(module, "__name__", None)}
