"""`Peaks`: how fast a device can move bytes and do FLOPs, the two ceilings of its roofline.

GPUs: the vendor's published figures (`GPU_PEAKS`). CPUs: measured once per machine and thread count
(`kernelbench.harness.insight.cpu_peaks`). Which FLOP peak applies to a task depends on its dtype, on whether the work is a
matrix product (tensor cores on a GPU) or not, and on whether TF32 is allowed for fp32 matrix products (the
harness runs fp32 with TF32 off, so the FP32 non-tensor peak applies then).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TERA = 1e12


@dataclass(frozen=True)
class Peaks:
    """A device's ceilings. Bandwidth is a curve over working-set sizes: on a CPU a task whose inputs and
    outputs fit in a cache runs at that cache's bandwidth (the timing loop writes each input just before the
    call), so one DRAM figure would put a cache-resident kernel above its roofline."""

    name: str
    """What the figures belong to (the GPU model, or the CPU model and thread count)."""
    bandwidth: tuple[tuple[int, float], ...]
    """(working-set bytes, bytes per second) ascending in bytes; a GPU has one entry at 0 (its DRAM figure)."""
    matmul_flops: dict[str, float]
    """FLOP/s of matrix products by operand dtype (`float32`, `tf32`, `bfloat16`, `float16`, `float64`)."""
    vector_flops: dict[str, float]
    """FLOP/s of everything else by dtype (CUDA cores on a GPU; the same SIMD units on a CPU)."""
    source: str
    """Where the figures come from: a datasheet, or the measurement's method and date."""

    def bandwidth_for(self, working_set_bytes: int) -> float:
        """Bytes per second for a task touching `working_set_bytes`: the figure measured at the largest
        working set not above it (the smallest measured one when the task is smaller still). Taking the
        next smaller set's figure errs towards a faster device, so the roofline stays a bound."""
        best = self.bandwidth[0][1]
        for size, rate in self.bandwidth:
            if size <= working_set_bytes:
                best = rate
        return best

    def matmul_rate(self, dtype: str, tf32: bool) -> float:
        key = "tf32" if dtype == "float32" and tf32 else dtype
        return self.matmul_flops.get(key) or self.matmul_flops["float32"]

    def vector_rate(self, dtype: str) -> float:
        return self.vector_flops.get(dtype) or self.vector_flops["float32"]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "bandwidth": [list(p) for p in self.bandwidth],
                "matmul_flops": dict(self.matmul_flops), "vector_flops": dict(self.vector_flops), "source": self.source}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Peaks":
        return cls(name=str(d["name"]), bandwidth=tuple((int(s), float(r)) for s, r in d["bandwidth"]),
                   matmul_flops={str(k): float(v) for k, v in d["matmul_flops"].items()},
                   vector_flops={str(k): float(v) for k, v in d["vector_flops"].items()}, source=str(d["source"]))


H200_DATASHEET = "NVIDIA H200 Tensor Core GPU datasheet / product page, https://www.nvidia.com/en-us/data-center/h200/"

# Dense rates: the datasheet's tensor-core figures are "with sparsity" (2:4 structured), twice the dense rate.
# H200 SXM: FP64 34, FP64 Tensor 67, FP32 67, TF32 Tensor 989*, BF16/FP16 Tensor 1,979*, FP8 3,958* TFLOPS
# (* with sparsity); HBM3e 4.8 TB/s. H200 NVL: FP64 30, FP64 Tensor 60, FP32 60, TF32 835*, BF16/FP16 1,671*.
GPU_PEAKS: dict[str, Peaks] = {
    "H200 NVL": Peaks(
        name="NVIDIA H200 NVL", bandwidth=((0, 4.8 * TERA),),
        matmul_flops={"float64": 60 * TERA, "float32": 60 * TERA, "tf32": 835 / 2 * TERA,
                      "bfloat16": 1671 / 2 * TERA, "float16": 1671 / 2 * TERA},
        vector_flops={"float64": 30 * TERA, "float32": 60 * TERA}, source=H200_DATASHEET + " (H200 NVL column)"),
    "H200": Peaks(
        name="NVIDIA H200 SXM", bandwidth=((0, 4.8 * TERA),),
        matmul_flops={"float64": 67 * TERA, "float32": 67 * TERA, "tf32": 989 / 2 * TERA,
                      "bfloat16": 1979 / 2 * TERA, "float16": 1979 / 2 * TERA},
        vector_flops={"float64": 34 * TERA, "float32": 67 * TERA}, source=H200_DATASHEET + " (H200 SXM column)"),
}
"""Published peaks by a substring of the device name, most specific first. fp32 matrix products with TF32 off
run on the CUDA cores (FP32 column); half-precision element-wise work falls back to the FP32 figure (the
datasheet gives no non-tensor half rate, and element-wise work is bandwidth-bound by far)."""


def gpu_peaks(device_name: str) -> Peaks | None:
    """The published peaks of the GPU called `device_name` (NVML's or torch's name), None when unknown."""
    for key, peaks in GPU_PEAKS.items():
        if key.lower() in device_name.lower():
            return peaks
    return None
