#!/usr/bin/env bash
# scripts/gpu_check.sh: the agent's CUDA layer and real TensorRT engines on this machine's NVIDIA GPU
# (issues 18, 27), with a summary to paste into docs/device.md ("Verified where").
#
#   scripts/gpu_check.sh                         # TensorRT pinned to the Orin target's 10.3 (targets/agx_orin.yaml)
#   GPU_CHECK_TENSORRT=newest scripts/gpu_check.sh   # PyPI's newest TensorRT (11.x today: strongly typed only)
#
# 1. No NVIDIA GPU (`nvidia-smi -L` lists none and there is no /dev/nvidia0): prints the one line
#    "no NVIDIA GPU: nothing run" and exits 0.
# 2. Where a package index answers, installs what is missing into a venv (GPU_CHECK_VENV, default
#    <repo>/.venv-gpu): deploy with its [tf] extra, pytest, cuda-python (12.x, or 13.x where the driver is
#    CUDA 13: an optional binding, tested beside the default libcudart), TensorRT pinned per target
#    (tensorrt-cu12==<the target file's tensorrt>.*; GPU_CHECK_TARGET, default agx_orin; a TensorRT of another
#    version in the venv is replaced), or with GPU_CHECK_TENSORRT=newest the newest tensorrt-cu12 and
#    onnxconverter-common (fp16 on TensorRT 11 is a model typed fp16 on the host), or GPU_CHECK_TENSORRT=<pip
#    version spec> (e.g. '==10.16.*'); and pycuda where nvcc is there to build it. Installs have their own time
#    bound (GPU_CHECK_INSTALL_S, default 1200 s: a first install downloads TensorFlow and TensorRT's GB-sized
#    libraries), outside the tests' budget. Without an index (air-gapped lab machines) or with
#    GPU_CHECK_OFFLINE=1 it installs nothing and uses GPU_CHECK_PYTHON (default python3) as it is: the CUDA
#    tests need only Python, numpy, pytest and the CUDA runtime library (libcudart).
# 3. Always runs `pytest -m cuda tests/device/test_cuda_real.py`; runs `pytest -m gpu tests/device/test_gpu.py`
#    where `import tensorrt` works. Prints the GPU, driver, Python, CUDA bindings and TensorRT, what ran,
#    what was skipped and why.
#
# Exit status: 0 every test that ran passed and at least one ran on the GPU (or: no GPU, nothing run);
# 1 a test failed or errored, or the tests' budget ran out; 2 there is a GPU but every test was
# skipped ("nothing ran on the GPU", with the reasons): the check verified nothing, which a lab
# engineer or a CI job must not read as a pass.
#
# Environment: GPU_CHECK_OUT (summary file), GPU_CHECK_OFFLINE=1, GPU_CHECK_PYTHON, GPU_CHECK_VENV,
# GPU_CHECK_TARGET (default agx_orin), GPU_CHECK_TENSORRT (target | newest | a pip version spec),
# GPU_CHECK_INSTALL_S (default 1200), GPU_CHECK_BUDGET_S (the tests' budget, default 600, counted from the end
# of the installs), GPU_CHECK_CUDA_TESTS / GPU_CHECK_GPU_TESTS (the test files),
# GPU_CHECK_DEVICE_NODE (default /dev/nvidia0; tests/device/test_gpu_check_script.py points it elsewhere).

set -u
set -o pipefail

started=$(date +%s)
stamp=$(date -u +%Y-%m-%d)
here=$(pwd)

has_gpu() {
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
        return 0
    fi
    [ -e "${GPU_CHECK_DEVICE_NODE:-/dev/nvidia0}" ]
}

if ! has_gpu; then
    echo "no NVIDIA GPU: nothing run"
    exit 0
fi

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 1
out=${GPU_CHECK_OUT:-$here/gpu_check-$stamp.txt}
budget=${GPU_CHECK_BUDGET_S:-600}
install_budget=${GPU_CHECK_INSTALL_S:-1200}
target=${GPU_CHECK_TARGET:-agx_orin}
trt_wanted=${GPU_CHECK_TENSORRT:-target}
cuda_tests=${GPU_CHECK_CUDA_TESTS:-tests/device/test_cuda_real.py}
gpu_tests=${GPU_CHECK_GPU_TESTS:-tests/device/test_gpu.py}
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
trap 'rm -rf "$work"' EXIT
notes=()

say() { echo "gpu_check: $*"; }
note() { notes+=("$*"); say "$*"; }
left() { echo $((budget - ($(date +%s) - started))); }
install_left() { echo $((install_budget - ($(date +%s) - install_started))); }
install_started=$(date +%s)

# ---------------------------------------------------------------- the machine
gpu="unknown"
driver="unknown"
driver_cuda=""
if command -v nvidia-smi >/dev/null 2>&1; then
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
    driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
    driver_cuda=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9][0-9.]*\).*/\1/p' | head -n 1)
    [ -n "$gpu" ] || gpu=$(nvidia-smi -L 2>/dev/null | head -n 1)
    [ -n "$driver" ] || driver="unknown"
else
    gpu="/dev/nvidia0 (no nvidia-smi)"
fi
say "GPU: $gpu; driver $driver${driver_cuda:+ (CUDA $driver_cuda)}"

# ---------------------------------------------------------------- the Python
index_reachable() {
    local py=$1
    command -v timeout >/dev/null 2>&1 || return 1
    timeout 25 "$py" -m pip download --no-deps --no-cache-dir --disable-pip-version-check -q \
        -d "$work/probe" pip >/dev/null 2>&1
}

newest_python() {  # deploy itself needs Python 3.10+
    local p
    for p in python3 python3.13 python3.12 python3.11 python3.10; do
        if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

pip_install() {  # pip_install WHAT... : logged, never fatal, within the install budget
    local secs
    secs=$(install_left)
    if [ "$secs" -le 10 ]; then
        note "did not install $*: the ${install_budget}s install budget is spent"
        return 1
    fi
    say "installing $* (at most ${secs}s)"
    if ! timeout "$secs" "$py" -m pip install --disable-pip-version-check -q "$@" >>"$work/pip.log" 2>&1; then
        note "could not install $* (pip's last lines: $(tail -n 2 "$work/pip.log" | tr '\n' ' '))"
        return 1
    fi
}

# the TensorRT to test: the target file's version (tensorrt: '10.3' -> tensorrt-cu12==10.3.*), newest, or a spec
trt_spec=""
trt_prefix=""
case "$trt_wanted" in
    target)
        trt_prefix=$(sed -n "s/^tensorrt: *['\"]\{0,1\}\([0-9][0-9.]*\)['\"]\{0,1\} *$/\1/p" "targets/$target.yaml" 2>/dev/null | head -n 1)
        if [ -n "$trt_prefix" ]; then
            trt_spec="==$trt_prefix.*"
        else
            note "targets/$target.yaml names no tensorrt version: TensorRT not pinned"
        fi
        ;;
    newest) ;;
    *) trt_spec=$trt_wanted ;;
esac
say "TensorRT wanted: tensorrt-cu12${trt_spec:- (newest)}${trt_prefix:+ (target $target)}"

base=${GPU_CHECK_PYTHON:-python3}
if [ "${GPU_CHECK_OFFLINE:-0}" = "1" ]; then
    py=$base
    setup="no installs (GPU_CHECK_OFFLINE=1): $py as it is"
elif ! index_reachable "$base"; then
    py=$base
    setup="no package index reachable: $py as it is"
else
    venv=${GPU_CHECK_VENV:-$repo/.venv-gpu}
    creator=$(newest_python) || creator=$base
    if [ ! -x "$venv/bin/python" ]; then
        say "creating $venv with $creator"
        "$creator" -m venv "$venv" >>"$work/pip.log" 2>&1 || note "could not create $venv with $creator"
    fi
    if [ -x "$venv/bin/python" ]; then
        py=$venv/bin/python
    else
        py=$base
    fi
    setup="installed what was missing into $(dirname "$(dirname "$py")")"
    "$py" -m pip install --disable-pip-version-check -q --upgrade pip >>"$work/pip.log" 2>&1 || true
    binding='cuda-python>=12,<13'
    case "$driver_cuda" in 1[3-9]*) binding='cuda-python>=13,<14' ;; esac
    # a module counts when it imports with a version or a file: tensorrt-stubs' bare namespace does not
    missing() { ! "$py" -c "import $1 as m; assert getattr(m, '__version__', None) or getattr(m, '__file__', None)" >/dev/null 2>&1; }
    if missing numpy || missing pytest || { missing cuda.bindings.runtime && missing cuda.cudart && missing pycuda.driver; }; then
        pip_install numpy pytest "$binding"
    fi
    if "$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
        if missing pipeline || missing tensorflow || missing onnxruntime; then
            pip_install -e "${repo}[tf]"
        fi
        if [ -n "$trt_spec" ]; then
            have=$("$py" -c 'import tensorrt; print(tensorrt.__version__)' 2>/dev/null)
            if [ -z "$have" ] || { [ -n "$trt_prefix" ] && [ "${have#"$trt_prefix".}" = "$have" ]; }; then
                pip_install "tensorrt-cu12$trt_spec"
            fi
        elif missing tensorrt; then
            pip_install tensorrt-cu12
        fi
        [ "$trt_wanted" = "newest" ] && missing onnxconverter_common && pip_install onnxconverter-common
    else
        note "$py is older than 3.10: deploy (and so pytest -m gpu) cannot be installed into it"
    fi
    if missing pycuda && command -v nvcc >/dev/null 2>&1; then
        pycuda_s=$(install_left)
        [ "$pycuda_s" -gt 240 ] && pycuda_s=240
        if [ "$pycuda_s" -gt 10 ]; then
            timeout "$pycuda_s" "$py" -m pip install --disable-pip-version-check -q pycuda >>"$work/pip.log" 2>&1 \
                || note "pycuda did not build here (optional: the CUDA layer uses libcudart through ctypes)"
        fi
    fi
fi
say "Python: $py ($setup)"
install_s=$(( $(date +%s) - install_started ))
started=$(date +%s)  # the tests' budget starts after the installs

# The CUDA libraries of the pip wheels (nvidia-*-cu12, tensorrt_libs) for Polygraphy's and the
# bindings' dlopen: they are not on the loader's path by themselves.
libs=$("$py" - <<'EOF' 2>/dev/null
import glob, os, sys
found = []
for site in sys.path:
    for pattern in ("nvidia/*/lib", "tensorrt_libs"):
        found += [d for d in glob.glob(os.path.join(site, pattern)) if os.path.isdir(d)]
print(":".join(sorted(set(found))))
EOF
)
if [ -n "$libs" ]; then
    export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

facts=$("$py" - <<'EOF' 2>/dev/null
import platform
import sys


def version(dist, module):
    try:
        from importlib.metadata import version as v
        return v(dist)
    except Exception:
        pass
    try:
        mod = __import__(module, fromlist=["_"])
        return str(getattr(mod, "__version__", None) or getattr(mod, "VERSION_TEXT", "") or "present")
    except Exception:
        return None


bindings = []
try:  # the agent's default: the CUDA runtime library through ctypes
    from pipeline.device.agent.cudart_ctypes import load
    runtime, _ = load()
    if runtime is not None:
        bindings.append("libcudart {} ({})".format(runtime.version(), runtime.path))
except Exception:
    pass
# cuda-python 12.6+ is a metapackage over cuda-bindings (which holds both modules); pycuda is itself
for dists, module in ((("cuda-bindings", "cuda-python"), "cuda.bindings.runtime"),
                      (("cuda-bindings", "cuda-python"), "cuda.cudart"), (("pycuda",), "pycuda.driver")):
    try:
        __import__(module)
    except Exception:
        continue
    found = None
    for dist in dists:
        v = version(dist, "")
        if v:
            found = "{} {}".format(dist, v)
            break
    if found is None:
        fallback = "cuda.bindings" if module.startswith("cuda.bindings") else module.split(".")[0]
        found = "{} {}".format(dists[-1], version("-", fallback) or "?")
    if found not in bindings:
        bindings.append(found)
try:
    import tensorrt
    trt = tensorrt.__version__
except AttributeError:
    trt = "none (only tensorrt-stubs' namespace: no TensorRT)"
except Exception as e:
    trt = "none (import tensorrt: {})".format(" ".join(str(e).split())[:160])
try:
    import numpy
    np_v = numpy.__version__
except Exception:
    np_v = "none"
print("python=Python {}".format(platform.python_version()))
print("binding={}".format(", ".join(bindings) or "none"))
print("tensorrt={}".format(trt))
print("numpy={}".format(np_v))
EOF
)
fact() { printf '%s\n' "$facts" | sed -n "s/^$1=//p"; }
pyver=$(fact python)
binding_found=$(fact binding)
trt=$(fact tensorrt)
[ -n "$pyver" ] || pyver="unknown ($py did not run)"
[ -n "$binding_found" ] || binding_found="none"
[ -n "$trt" ] || trt="none"
say "$pyver, numpy $(fact numpy), CUDA binding: $binding_found, TensorRT: $trt"

# ---------------------------------------------------------------- the tests
failed=0
ran_any=0
results=()
reasons=()

run_tests() {  # run_tests NAME MARKER FILE
    local name=$1 marker=$2 file=$3 log="$work/$1.log" rc secs summary
    if [ ! -f "$file" ]; then
        note "$name: $file is missing from this checkout"
        results+=("$name: not run ($file missing)")
        failed=1
        return
    fi
    secs=$(left)
    if [ "$secs" -le 10 ]; then
        note "$name: not run: the ${budget}s budget is spent"
        results+=("$name: not run (budget spent)")
        failed=1
        return
    fi
    say "running pytest -m $marker $file (at most ${secs}s)"
    timeout "$secs" "$py" -m pytest -m "$marker" "$file" -v -rsfE -p no:cacheprovider 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    summary=$(grep -E '^=+ .*(passed|failed|skipped|error|deselected|no tests ran).* in [0-9.]+s' "$log" | tail -n 1 | sed 's/^=* *//; s/ *=*$//')
    [ -n "$summary" ] || summary="no pytest summary (exit $rc)"
    while IFS= read -r line; do
        reasons+=("$name: $line")
    done < <(grep -E '^SKIPPED \[' "$log" | sed 's/^SKIPPED \[[0-9]*\] //')
    case $rc in
        0) ;;
        5) summary="$summary (no test collected)" ;;
        124) summary="$summary; stopped at the ${budget}s budget"; failed=1 ;;
        *) failed=1 ;;
    esac
    if grep -qE '[0-9]+ passed' <<<"$summary"; then
        ran_any=1
    fi
    results+=("$name: $summary")
}

run_tests cuda cuda "$cuda_tests"

export GPU_CHECK_FIGURES="$work/figures.jsonl"
: >"$GPU_CHECK_FIGURES"
if "$py" -c 'import tensorrt; assert tensorrt.__version__' >/dev/null 2>&1; then
    run_tests gpu gpu "$gpu_tests"
else
    results+=("gpu: not run (no TensorRT in $py: $trt)")
    reasons+=("gpu: $gpu_tests not run: no TensorRT in $py (pip install tensorrt-cu12 where an index is reachable)")
fi

figures=$("$py" - "$GPU_CHECK_FIGURES" <<'EOF' 2>/dev/null
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
parts = []
for r in rows:
    if r.get("check") == "accuracy":
        p50 = ", ".join("b{} {:.3f} ms".format(b, v) for b, v in sorted(r.get("p50_ms", {}).items(), key=lambda i: int(i[0])))
        parts.append("{precision}: p50 {p50}, top-1 {top1}, max diff {diff:.2g}, engine {mb:.1f} MB built in {s:.0f} s".format(
            precision=r["precision"], p50=p50, top1="n/a" if r.get("top1_agreement") is None else "{:.1%}".format(r["top1_agreement"]),
            diff=r.get("max_abs_diff") or 0.0, mb=(r.get("engine_bytes") or 0) / 1e6, s=r.get("build_s") or 0))
    elif r.get("check") == "timing":
        parts.append("{} b{}: agent GPU compute p50 {:.3f} ms vs bare execute {:.3f} ms".format(
            r["precision"], r["batch_size"], r["agent_compute_p50_ms"], r["bare_compute_p50_ms"]))
print("; ".join(parts))
EOF
)

# ---------------------------------------------------------------- verdict and summary
elapsed=$(( $(date +%s) - started ))
if [ "$failed" -ne 0 ]; then
    verdict="FAILED"
    status=1
elif [ "$ran_any" -eq 0 ]; then
    verdict="nothing ran on the GPU: every test was skipped (reasons above)"
    status=2
else
    verdict="passed"
    status=0
fi
{
    echo "gpu_check $stamp: $verdict (exit $status, tests ${elapsed}s, installs ${install_s}s)"
    echo "GPU: $gpu; driver $driver${driver_cuda:+ (CUDA $driver_cuda)}"
    echo "$pyver; CUDA binding: $binding_found; TensorRT: $trt"
    echo "setup: $setup; TensorRT wanted: tensorrt-cu12${trt_spec:- (newest)}${trt_prefix:+ (target $target)}"
    for r in "${results[@]}"; do echo "ran: $r"; done
    for r in "${reasons[@]+"${reasons[@]}"}"; do echo "skipped: $r"; done
    for n in "${notes[@]+"${notes[@]}"}"; do echo "note: $n"; done
    [ -z "$figures" ] || echo "figures: $figures"
    echo
    echo "docs/device.md, Verified where (one row):"
    echo "| $stamp | $gpu | $driver${driver_cuda:+ (CUDA $driver_cuda)} | $pyver, $binding_found | $trt | $(printf '%s; ' "${results[@]}" | sed 's/; $//') | ${figures:-none} |"
} >"$work/summary.txt"
echo
cat "$work/summary.txt"
if cp "$work/summary.txt" "$out" 2>/dev/null; then
    echo "summary written to $out"
else
    echo "could not write the summary to $out (set GPU_CHECK_OUT)"
fi
exit "$status"
