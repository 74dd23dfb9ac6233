"""Reference timings per (task, size, device name, torch version): eager PyTorch and `torch.compile`.

Why a cache: the harness already times the eager reference in every evaluation (same run, same
conditions as the kernel: that is the speedup the agent is scored on). `torch.compile` is another
matter: compiling the reference costs tens of seconds per task, so a benchmark measures it once per
(task, size, device name, torch version) and keeps it in a JSON file; `--refresh-baselines` measures
again. The baseline is measured by the harness's own trusted reference child
(`kernelbench.harness.reference.run_reference`, with `time_compile_baseline`), so eager and compiled times come
from one process under one set of conditions.

How a kernel's `torch.compile` speedup is derived from the cache: the cached *ratio* compile/eager is
applied to the eager time measured beside the kernel, `compile_ref_ms = ref_runtime_ms · compile_ms /
eager_ms`, and to the kernel's speedup, `speedup_vs_compile = speedup · compile_ms / eager_ms` (equal to
`compile_ref_ms / runtime_ms` when the two were timed one after the other; on CPU `speedup` is the paired
figure, steadier than a ratio of medians, see `kernelbench.harness.paired`). A ratio measured in one process
survives clock and load drift between the baseline run and the evaluation better than a raw time would.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from kernelbench.harness.config import EvalConfig
from kernelbench.harness.insight import telemetry
from kernelbench.harness.isolation import sandbox
from kernelbench.harness.result import CORRECT, EvalResult
from kernelbench.harness.staged import policy_of
from kernelbench.tasks.inputs import draw_seeds
from kernelbench.tasks.task import Task

# Imports inside functions: the reference child's record imports torch; `evals.runner` imports this module at its
# top without it.

DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "kernel-agent", "baselines.json")


@dataclass(frozen=True)
class Baseline:
    """Reference timings of one task under one set of conditions."""

    task_id: str
    source_sha: str
    """SHA-256 prefix of the task's source: an edited problem is a different baseline."""
    size: str
    device_name: str
    torch_version: str
    eager_ms: float
    """Median eager forward time."""
    compile_ms: float
    """Median `torch.compile(Model)` forward time (0 when not measured)."""
    eager_std_ms: float = 0.0
    compile_std_ms: float = 0.0
    timing_trials: int = 0
    measured_at: str = ""
    """UTC time of measurement (ISO 8601)."""
    conditions: dict[str, Any] = field(default_factory=dict)
    """device, driver, clocks, temperature, threads, cuda version at measurement time."""

    @property
    def key(self) -> str:
        return cache_key(self.task_id, self.source_sha, self.size, self.device_name, self.torch_version)


def source_sha(task: Task) -> str:
    return hashlib.sha256(task.source.encode("utf-8")).hexdigest()[:16]


def cache_key(task_id: str, sha: str, size: str, device_name: str, torch_version: str) -> str:
    return "|".join((task_id, sha, size, device_name, torch_version))


class BaselineCache:
    """A JSON file of baselines by key; written atomically so concurrent or killed runs never tear it."""

    def __init__(self, path: str = ""):
        self.path = path or os.environ.get("KERNEL_AGENT_BASELINES", "") or DEFAULT_CACHE
        self._entries: dict[str, dict[str, Any]] = {}
        if os.path.exists(self.path):
            try:
                with open(self.path, encoding="utf-8") as f:
                    self._entries = json.load(f)
            except (OSError, ValueError):
                self._entries = {}

    def get(self, key: str) -> Baseline | None:
        entry = self._entries.get(key)
        return Baseline(**entry) if entry else None

    def put(self, baseline: Baseline) -> None:
        # Re-read before writing so that entries another run added meanwhile are kept.
        fresh = BaselineCache(self.path)._entries
        fresh.update(self._entries)
        fresh[baseline.key] = asdict(baseline)
        self._entries = fresh
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(fresh, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)

    def __len__(self) -> int:
        return len(self._entries)


def device_identity(device: str) -> tuple[str, str]:
    """(device name, torch version) as the harness records them in `Conditions`."""

    return telemetry.read(device).device_name, telemetry.versions()[0]


def measure(task: Task, config: EvalConfig, with_compile: bool = True) -> Baseline:
    """Time the task's reference, eager and optionally `torch.compile`, in the harness's reference child."""
    from kernelbench.harness.reference import run_reference

    cfg = replace(config, time_compile_baseline=with_compile)
    seeds = draw_seeds(cfg.correctness_trials, cfg.extra_distribution_trials)
    reading = telemetry.read(cfg.device)
    torch_v, cuda_v = telemetry.versions()
    with sandbox.SlotLease() as slot:
        scratch = sandbox.make_scratch(slot.uid, prefix="ka-base-")
        try:
            ref = run_reference(task, cfg, seeds, slot, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    eager, compiled = ref.timing, ref.compile_timing
    if eager is None or (with_compile and compiled is None):  # asked for: a missing one is the harness's fault
        raise RuntimeError(f"baseline of {task.id}: the reference child returned no "
                           f"{'eager' if eager is None else 'torch.compile'} timing")
    cond = {"device": cfg.device, "device_name": reading.device_name, "driver_version": reading.driver_version,
            "sm_clock_mhz": reading.sm_clock_mhz, "mem_clock_mhz": reading.mem_clock_mhz,
            "temperature_c": reading.temperature_c, "power_w": reading.power_w,
            "cpu_threads": cfg.threads if cfg.device == "cpu" else 0, "cuda_version": cuda_v,
            "op_policy": policy_of(task, cfg), "warmup_trials": cfg.warmup_trials}
    return Baseline(task_id=task.id, source_sha=source_sha(task), size=cfg.size, device_name=reading.device_name,
                    torch_version=torch_v, eager_ms=eager.median_ms,
                    compile_ms=compiled.median_ms if compiled else 0.0, eager_std_ms=eager.std_ms,
                    compile_std_ms=compiled.std_ms if compiled else 0.0, timing_trials=eager.trials,
                    measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), conditions=cond)


def get_or_measure(task: Task, config: EvalConfig, cache: BaselineCache, refresh: bool = False,
                   with_compile: bool = True) -> tuple[Baseline, bool]:
    """(baseline, came_from_cache). A cached entry without a compile time is re-measured when one is wanted."""
    name, torch_v = device_identity(config.device)
    key = cache_key(task.id, source_sha(task), config.size, name, torch_v)
    hit = None if refresh else cache.get(key)
    if hit is not None and (hit.compile_ms > 0 or not with_compile):
        return hit, True
    baseline = measure(task, config, with_compile)
    cache.put(baseline)
    return baseline, False


def apply_compile_baseline(result: EvalResult, baseline: Baseline | None) -> tuple[EvalResult, str]:
    """Fill `compile_ref_runtime_ms` / `speedup_vs_compile` from the cached ratio (see the module docstring).

    Returns the result and where its compile speedup came from: `measured` (the harness timed
    torch.compile in the same run), `cached`, or `none`.
    """
    if result.compile_ref_runtime_ms > 0:
        return result, "measured"
    if baseline is None or baseline.compile_ms <= 0 or baseline.eager_ms <= 0:
        return result, "none"
    if result.status != CORRECT or result.runtime_ms <= 0 or result.ref_runtime_ms <= 0:
        return result, "cached"
    ratio = baseline.compile_ms / baseline.eager_ms
    return replace(result, compile_ref_runtime_ms=result.ref_runtime_ms * ratio,
                   speedup_vs_compile=result.speedup * ratio), "cached"
