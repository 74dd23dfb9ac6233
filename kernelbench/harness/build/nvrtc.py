"""The NVRTC path: CUDA candidates that compile their kernels at runtime with CuPy instead of load_inline.

`load_inline` takes 30-90 s cold for CUDA (nvcc plus torch's headers); NVRTC compiles a kernel in well
under a second (REFERENCES.md), which matters when RL evaluates thousands of candidates. A candidate may
build kernels with `cupy.RawModule(code=...)` / `cupy.RawKernel(code, name)` and launch them on torch
tensors (through `__cuda_array_interface__` or raw pointers) on torch's current stream.

How the harness supports it: the static checks allow `import cupy` only on `cuda`; `kernel_calls.install()`
counts RawModule/RawKernel launches; the run child gets `CUPY_CACHE_DIR` on its private /tmp (HOME is a
tmpfs) so nothing persists between candidates. cupy is imported lazily, only in a CUDA child: on CPU
machines and in the parent it is never imported. CuPy needs a GPU driver even to compile, so there is no
compile-only check for this path on a machine without one.
"""

from __future__ import annotations

CUPY_CACHE_DIR = "/tmp/cupy-kernel-cache"
"""Inside the sandbox's private /tmp: NVRTC output never outlives the child."""


def child_env(device: str) -> tuple[tuple[str, str], ...]:
    """Environment entries a CUDA run child needs for CuPy; none on CPU."""
    if device != "cuda":
        return ()
    return (("CUPY_CACHE_DIR", CUPY_CACHE_DIR), ("CUPY_CACHE_SAVE_CUDA_SOURCE", "0"))
