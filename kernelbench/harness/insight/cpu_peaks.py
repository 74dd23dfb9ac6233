"""This machine's CPU ceilings, measured once per CPU model and thread count and cached.

`python3 -m kernelbench.harness.insight.cpu_peaks [--threads N] [--remeasure]` prints (or redoes) the measurement.

Method (docs/harness.md, "Speed of light"): a small C file, compiled here with `cc -O2 -march=native -fopenmp`
and called through ctypes (the compiler the C++ candidates need is on every machine that runs them):
- Bandwidth at working sets of 16 KiB x 4^k up to 256 MiB: four STREAM-style kernels on the widest native vectors
  (read: sum; write: fill; copy; triad `c = a + s*b`), each pass's bytes counted as read + written, plus
  torch's `copy_` (glibc's memcpy streams large copies past the cache). Each kernel is timed as the best of
  several samples, each sample enough passes to last >= ~50 us; the figure for a working set is the fastest
  kernel's. The arrays are written just before they are timed, as the harness's timing loop writes each
  input before a call, so a small working set is measured in the cache it lives in.
- FLOP/s: ten independent chains of `a = a*m + c` on the widest native vectors (fused multiply-adds, 2 FLOPs per
  lane) in float and in double (the best of 25 samples of ~0.2 ms), and a float matrix product by torch
  (MKL/oneDNN); the best of each.
Best-of samples approximate the machine's ceiling even when other work shares it, but a measurement taken
on a loaded machine is still low: results above their roofline are then flagged `above_roofline`, and
`--remeasure` on a quiet machine fixes the cache.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernelbench.harness.insight.peaks import Peaks

# Imports inside functions: torch (1-2 s to import) loads when this module's work runs; importing it stays free of
# torch, and so do the modules that import it at their top.

METHOD = "cpu-peaks-3"
"""Part of the cache key: a change of method invalidates older measurements."""
FOOTPRINTS = tuple(16384 * 4 ** k for k in range(10))
"""Working sets measured: 16 KiB, 64 KiB, ... 4 GiB capped at MAX_FOOTPRINT."""
MAX_FOOTPRINT = 256 << 20
SAMPLE_S = 50e-6
BUDGET_S = 0.03
"""Per kernel and working set: about this much time in samples."""

C_SOURCE = r"""
#include <stddef.h>
#include <time.h>
#include <omp.h>
/* the widest native vectors: wider ones are split and spilled to the stack by gcc */
#ifdef __AVX512F__
#define NB 64
#else
#define NB 32
#endif
typedef float nf __attribute__((vector_size(NB)));
typedef double nd __attribute__((vector_size(NB)));
#define BARRIER __asm__ volatile("" ::: "memory")

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }

/* kind 0 read, 1 write, 2 copy, 3 triad; nfloat floats per array (a multiple of 16). Returns the best seconds
   per pass. */
double stream(int kind, nf *a, nf *b, nf *c, long nfloat, long passes, int samples, int threads, float *sink) {
    double best = 1e30;
    for (int s = 0; s < samples; ++s) {
        double t0 = 0.0, t1 = 0.0;
        #pragma omp parallel num_threads(threads)
        {
            int id = omp_get_thread_num(), nt = omp_get_num_threads();
            long n = nfloat / (NB / 4);
            long lo = n * id / nt, hi = n * (id + 1) / nt;
            nf acc0 = {0}, acc1 = {0}, acc2 = {0}, acc3 = {0};
            nf v = {0}; v += (float)s;
            #pragma omp barrier
            #pragma omp master
            t0 = now();
            for (long p = 0; p < passes; ++p) {
                if (kind == 0) {
                    long i = lo;
                    for (; i + 4 <= hi; i += 4) { acc0 += a[i]; acc1 += a[i + 1]; acc2 += a[i + 2]; acc3 += a[i + 3]; }
                    for (; i < hi; ++i) acc0 += a[i];
                } else if (kind == 1) {
                    for (long i = lo; i < hi; ++i) c[i] = v;
                } else if (kind == 2) {
                    for (long i = lo; i < hi; ++i) c[i] = a[i];
                } else {
                    for (long i = lo; i < hi; ++i) c[i] = a[i] + v * b[i];
                }
                BARRIER;
                if (nt > 1) {
                    #pragma omp barrier
                }
            }
            #pragma omp master
            t1 = now();
            nf acc = acc0 + acc1 + acc2 + acc3;
            sink[id] = acc[0];
        }
        double t = (t1 - t0) / passes;
        if (t < best) best = t;
    }
    return best;
}

/* FLOP/s of 10 independent FMA chains per thread (explicit variables: an array of vectors is kept on the stack
   by gcc), on the widest native vectors: two FMA pipes of latency 4 need 8 chains in flight. */
#define CHAINS(T, S) \
    T x0 = z + S, x1 = z + S + 1, x2 = z + S + 2, x3 = z + S + 3, x4 = z + S + 4, x5 = z + S + 5, \
      x6 = z + S + 6, x7 = z + S + 7, x8 = z + S + 8, x9 = z + S + 9; \
    for (long i = 0; i < iters; ++i) { \
        x0 = x0 * m + c; x1 = x1 * m + c; x2 = x2 * m + c; x3 = x3 * m + c; x4 = x4 * m + c; \
        x5 = x5 * m + c; x6 = x6 * m + c; x7 = x7 * m + c; x8 = x8 * m + c; x9 = x9 * m + c; } \
    T r = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7 + x8 + x9;

double fma_f32(long iters, int samples, int threads, float *sink) {
    double best = 0.0;
    for (int s = 0; s < samples; ++s) {
        double t0 = now();
        #pragma omp parallel num_threads(threads)
        {
            nf z = {0}, m = z + 0.999f, c = z + 1e-3f;
            CHAINS(nf, (float)s)
            sink[omp_get_thread_num()] = r[0];
        }
        double rate = 2.0 * (NB / 4) * 10 * (double)iters * threads / (now() - t0);
        if (rate > best) best = rate;
    }
    return best;
}

double fma_f64(long iters, int samples, int threads, double *sink) {
    double best = 0.0;
    for (int s = 0; s < samples; ++s) {
        double t0 = now();
        #pragma omp parallel num_threads(threads)
        {
            nd z = {0}, m = z + 0.999, c = z + 1e-3;
            CHAINS(nd, (double)s)
            sink[omp_get_thread_num()] = r[0];
        }
        double rate = 2.0 * (NB / 8) * 10 * (double)iters * threads / (now() - t0);
        if (rate > best) best = rate;
    }
    return best;
}
"""


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo; `platform.processor()` elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass

    return platform.processor() or platform.machine()


def cache_dir() -> Path:
    return Path(os.environ.get("KERNEL_AGENT_PEAKS_DIR") or os.path.expanduser("~/.cache/kernel-agent/peaks"))


def cache_path(threads: int) -> Path:
    key = hashlib.sha256(f"{METHOD}|{cpu_model()}|{os.cpu_count()}|threads={threads}".encode()).hexdigest()[:16]
    return cache_dir() / f"cpu-{key}.json"


def _build(folder: str) -> ctypes.CDLL:
    src = os.path.join(folder, "peaks.c")
    lib = os.path.join(folder, "peaks.so")
    Path(src).write_text(C_SOURCE)
    subprocess.run(["cc", "-O2", "-march=native", "-fopenmp", "-shared", "-fPIC", src, "-o", lib],
                   check=True, capture_output=True, timeout=120)
    dll = ctypes.CDLL(lib)
    dll.stream.restype = ctypes.c_double
    dll.stream.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 3 + [ctypes.c_long, ctypes.c_long, ctypes.c_int,
                                                                     ctypes.c_int, ctypes.c_void_p]
    for name in ("fma_f32", "fma_f64"):
        fn = getattr(dll, name)
        fn.restype = ctypes.c_double
        fn.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    return dll


STREAMS = ((0, 1, 1), (1, 1, 1), (2, 2, 2), (3, 3, 3))
"""(kind, arrays it touches, bytes per element moved / 4): read, write, copy, triad."""


def _bandwidth(dll: ctypes.CDLL, footprint: int, threads: int) -> float:
    import torch

    best = 0.0
    sink = torch.zeros(max(threads, 1) * 4)
    for kind, arrays, streams in STREAMS:
        n = max(16 * threads, footprint // (4 * arrays) // 16 * 16)
        # filled just now, as the timing loop writes each input before a call; arrays a kind does not touch stay tiny
        a = torch.full((n if kind != 1 else 16,), 1.0)
        b = torch.full((n if kind == 3 else 16,), 1.0)
        c = torch.full((n if kind != 0 else 16,), 1.0)
        moved = n * 4 * streams
        passes = max(1, int(SAMPLE_S * 20e9 / moved))
        samples = max(3, min(50, int(BUDGET_S / max(moved / 20e9 * passes, 1e-9))))
        t = dll.stream(kind, a.data_ptr(), b.data_ptr(), c.data_ptr(), n, passes, samples, threads, sink.data_ptr())
        best = max(best, moved / t)
    src, dst = torch.full((footprint // 8,), 1.0), torch.full((footprint // 8,), 0.0)
    best = max(best, _best_rate(lambda: dst.copy_(src), 2 * src.numel() * 4))
    return best


def _best_rate(fn, units: float, samples: int = 5) -> float:
    fn()
    best = 0.0
    for _ in range(samples):
        t0 = time.perf_counter()
        fn()
        best = max(best, units / (time.perf_counter() - t0))
    return best


def measure(threads: int) -> Peaks:
    """Run the benchmark (seconds; the caller caches the result)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with tempfile.TemporaryDirectory(prefix="ka-peaks-") as folder:
            dll = _build(folder)
            bandwidth = tuple((f, _bandwidth(dll, f, threads)) for f in FOOTPRINTS if f <= MAX_FOOTPRINT)
            sink = torch.zeros(max(threads, 1) * 8, dtype=torch.float64)
            # many short samples: on a shared machine a short one more often runs uninterrupted
            f32 = dll.fma_f32(40_000, 25, threads, sink.data_ptr())
            f64 = dll.fma_f64(40_000, 25, threads, sink.data_ptr())
        a, b = torch.rand(512, 512), torch.rand(512, 512)
        mm = _best_rate(lambda: torch.mm(a, b), 2 * 512 ** 3)
    finally:
        torch.set_num_threads(old)
    f32 = max(f32, mm)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return Peaks(name=f"{cpu_model()} ({threads} thread{'s' if threads != 1 else ''})", bandwidth=bandwidth,
                 matmul_flops={"float32": f32, "float64": f64, "bfloat16": f32, "float16": f32},
                 vector_flops={"float32": f32, "float64": f64, "bfloat16": f32, "float16": f32},
                 source=f"measured by kernelbench.harness.insight.cpu_peaks ({METHOD}) on {stamp}")


def cpu_peaks(threads: int, remeasure: bool = False) -> Peaks:
    """The cached peaks of this CPU at `threads` threads, measured (under a lock, one process at a time) when
    absent, unreadable or `remeasure`."""
    path = cache_path(threads)
    if not remeasure:
        cached = _read(path)
        if cached is not None:
            return cached
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent evaluators wait for one measurement, then read it
        cached = None if remeasure else _read(path)
        if cached is not None:
            return cached
        peaks = measure(threads)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(peaks.to_dict(), indent=1))
        os.replace(tmp, path)
        return peaks


def _read(path: Path) -> Peaks | None:
    try:
        return Peaks.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--remeasure", action="store_true", help="measure again and replace the cached figures")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    peaks = cpu_peaks(args.threads, args.remeasure)
    print(f"{peaks.name}: {peaks.source}; cache {cache_path(args.threads)} ({time.perf_counter() - t0:.1f} s)")
    for size, rate in peaks.bandwidth:
        print(f"  working set {size / 1024:>10.0f} KiB: {rate / 1e9:8.1f} GB/s")
    f32, f64 = peaks.matmul_flops["float32"], peaks.matmul_flops["float64"]
    print(f"  FP32 {f32 / 1e9:.1f} GFLOP/s, FP64 {f64 / 1e9:.1f} GFLOP/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
