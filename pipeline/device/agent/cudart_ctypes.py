"""The CUDA runtime library (libcudart) through ``ctypes``: the agent's default CUDA binding, because every
JetPack installs libcudart beside TensorRT, so a stock board needs no pip install (no pycuda, no
cuda-python). NVIDIA's Polygraphy drives CUDA the same way (tools/Polygraphy/polygraphy/cuda/cuda.py in
github.com/NVIDIA/TensorRT).

``load()`` returns a ``Runtime`` whose methods have the shape of cuda-python's ``cudart`` module -- each
returns ``(error, value...)`` with ``error`` 0 on success -- so ``cuda.Cuda`` drives both through one
code path. The runtime API binds the device's primary context by itself (``cudaSetDevice`` +
``cudaFree(0)``): the context TensorRT uses, whichever copy of libcudart it links.

Where libcudart is looked for, first hit wins (nothing is started; dlopen creates no CUDA context):
1. ``$DEPLOY_LIBCUDART`` (a path), when set;
2. a libcudart this process has already loaded (``/proc/self/maps``: the one TensorRT brought in);
3. the dynamic loader's names ``libcudart.so.13``, ``.12``, ``.11.0``, ``.10.2``, ``libcudart.so``
   (LD_LIBRARY_PATH, ld.so.cache: JetPack registers its CUDA folder there);
4. the folders JetPack and the CUDA toolkit use: ``/usr/local/cuda/lib64``,
   ``/usr/local/cuda[-X.Y]/targets/aarch64-linux/lib`` (JetPack 4.6: cuda-10.2; JetPack 5: cuda-11.4;
   JetPack 6: cuda-12.2 / 12.6), ``.../targets/x86_64-linux/lib``, ``/usr/local/cuda-X.Y/lib`` (CUDA 13's
   layout), and pip's ``nvidia/cuda_runtime/lib``
   (nvidia-cuda-runtime-cu12, a dependency of PyPI's TensorRT wheels).
"""

import ctypes
import glob
import os
import sys
from typing import Any, List, Optional, Tuple  # noqa: F401  (type comments: the 3.6 floor)

ENV = "DEPLOY_LIBCUDART"
SONAMES = ("libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so.10.2", "libcudart.so")
FOLDERS = ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/aarch64-linux/lib",
           "/usr/local/cuda-*/targets/aarch64-linux/lib", "/usr/local/cuda/targets/x86_64-linux/lib",
           "/usr/local/cuda-*/targets/x86_64-linux/lib", "/usr/local/cuda-*/lib64", "/usr/local/cuda/lib",
           "/usr/local/cuda-*/lib", "/usr/lib/aarch64-linux-gnu", "/usr/lib/x86_64-linux-gnu")

_void_p, _size_t, _int = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
# name: argument types (every function returns cudaError_t, an int, except cudaGetErrorString/Name)
SIGNATURES = {
    "cudaSetDevice": [_int],
    "cudaGetDeviceCount": [ctypes.POINTER(_int)],
    "cudaRuntimeGetVersion": [ctypes.POINTER(_int)],
    "cudaDriverGetVersion": [ctypes.POINTER(_int)],
    "cudaMalloc": [ctypes.POINTER(_void_p), _size_t],
    "cudaFree": [_void_p],
    "cudaMallocHost": [ctypes.POINTER(_void_p), _size_t],
    "cudaFreeHost": [_void_p],
    "cudaMemGetInfo": [ctypes.POINTER(_size_t), ctypes.POINTER(_size_t)],
    "cudaMemcpy": [_void_p, _void_p, _size_t, _int],
    "cudaMemcpyAsync": [_void_p, _void_p, _size_t, _int, _void_p],
    "cudaStreamCreate": [ctypes.POINTER(_void_p)],
    "cudaStreamDestroy": [_void_p],
    "cudaStreamSynchronize": [_void_p],
    "cudaEventCreate": [ctypes.POINTER(_void_p)],
    "cudaEventDestroy": [_void_p],
    "cudaEventRecord": [_void_p, _void_p],
    "cudaEventSynchronize": [_void_p],
    "cudaEventElapsedTime": [ctypes.POINTER(ctypes.c_float), _void_p, _void_p],
}
OPTIONAL = ("cudaDriverGetVersion",)


class MemcpyKind(object):
    """cudaMemcpyKind (driver_types.h), under cuda-python's names."""
    cudaMemcpyHostToHost = 0
    cudaMemcpyHostToDevice = 1
    cudaMemcpyDeviceToHost = 2
    cudaMemcpyDeviceToDevice = 3


def _loaded_in_process():
    # type: () -> List[str]
    """libcudart files this process has mapped already (TensorRT's own), Linux only."""
    try:
        with open("/proc/self/maps") as f:
            text = f.read()
    except (IOError, OSError):
        return []
    found = []  # type: List[str]
    for line in text.splitlines():
        path = line.split(None, 5)[-1] if len(line.split(None, 5)) == 6 else ""
        if os.path.basename(path).startswith("libcudart.so") and path not in found:
            found.append(path)
    return found


def _folders():
    # type: () -> List[str]
    folders = []  # type: List[str]
    for pattern in FOLDERS:
        folders.extend(sorted(glob.glob(pattern), reverse=True))  # newest CUDA first where several
    for entry in sys.path:  # pip: site-packages/nvidia/cuda_runtime/lib
        folders.append(os.path.join(entry or ".", "nvidia", "cuda_runtime", "lib"))
    return folders


def candidates():
    # type: () -> List[str]
    """Every name or path tried, in order (see the module docstring)."""
    found = []  # type: List[str]
    if os.environ.get(ENV):
        return [os.environ[ENV]]
    found.extend(_loaded_in_process())
    found.extend(SONAMES)
    for folder in _folders():
        for path in sorted(glob.glob(os.path.join(folder, "libcudart.so*")), reverse=True):
            if path not in found and not path.endswith((".a", ".py")):
                found.append(path)
    return found


class Runtime(object):
    """libcudart's calls with cuda-python's shape: ``cudaMalloc(n) -> (error, pointer)`` and so on."""

    cudaMemcpyKind = MemcpyKind

    def __init__(self, lib, path):
        # type: (Any, str) -> None
        self.lib = lib
        self.path = path
        self.__name__ = "libcudart (ctypes: {})".format(path)
        for name, argtypes in SIGNATURES.items():
            function = getattr(lib, name, None)
            if function is None:
                if name in OPTIONAL:
                    continue
                raise OSError("{} has no {}".format(path, name))
            function.argtypes = argtypes
            function.restype = _int
        for name in ("cudaGetErrorString", "cudaGetErrorName"):
            function = getattr(lib, name)
            function.argtypes = [_int]
            function.restype = ctypes.c_char_p

    def version(self):
        # type: () -> Optional[str]
        """The runtime's version as "major.minor" (cudaRuntimeGetVersion: 1000 * major + 10 * minor); this
        starts no context."""
        error, value = self.cudaRuntimeGetVersion()
        if error != 0:
            return None
        return "{}.{}".format(value // 1000, (value % 1000) // 10)

    # -- errors, devices --------------------------------------------------------------------------------

    def cudaGetErrorString(self, error):
        # type: (int) -> Tuple[int, bytes]
        return 0, self.lib.cudaGetErrorString(int(error)) or b""

    def cudaGetErrorName(self, error):
        # type: (int) -> Tuple[int, bytes]
        return 0, self.lib.cudaGetErrorName(int(error)) or b""

    def _int_out(self, name, *args):
        # type: (str, *Any) -> Tuple[int, int]
        value = _int(0)
        error = getattr(self.lib, name)(*(args + (ctypes.byref(value),)))
        return error, value.value

    def cudaGetDeviceCount(self):
        # type: () -> Tuple[int, int]
        return self._int_out("cudaGetDeviceCount")

    def cudaRuntimeGetVersion(self):
        # type: () -> Tuple[int, int]
        return self._int_out("cudaRuntimeGetVersion")

    def cudaDriverGetVersion(self):
        # type: () -> Tuple[int, int]
        if getattr(self.lib, "cudaDriverGetVersion", None) is None:
            return 1, 0
        return self._int_out("cudaDriverGetVersion")

    def cudaSetDevice(self, device):
        # type: (int) -> Tuple[int]
        return (self.lib.cudaSetDevice(int(device)),)

    # -- memory -------------------------------------------------------------------------------------------

    def _pointer_out(self, name, *args):
        # type: (str, *Any) -> Tuple[int, int]
        pointer = _void_p()
        error = getattr(self.lib, name)(ctypes.byref(pointer), *args)
        return error, int(pointer.value or 0)

    def cudaMalloc(self, nbytes):
        # type: (int) -> Tuple[int, int]
        return self._pointer_out("cudaMalloc", int(nbytes))

    def cudaFree(self, pointer):
        # type: (int) -> Tuple[int]
        return (self.lib.cudaFree(int(pointer) or None),)

    def cudaMallocHost(self, nbytes):
        # type: (int) -> Tuple[int, int]
        return self._pointer_out("cudaMallocHost", int(nbytes))

    def cudaFreeHost(self, pointer):
        # type: (int) -> Tuple[int]
        return (self.lib.cudaFreeHost(int(pointer) or None),)

    def cudaMemGetInfo(self):
        # type: () -> Tuple[int, int, int]
        free, total = _size_t(0), _size_t(0)
        error = self.lib.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
        return error, free.value, total.value

    def cudaMemcpy(self, dst, src, nbytes, kind):
        # type: (int, int, int, int) -> Tuple[int]
        return (self.lib.cudaMemcpy(int(dst), int(src), int(nbytes), int(kind)),)

    def cudaMemcpyAsync(self, dst, src, nbytes, kind, stream):
        # type: (int, int, int, int, int) -> Tuple[int]
        return (self.lib.cudaMemcpyAsync(int(dst), int(src), int(nbytes), int(kind), int(stream) or None),)

    # -- streams, events ----------------------------------------------------------------------------------

    def cudaStreamCreate(self):
        # type: () -> Tuple[int, int]
        return self._pointer_out("cudaStreamCreate")

    def cudaStreamDestroy(self, stream):
        # type: (int) -> Tuple[int]
        return (self.lib.cudaStreamDestroy(int(stream) or None),)

    def cudaStreamSynchronize(self, stream):
        # type: (int) -> Tuple[int]
        return (self.lib.cudaStreamSynchronize(int(stream) or None),)

    def cudaEventCreate(self):
        # type: () -> Tuple[int, int]
        return self._pointer_out("cudaEventCreate")

    def cudaEventDestroy(self, event):
        # type: (int) -> Tuple[int]
        return (self.lib.cudaEventDestroy(int(event) or None),)

    def cudaEventRecord(self, event, stream):
        # type: (int, int) -> Tuple[int]
        return (self.lib.cudaEventRecord(int(event) or None, int(stream) or None),)

    def cudaEventSynchronize(self, event):
        # type: (int) -> Tuple[int]
        return (self.lib.cudaEventSynchronize(int(event) or None),)

    def cudaEventElapsedTime(self, start, end):
        # type: (int, int) -> Tuple[int, float]
        ms = ctypes.c_float(0.0)
        error = self.lib.cudaEventElapsedTime(ctypes.byref(ms), int(start) or None, int(end) or None)
        return error, float(ms.value)


_LOADED = []  # type: List[Runtime]


def _newer_than_the_driver(runtime):
    # type: (Runtime) -> Optional[str]
    """Why this libcudart cannot start on the installed driver (a major CUDA version above the driver's:
    minor versions are compatible from CUDA 11 on), or None; a machine without a driver (0) says nothing."""
    error, driver = runtime.cudaDriverGetVersion()
    found, version = runtime.cudaRuntimeGetVersion()
    if error != 0 or found != 0 or not driver or not version or driver // 1000 >= version // 1000:
        return None
    return "{}: CUDA {} needs a newer driver than this machine's (CUDA {})".format(
        runtime.path, runtime.version(), "{}.{}".format(driver // 1000, (driver % 1000) // 10))


def load():
    # type: () -> Tuple[Optional[Runtime], Optional[str]]
    """(the Runtime, None), or (None, why not): the first libcudart of ``candidates()`` that loads and has
    every call the agent uses. Loaded once per process."""
    wanted = os.environ.get(ENV)
    if _LOADED and (not wanted or _LOADED[0].path == wanted):
        return _LOADED[0], None
    tried = []  # type: List[str]
    for name in candidates():
        try:
            runtime = Runtime(ctypes.CDLL(name), name)
        except (OSError, AttributeError) as e:
            if os.path.sep in name or os.environ.get(ENV):  # a bare soname that is absent is no news
                tried.append("{}: {}".format(name, " ".join(str(e).split())[:160]))
            continue
        too_new = _newer_than_the_driver(runtime)
        if too_new and not os.environ.get(ENV):  # another CUDA on this machine may match the driver
            tried.append(too_new)
            continue
        del _LOADED[:]
        _LOADED.append(runtime)
        return runtime, None
    if os.environ.get(ENV):
        return None, "${} = {} does not load as libcudart ({})".format(ENV, os.environ[ENV], "; ".join(tried))
    return None, ("no libcudart found (tried the loader's {} and {}{}); JetPack installs it with CUDA "
                  "(/usr/local/cuda/lib64), or set ${} to its path".format(
                      ", ".join(SONAMES), ", ".join(FOLDERS[:3]), "; " + "; ".join(tried[:3]) if tried else "", ENV))
