"""The board's identity: what ``deploy device probe`` prints and what the engine cache key holds.

Each fact comes from a file or command whose captured output is in tests/device/samples/identity/ (its
source in PROVENANCE.md) and is ``None`` when the machine does not have it (a workstation has no
/etc/nv_tegra_release); ``sources`` says where each came from and ``problems`` why a fact is missing, so
a half-configured board is visible.
"""

import os
import platform
import re
import shutil
import subprocess
import sys

from . import ParseError


def probe(root="/"):
    """Everything the host needs to know about this machine (``root`` lets tests use a captured tree)."""
    facts = {"python": platform.python_version(), "executable": sys.executable, "machine": platform.machine(),
             "hostname": platform.node(), "problems": [], "sources": {}}
    _identity(facts, root)
    _power(facts)
    facts["tensorrt"] = _module_version("tensorrt", facts)
    facts["onnxruntime"] = _module_version("onnxruntime", facts)
    facts["numpy"] = _module_version("numpy", facts)
    facts["uff_converter"] = has_module("uff")
    facts["cuda"] = _cuda_version(root, facts)
    _gpu(facts, root)
    facts["cuda_binding"] = cuda_binding(facts)
    # cuda-python 12.6+/13 ships ``cuda`` as a namespace package: ask the binding lookup, not find_spec("cuda")
    # (an H200 with cuda-bindings 13.3.1 said false here beside a working cuda.bindings.runtime)
    facts["cuda_python"] = facts["cuda_binding"].get("binding") is not None
    facts["cudnn"] = _cudnn_version(root, facts)
    facts["memory_mb"] = _meminfo(root)
    facts["temperatures_c"] = _temperatures(root)
    facts["tegrastats"] = shutil.which("tegrastats") is not None
    return facts


def _read(root, path):
    try:
        with open(os.path.join(root, path.lstrip("/")), "rb") as f:
            return f.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return None


def _identity(facts, root):
    from .identity import jetpack_for_l4t, parse_device_tree_model, parse_nv_tegra_release

    facts["l4t"] = facts["jetpack"] = facts["model"] = facts["board"] = None
    text = _read(root, "/etc/nv_tegra_release")
    if text is None:
        facts["problems"].append("no /etc/nv_tegra_release: not a Jetson (or a container without the host's file)")
    else:
        try:
            release = parse_nv_tegra_release(text)
        except ParseError as e:
            facts["problems"].append("/etc/nv_tegra_release: {}".format(e))
        else:
            if release.get("synthetic"):
                facts["problems"].append("/etc/nv_tegra_release is a container's synthetic file (GCID 12345678)")
            facts["l4t"] = release["l4t"]
            facts["jetpack"] = jetpack_for_l4t(release["l4t"])
            facts["sources"]["l4t"] = "/etc/nv_tegra_release"
    text = _read(root, "/proc/device-tree/model")
    if text is not None:
        try:
            model = parse_device_tree_model(text)
        except ParseError as e:
            facts["problems"].append("/proc/device-tree/model: {}".format(e))
        else:
            facts["model"] = model["model"]
            facts["board"] = model["board"]
            facts["sources"]["board"] = "/proc/device-tree/model"


def _run(argv, timeout=20):
    """(exit code, output) of a board command, or None when it is not installed. Its stdin is /dev/null: the
    agent's own stdin is the host's request pipe, which no child may read."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        res = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, str(e)
    return res.returncode, res.stdout.decode("utf-8", "replace")


def _power(facts):
    from .identity import parse_jetson_clocks_show, parse_nvpmodel_q

    facts["power_mode"] = facts["clocks_locked"] = None
    ran = _run(["nvpmodel", "-q"])
    if ran is not None:
        code, out = ran
        try:
            facts["power_mode"] = parse_nvpmodel_q(out) if code == 0 else None
        except ParseError as e:
            facts["problems"].append("nvpmodel -q: {}".format(e))
        if code != 0:
            facts["problems"].append("nvpmodel -q exited {}: {}".format(code, _first_line(out)))
    ran = _run(["jetson_clocks", "--show"])
    if ran is not None and ran[0] != 0 and shutil.which("sudo") is not None:
        # it needs root: a sudoers drop-in (docs/nightly.md: NOPASSWD for /usr/bin/jetson_clocks --show) lets
        # `sudo -n` read it; without one sudo -n fails at once, asking nothing, and the first answer stands
        again = _run(["sudo", "-n", shutil.which("jetson_clocks") or "jetson_clocks", "--show"])
        if again is not None and again[0] == 0:
            ran = again
    if ran is not None:
        code, out = ran
        if code != 0:
            facts["problems"].append("jetson_clocks --show exited {} (it needs root: run the agent with sudo, or "
                                     "allow it in sudoers): {}".format(code, _first_line(out)))
        else:
            try:
                facts["clocks_locked"] = parse_jetson_clocks_show(out)["locked"]
            except ParseError as e:
                facts["problems"].append("jetson_clocks --show: {}".format(e))


def _first_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0].strip() if lines else "(no output)"


def has_module(name):
    """Installed and importable as code: a bare namespace folder (type stubs such as tensorrt-stubs'
    ``tensorrt/__init__.pyi``) is not the library."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin not in (None, "namespace")


def _module_version(name, facts):
    if not has_module(name):
        return None
    try:
        module = __import__(name)
    except Exception as e:  # a broken install (e.g. TensorRT < 8.6 with numpy >= 1.24) is a fact to show
        facts["problems"].append("import {} failed: {}".format(name, " ".join(str(e).split())[:200]))
        return None
    return getattr(module, "__version__", None)


def _cuda_version(root, facts):
    text = _read(root, "/usr/local/cuda/version.json")
    if text is not None:
        match = re.search(r'"cuda"\s*:\s*\{[^}]*"version"\s*:\s*"([0-9.]+)"', text)
        if match:
            return match.group(1)
    text = _read(root, "/usr/local/cuda/version.txt")
    if text is not None:
        match = re.search(r"CUDA Version ([0-9.]+)", text)
        if match:
            return match.group(1)
    ran = _run(["nvcc", "--version"]) or _run(["/usr/local/cuda/bin/nvcc", "--version"])
    if ran is not None and ran[0] == 0:
        match = re.search(r"release ([0-9.]+)", ran[1])
        if match:
            return match.group(1)
    return None


def _cudnn_version(root, facts):
    for path in ("/usr/include/cudnn_version.h", "/usr/include/aarch64-linux-gnu/cudnn_version_v8.h",
                 "/usr/include/aarch64-linux-gnu/cudnn_version_v9.h", "/usr/include/cudnn.h"):
        text = _read(root, path)
        if text is None:
            continue
        parts = [re.search(r"#define CUDNN_{}\s+(\d+)".format(k), text) for k in ("MAJOR", "MINOR", "PATCHLEVEL")]
        if all(parts):
            return ".".join(p.group(1) for p in parts)
    return None


def _gpu(facts, root):
    """The NVIDIA GPU (``nvidia-smi``, else the driver's /proc/driver/nvidia files) and what kind of machine
    this is: "jetson", "desktop-gpu" (an NVIDIA GPU that is not a Jetson's: a workstation, a server) or "cpu"."""
    from .identity import machine_kind, parse_nvidia_smi_query

    gpus = []
    ran = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], timeout=15)
    if ran is not None:
        code, out = ran
        if code != 0:
            facts["problems"].append("nvidia-smi exited {}: {}".format(code, _first_line(out)))
        else:
            try:
                gpus = parse_nvidia_smi_query(out)
                facts["sources"]["gpu"] = "nvidia-smi"
            except ParseError as e:
                facts["problems"].append("nvidia-smi: {}".format(e))
    if not gpus:
        gpus = _proc_gpus(root)
        if gpus:
            facts["sources"]["gpu"] = "/proc/driver/nvidia/gpus"
    facts["gpus"] = gpus
    facts["gpu"] = gpus[0]["name"] if gpus else None
    facts["gpu_driver"] = gpus[0]["driver"] if gpus else None
    facts["kind"] = machine_kind(facts.get("l4t"), facts.get("board"), facts["gpu"])


def _proc_gpus(root):
    """[{name, driver}] from the NVIDIA kernel driver's files (present without nvidia-smi)."""
    base = os.path.join(root, "proc/driver/nvidia/gpus")
    try:
        buses = sorted(os.listdir(base))
    except OSError:
        return []
    version = _read(root, "/proc/driver/nvidia/version") or ""
    match = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]*)", version)
    gpus = []
    for bus in buses:
        info = _read(root, "/proc/driver/nvidia/gpus/{}/information".format(bus)) or ""
        model = re.search(r"^Model:\s*(\S.*)$", info, re.M)
        if model:
            gpus.append({"name": model.group(1).strip(), "driver": match.group(1) if match else None})
    return gpus


def cuda_binding(facts):
    """{binding: "libcudart" | "pycuda" | "cuda-python" | None, version, module, problem, source}: the CUDA binding the
    agent's TensorRT code would use, found without creating a CUDA context, and what to install when it
    cannot serve (none installed; cuda-python built for a newer CUDA than the machine's)."""
    try:
        from .cuda import binding_info
    except ImportError:  # an agent whose cuda.py predates binding_info
        binding_info = None
    if binding_info is not None:
        try:
            info = dict(binding_info())
            info["source"] = "cuda.binding_info"
        except Exception as e:  # a broken binding is a fact to show, not a failed probe
            info = {"binding": None, "version": None, "problem": "the CUDA binding failed to load: {}".format(
                " ".join(str(e).split())[:200])}
            info["source"] = "cuda.binding_info"
    else:
        info = _binding_on_disk()
    info.setdefault("module", None)
    cuda = facts.get("cuda")
    needs_one = facts.get("kind") in ("jetson", "desktop-gpu") or facts.get("tensorrt") is not None
    if not info.get("problem") and (needs_one or info.get("binding")):
        info["problem"] = _binding_problem(info, cuda, facts.get("executable"))
    if info.get("problem") and (needs_one or info.get("binding")):
        facts["problems"].append("CUDA binding: " + info["problem"])
    return info


def install_hint(cuda):
    """What gives the agent its CUDA calls on a machine with this CUDA version: the CUDA runtime library
    JetPack installs (the default, through ctypes), else an optional Python binding."""
    major = _major(cuda)
    library = ("the agent uses the CUDA runtime library (libcudart) that JetPack installs with CUDA "
               "(/usr/local/cuda/lib64; sudo apt install nvidia-cuda), or set DEPLOY_LIBCUDART to its path")
    if major is None:
        return library + "; optional instead: pip3 install pycuda (JetPack 4/5) or 'cuda-python<13' (CUDA 12)"
    if major <= 11:
        return library + "; optional instead: pip3 install pycuda"
    return library + "; optional instead: " + _cuda_python_pin(major)


def _cuda_python_pin(major):
    return "pip3 install 'cuda-python>={0},<{1}' (CUDA {0}.x)".format(major, major + 1)


def _binding_problem(info, cuda, executable):
    if info.get("binding") is None:
        return "no CUDA runtime for {} (TensorRT's timing and copies need one): {}".format(
            executable or "this Python", install_hint(cuda))
    have, want = _major(info.get("version")), _major(cuda)
    if info["binding"] == "cuda-python" and have is not None and want is not None and have > want:
        return ("cuda-python {} is built for CUDA {}, this machine has CUDA {}: {}".format(
            info["version"], have, cuda, _cuda_python_pin(want)))
    return None


def _major(version):
    match = re.match(r"^\s*(\d+)", str(version or ""))
    return int(match.group(1)) if match else None


def _binding_on_disk():
    """binding_info's stand-in: which binding is installed, from the files on sys.path (nothing imported)."""
    info = {"binding": None, "version": None, "module": None, "problem": None, "source": "files on sys.path"}
    if has_module("pycuda"):
        info.update(binding="pycuda", version=_dist_version(("pycuda",)), module="pycuda.driver")
        return info
    version = _dist_version(("cuda_bindings", "cuda_python"))
    for module in (("cuda", "bindings", "runtime"), ("cuda", "cudart")):
        if _module_file(module):
            info.update(binding="cuda-python", version=version, module=".".join(module))
            return info
    if version is not None or _module_file(("cuda",)):
        info["problem"] = ("cuda-python {} is installed but has neither cuda.bindings.runtime nor cuda.cudart; "
                           "reinstall it".format(version or "(version unknown)"))
    return info


def _module_file(parts):
    """Whether a module file (or package folder) ``parts`` is on sys.path, looked up without importing."""
    folder, name = parts[:-1], parts[-1]
    for entry in sys.path:
        where = os.path.join(entry or ".", *folder)
        try:
            names = os.listdir(where)
        except OSError:
            continue
        for found in names:
            if found == name or found.startswith(name + "."):
                return True
    return False


def _dist_version(names):
    """The installed version of the first of ``names`` (distribution names, '-' as '_'), from its
    .dist-info / .egg-info folder on sys.path."""
    for dist in names:
        pattern = re.compile(r"^{}-([0-9][^-]*?)\.(?:dist|egg)-info$".format(re.escape(dist)), re.I)
        for entry in sys.path:
            try:
                names_here = os.listdir(entry or ".")
            except OSError:
                continue
            for found in names_here:
                match = pattern.match(found)
                if match:
                    return match.group(1)
    return None


def _meminfo(root):
    text = _read(root, "/proc/meminfo")
    if text is None:
        return None
    values = dict(re.findall(r"^(\w+):\s+(\d+) kB", text, re.M))
    if "MemTotal" not in values:
        return None
    available = values.get("MemAvailable", values.get("MemFree"))
    return {"total": int(values["MemTotal"]) // 1024, "available": int(available) // 1024 if available else None}


def _temperatures(root):
    base = os.path.join(root, "sys/class/thermal")
    temps = {}
    try:
        zones = sorted(z for z in os.listdir(base) if z.startswith("thermal_zone"))
    except OSError:
        return temps
    for zone in zones:
        kind = _read(root, "/sys/class/thermal/{}/type".format(zone))
        value = _read(root, "/sys/class/thermal/{}/temp".format(zone))
        try:
            milli = int((value or "").strip())
        except ValueError:
            continue
        if milli <= -40000:  # absent-sensor sentinels (e.g. -256000 on some boards)
            continue
        temps[(kind or zone).strip()] = milli / 1000.0
    return temps
