"""A stand-in CUDA runtime library, compiled by the tests with the system's C compiler: the symbols and C
signatures of libcudart that the agent's ctypes binding (pipeline/device/agent/cudart_ctypes.py) loads,
with the runtime's semantics backed by the host (CUDA Runtime API reference, "Memory Management",
"Stream Management", "Event Management"):

- device memory is host ``malloc`` memory, known to the library: a copy whose device side is not a live
  allocation, or whose direction contradicts ``cudaMemcpyKind``, fails with cudaErrorInvalidValue (1), as
  the runtime does for an unknown pointer; freeing an unknown pointer likewise;
- copies are ``memcpy`` (so values travel both ways); every async copy records whether its host side
  came from ``cudaMallocHost`` (page-locked);
- streams and events are handles the library made; a destroyed or unknown one is
  cudaErrorInvalidResourceHandle (400); an event records ``CLOCK_MONOTONIC`` when recorded (copies are
  synchronous here, so that is when the work before it finished), ``cudaEventElapsedTime`` gives the
  milliseconds between two recorded events and cudaErrorNotReady (600) for one never recorded;
- ``cudaSetDevice(n)`` refuses n >= the device count (cudaErrorInvalidDevice, 101); the count is 1, or
  ``$STANDIN_CUDART_DEVICES``; ``$STANDIN_CUDART_FAIL=nodevice`` makes every call that starts the runtime
  answer cudaErrorNoDevice (100), as on a board whose user is not in the video group;
- ``cudaMemGetInfo`` says 1 GiB total minus what is allocated;
- ``cudaRuntimeGetVersion`` says the version it was built with (``build(..., version=10020)``: CUDA 10.2,
  JetPack 4.6); ``cudaDriverGetVersion`` 10020, or ``$STANDIN_CUDART_DRIVER``.

A few ``standin_*`` functions let a test read the library's state (live allocations, pinned copies, whether
the primary context was bound) through ctypes.
"""

import shutil
import subprocess
from pathlib import Path

SOURCE = r"""
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int cudaError_t;
enum { OK = 0, INVALID_VALUE = 1, MEMORY_ALLOCATION = 2, INVALID_DEVICE = 101, NO_DEVICE = 100,
       INVALID_HANDLE = 400, NOT_READY = 600 };

#define MAX_ITEMS 4096
static void *device_mem[MAX_ITEMS]; static size_t device_size[MAX_ITEMS];
static void *host_mem[MAX_ITEMS]; static size_t host_size[MAX_ITEMS];
typedef struct { int magic; int recorded; double ms; } event_t;
typedef struct { int magic; } stream_t;
static void *streams[MAX_ITEMS]; static void *events[MAX_ITEMS];
static int bound = 0, current_device = -1, copies = 0, pinned_copies = 0, async_copies = 0;

static int failing(void) { const char *f = getenv("STANDIN_CUDART_FAIL"); return f && strcmp(f, "nodevice") == 0; }
static int device_count(void) { const char *n = getenv("STANDIN_CUDART_DEVICES"); return n ? atoi(n) : 1; }
static double now_ms(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }

static int find(void **table, void *p) { for (int i = 0; i < MAX_ITEMS; i++) if (table[i] == p && p) return i; return -1; }
static int put(void **table, void *p) { for (int i = 0; i < MAX_ITEMS; i++) if (!table[i]) { table[i] = p; return i; } return -1; }
static int in_table(void **table, size_t *sizes, const void *p, size_t n) {
    for (int i = 0; i < MAX_ITEMS; i++)
        if (table[i] && (const char *)p >= (char *)table[i] && (const char *)p + n <= (char *)table[i] + sizes[i]) return 1;
    return 0;
}
static cudaError_t start(void) { if (failing()) return NO_DEVICE; if (current_device < 0) current_device = 0; bound = 1; return OK; }

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) { case OK: return "no error"; case INVALID_VALUE: return "invalid argument";
    case MEMORY_ALLOCATION: return "out of memory"; case NO_DEVICE: return "no CUDA-capable device is detected";
    case INVALID_DEVICE: return "invalid device ordinal"; case INVALID_HANDLE: return "invalid resource handle";
    case NOT_READY: return "device not ready"; default: return "unknown error"; }
}
const char *cudaGetErrorName(cudaError_t e) {
    switch (e) { case OK: return "cudaSuccess"; case INVALID_VALUE: return "cudaErrorInvalidValue";
    case MEMORY_ALLOCATION: return "cudaErrorMemoryAllocation"; case NO_DEVICE: return "cudaErrorNoDevice";
    case INVALID_DEVICE: return "cudaErrorInvalidDevice"; case INVALID_HANDLE: return "cudaErrorInvalidResourceHandle";
    case NOT_READY: return "cudaErrorNotReady"; default: return "cudaErrorUnknown"; }
}
cudaError_t cudaGetDeviceCount(int *n) { if (failing()) { *n = 0; return NO_DEVICE; } *n = device_count(); return OK; }
cudaError_t cudaRuntimeGetVersion(int *v) { *v = RUNTIME_VERSION; return OK; }
cudaError_t cudaDriverGetVersion(int *v) { const char *e = getenv("STANDIN_CUDART_DRIVER"); *v = failing() ? 0 : e ? atoi(e) : 10020; return OK; }
cudaError_t cudaSetDevice(int d) { if (failing()) return NO_DEVICE; if (d < 0 || d >= device_count()) return INVALID_DEVICE; current_device = d; return OK; }

cudaError_t cudaMalloc(void **p, size_t n) {
    cudaError_t e = start(); if (e) return e;
    if (n > ((size_t)1 << 30)) return MEMORY_ALLOCATION;
    *p = malloc(n ? n : 1); int i = put(device_mem, *p); device_size[i] = n ? n : 1; return OK;
}
cudaError_t cudaFree(void *p) {
    cudaError_t e = start(); if (e) return e;
    if (!p) return OK;  /* cudaFree(0): binds the primary context */
    int i = find(device_mem, p); if (i < 0) return INVALID_VALUE;
    free(p); device_mem[i] = NULL; device_size[i] = 0; return OK;
}
cudaError_t cudaMallocHost(void **p, size_t n) {
    cudaError_t e = start(); if (e) return e;
    *p = malloc(n ? n : 1); int i = put(host_mem, *p); host_size[i] = n ? n : 1; return OK;
}
cudaError_t cudaFreeHost(void *p) {
    int i = find(host_mem, p); if (i < 0) return INVALID_VALUE;
    free(p); host_mem[i] = NULL; host_size[i] = 0; return OK;
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    cudaError_t e = start(); if (e) return e;
    size_t used = 0; for (int i = 0; i < MAX_ITEMS; i++) used += device_size[i];
    *total = (size_t)1 << 30; *free_bytes = *total - used; return OK;
}
static cudaError_t copy(void *dst, const void *src, size_t n, int kind) {
    cudaError_t e = start(); if (e) return e;
    if (kind == 1) { if (!in_table(device_mem, device_size, dst, n)) return INVALID_VALUE;
                     if (in_table(host_mem, host_size, src, n)) pinned_copies++; }
    else if (kind == 2) { if (!in_table(device_mem, device_size, src, n)) return INVALID_VALUE;
                          if (in_table(host_mem, host_size, dst, n)) pinned_copies++; }
    else if (kind != 0 && kind != 3 && kind != 4) return INVALID_VALUE;
    memcpy(dst, src, n); copies++; return OK;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, int kind) { return copy(dst, src, n, kind); }
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream) {
    if (stream && find(streams, stream) < 0) return INVALID_HANDLE;
    async_copies++; return copy(dst, src, n, kind);
}
cudaError_t cudaStreamCreate(void **s) { cudaError_t e = start(); if (e) return e; *s = calloc(1, sizeof(stream_t)); put(streams, *s); return OK; }
cudaError_t cudaStreamDestroy(void *s) { int i = find(streams, s); if (i < 0) return INVALID_HANDLE; free(s); streams[i] = NULL; return OK; }
cudaError_t cudaStreamSynchronize(void *s) { if (s && find(streams, s) < 0) return INVALID_HANDLE; return OK; }
cudaError_t cudaEventCreate(void **ev) { cudaError_t e = start(); if (e) return e; *ev = calloc(1, sizeof(event_t)); put(events, *ev); return OK; }
cudaError_t cudaEventDestroy(void *ev) { int i = find(events, ev); if (i < 0) return INVALID_HANDLE; free(ev); events[i] = NULL; return OK; }
cudaError_t cudaEventRecord(void *ev, void *s) {
    if (find(events, ev) < 0 || (s && find(streams, s) < 0)) return INVALID_HANDLE;
    ((event_t *)ev)->recorded = 1; ((event_t *)ev)->ms = now_ms(); return OK;
}
cudaError_t cudaEventSynchronize(void *ev) { return find(events, ev) < 0 ? INVALID_HANDLE : OK; }
cudaError_t cudaEventElapsedTime(float *ms, void *a, void *b) {
    if (find(events, a) < 0 || find(events, b) < 0) return INVALID_HANDLE;
    if (!((event_t *)a)->recorded || !((event_t *)b)->recorded) return NOT_READY;
    *ms = (float)(((event_t *)b)->ms - ((event_t *)a)->ms); return OK;
}

int standin_live_device(void) { int n = 0; for (int i = 0; i < MAX_ITEMS; i++) n += device_mem[i] != NULL; return n; }
int standin_live_host(void) { int n = 0; for (int i = 0; i < MAX_ITEMS; i++) n += host_mem[i] != NULL; return n; }
int standin_live_streams(void) { int n = 0; for (int i = 0; i < MAX_ITEMS; i++) n += streams[i] != NULL; return n; }
int standin_live_events(void) { int n = 0; for (int i = 0; i < MAX_ITEMS; i++) n += events[i] != NULL; return n; }
int standin_bound(void) { return bound; }
int standin_pinned_copies(void) { return pinned_copies; }
int standin_async_copies(void) { return async_copies; }
int standin_is_device(void *p) { return find(device_mem, p) >= 0; }
"""


def compiler():
    return shutil.which("gcc") or shutil.which("cc")


def build(folder, soname="libcudart.so.10.2", version=10020):
    """Compile the stand-in into ``folder/soname`` (its runtime version ``version``, 1000 x major + 10 x minor)
    and return its path (the C compiler must exist)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "standin_cudart.c"
    source.write_text(SOURCE)
    out = folder / soname
    subprocess.run([compiler(), "-std=c99", "-D_POSIX_C_SOURCE=199309L", "-DRUNTIME_VERSION={}".format(int(version)),
                    "-shared", "-fPIC", "-O1", "-o", str(out), str(source)], check=True, capture_output=True, text=True)
    return out
