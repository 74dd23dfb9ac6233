"""The roofline: the least time a task can take on a device, and how close a kernel came to it.

`roofline(work, peaks)`: memory time = bytes / bandwidth (at the task's working set), compute time = matrix
FLOPs / the matrix peak for their dtype + other FLOPs / the vector peak; the roofline time is the larger of
the two, and that one names the bound (`memory` or `compute`). A kernel's `sol_fraction` ("speed of light")
is roofline time / its measured time: 1 means it ran at the device's limit.

Above 1 the roofline is wrong for this kernel, never silently capped: the candidate did less work than the
reference's ops (an algebraic shortcut: a product with a diagonal matrix done as a scaling), or the peaks are
too low (a CPU measured while the machine was busy; a GPU running above its datasheet clock). Such results
keep their fraction and carry the flag `above_roofline` (informational: the verdict does not change).
"""

from __future__ import annotations

import subprocess
import warnings
from dataclasses import dataclass

from kernelbench.harness.protocol import Work
from kernelbench.harness.insight.cpu_peaks import cpu_peaks
from kernelbench.harness.insight.peaks import gpu_peaks, Peaks

ABOVE_ROOFLINE = "above_roofline"
"""Flag of a result whose sol_fraction exceeds 1 (see the module docstring)."""
INTERPRETED = "interpreted"
"""Flag of a result run under an interpreter (Triton's on CPU): its time means nothing, so neither does its
fraction of the roofline."""
MEMORY, COMPUTE = "memory", "compute"


@dataclass(frozen=True)
class Roofline:
    """The two ceilings' times for one task on one device."""

    memory_ms: float
    compute_ms: float
    bandwidth_bytes_per_s: float
    """The bandwidth used (the device's figure at the task's working set)."""

    @property
    def time_ms(self) -> float:
        return max(self.memory_ms, self.compute_ms)

    @property
    def bound(self) -> str:
        """Which ceiling limits the task: `memory` or `compute`."""
        return MEMORY if self.memory_ms >= self.compute_ms else COMPUTE


def roofline(work: Work, peaks: Peaks) -> Roofline:
    bandwidth = peaks.bandwidth_for(work.bytes)
    memory_s = work.bytes / bandwidth
    compute_s = 0.0
    if work.matmul_flops:
        compute_s += work.matmul_flops / peaks.matmul_rate(work.matmul_dtype or work.dtype, work.tf32)
    if work.other_flops:
        compute_s += work.other_flops / peaks.vector_rate(work.dtype)
    return Roofline(memory_ms=memory_s * 1e3, compute_ms=compute_s * 1e3, bandwidth_bytes_per_s=bandwidth)


def sol_fraction(roofline_ms: float, runtime_ms: float) -> float:
    """roofline time / measured time (0 when either is unknown). Not capped: above 1 is a finding."""
    return roofline_ms / runtime_ms if roofline_ms > 0 and runtime_ms > 0 else 0.0


def device_peaks(device: str, device_name: str, threads: int) -> Peaks | None:
    """The peaks that apply to a run: the datasheet's for a known GPU, the measured ones for this CPU at the
    run's thread count; None for a GPU whose figures are not in `peaks.GPU_PEAKS`."""
    if device == "cuda":
        return gpu_peaks(device_name)

    return cpu_peaks(threads)


def describe(sol: float, bound: str) -> str:
    """"at 38 % of memory bandwidth" / "at 71 % of peak compute"."""
    limit = "memory bandwidth" if bound == MEMORY else "peak compute"
    return f"at {100 * sol:.0f} % of {limit}"


def feedback_line(sol: float, bound: str, roofline_ms: float) -> str:
    """The line the agent reads next turn about its kernel's distance from the limit."""
    return (f"speed of light: {describe(sol, bound)} (the task is {bound}-bound; its roofline time on this "
            f"device is {roofline_ms:.4g} ms)")


@dataclass(frozen=True)
class SpeedOfLight:
    """What a result records of the roofline (`EvalResult.sol_fraction`, `roofline_ms`, `sol_bound`)."""

    sol_fraction: float = 0.0
    roofline_ms: float = 0.0
    bound: str = ""


def assess(work: Work | None, device: str, device_name: str, threads: int, runtime_ms: float,
           flags: tuple[str, ...] | list[str] = ()) -> SpeedOfLight:
    """The roofline of the task whose reference reported `work` (None when it counted none), and
    the fraction of it a kernel timed at `runtime_ms` reached (0 for an untimed or incorrect kernel, pass 0
    then, and for an interpreted one: its time means nothing)."""
    if work is None:
        return SpeedOfLight()
    try:
        peaks = device_peaks(device, device_name, threads)
    except (OSError, subprocess.SubprocessError) as e:  # no C compiler: no CPU figures, and no verdict changes
        warnings.warn(f"no roofline: measuring this CPU's peaks failed ({type(e).__name__}: {e})")
        return SpeedOfLight()
    if peaks is None:
        return SpeedOfLight()
    r = roofline(work, peaks)
    timed = runtime_ms if INTERPRETED not in flags else 0.0
    return SpeedOfLight(sol_fraction(r.time_ms, timed), r.time_ms, r.bound)


def above_reason(s: SpeedOfLight) -> str:
    return (f"ran at {s.sol_fraction:.2f}x its roofline ({s.bound}-bound, {s.roofline_ms:.4g} ms): it does less work "
            "than the reference's ops, or this device's peaks are set too low (CPU: `python3 -m kernelbench.harness.insight.cpu_peaks "
            "--remeasure` on a quiet machine)")
