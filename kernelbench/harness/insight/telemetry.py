"""What a result was measured on: device, driver, clocks, temperature, power, versions (DESIGN.md rule 7).

NVML (`pynvml`, from nvidia-ml-py) is imported lazily and only for `cuda`; on a machine without a driver
`nvmlInit` raises `NVMLError_LibraryNotFound` and the GPU fields stay empty. Read in the parent just before
the run stage, so the clocks and temperature are those the kernel was timed under (modulo the child's own
heating, which is why Conditions keeps them: to compare runs, not to correct them).
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass

# Imports inside functions: optional or GPU-only libraries (pynvml, and torch: only when a GPU is read) are imported
# only where they are used, so a machine without them runs everything else.


@dataclass(frozen=True)
class DeviceReading:
    """One NVML (or CPU) reading."""

    device_name: str = ""
    driver_version: str = ""
    sm_clock_mhz: float = 0.0
    mem_clock_mhz: float = 0.0
    temperature_c: float = 0.0
    power_w: float = 0.0


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def visible_gpu(env: str | None = None) -> int | str:
    """The GPU this process's CUDA device 0 is, as NVML knows it: the first entry of `CUDA_VISIBLE_DEVICES`
    (an index, or a `GPU-…`/`MIG-…` UUID), else index 0. A Ray run actor holds one GPU through that variable,
    and its children inherit it, so the reading is of the GPU the kernels ran on, not always GPU 0."""
    first = (os.environ.get("CUDA_VISIBLE_DEVICES", "") if env is None else env).split(",")[0].strip()
    if first.isdigit():
        return int(first)
    return first if first.startswith(("GPU-", "MIG-")) else 0


def read_gpu(which: int | str | None = None) -> DeviceReading:
    """NVML reading of GPU `which` (an NVML index or UUID; default `visible_gpu()`); an empty reading when
    NVML is unavailable."""
    which = visible_gpu() if which is None else which
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # ImportError or NVMLError_LibraryNotFound / DriverNotLoaded on CPU machines
        return DeviceReading()
    try:
        h = (pynvml.nvmlDeviceGetHandleByUUID(which) if isinstance(which, str)
             else pynvml.nvmlDeviceGetHandleByIndex(which))
        name = pynvml.nvmlDeviceGetName(h)
        driver = pynvml.nvmlSystemGetDriverVersion()
        return DeviceReading(
            device_name=name.decode() if isinstance(name, bytes) else str(name),
            driver_version=driver.decode() if isinstance(driver, bytes) else str(driver),
            sm_clock_mhz=float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
            mem_clock_mhz=float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)),
            temperature_c=float(pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)),
            power_w=pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0)
    except Exception:
        return DeviceReading()
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def read(device: str) -> DeviceReading:
    """GPU reading on `cuda`, the CPU model on `cpu`."""
    if device == "cuda":
        return read_gpu()
    return DeviceReading(device_name=cpu_model())


def versions() -> tuple[str, str]:
    """(torch version, CUDA version torch was built with or empty)."""
    import torch

    return torch.__version__, torch.version.cuda or ""
