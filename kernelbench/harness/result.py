"""`EvalResult`: what one evaluation of one candidate found, and the conditions it was measured under.

Frozen, JSON-serialisable, units in field names. Nothing is `None` in place of a result: a candidate
that never ran has `runtime_ms == 0.0` and a status that says why.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from kernelbench.harness.insight.profiling import Profile
from kernelbench.harness.isolation.cgroups import LIMIT_NAMES
from kernelbench.harness.record_codec import ProtocolError, from_plain

# Statuses, in the order an evaluation can fail (DESIGN.md, "The harness: rules").
FORMAT_ERROR = "format_error"   # no usable `ModelNew` in the response / file (syntax error, missing class)
REJECTED = "rejected"           # a policy check fired (static or dynamic); score 0
COMPILE_ERROR = "compile_error" # importing the candidate (which builds its extension) failed
RUNTIME_ERROR = "runtime_error" # construction or forward raised, crashed, ran out of memory or exited
TIMEOUT = "timeout"             # a wall-clock limit of the compile or run stage was hit
INCORRECT = "incorrect"         # ran, but outputs disagree with the reference
CORRECT = "correct"
HARNESS_ERROR = "harness_error" # not the candidate's fault: the child could not start or import the project,
                                # the sandbox failed, the harness's own code raised, a result vanished with no
                                # sign from the candidate. Never cached, never scored, retried once, always shown.
STATUSES = (FORMAT_ERROR, REJECTED, COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT, INCORRECT, CORRECT, HARNESS_ERROR)
COMPILED = "compiled"           # `eval --compile-only` only: the CUDA sources compiled with nvcc; nothing ran, so
                                # nothing is claimed about correctness (not a status of a full evaluation)


@dataclass(frozen=True)
class Conditions:
    """What a result was measured on; recorded with every result so that runs can be compared honestly."""

    device: str = "cpu"
    """`cpu` or `cuda`."""
    device_name: str = ""
    """GPU name from NVML / torch, or the CPU model string."""
    driver_version: str = ""
    """NVIDIA driver version; empty on CPU."""
    sm_clock_mhz: float = 0.0
    """SM clock read just before timing (NVML); 0 on CPU."""
    mem_clock_mhz: float = 0.0
    """Memory clock read just before timing (NVML); 0 on CPU."""
    temperature_c: float = 0.0
    """GPU temperature (NVML); 0 on CPU."""
    power_w: float = 0.0
    """GPU power draw (NVML); 0 on CPU."""
    cpu_threads: int = 0
    """torch intra-op threads in the run child (CPU timing depends on it)."""
    torch_version: str = ""
    cuda_version: str = ""
    """CUDA runtime torch was built with; empty for CPU builds."""
    sandbox: str = ""
    """`bwrap` or `rlimits` (plain child, weaker isolation)."""
    op_policy: str = "strict"
    """Which op policy judged the candidate (`strict` or `partial`)."""
    init_seed: int = 0
    """Seed both models were built under (parameters must match)."""
    input_seeds: tuple[int, ...] = ()
    """Seeds of the correctness input sets, drawn fresh by the parent per evaluation."""
    correctness_trials: int = 0
    timing_trials: int = 0
    warmup_trials: int = 0
    size: str = "cpu"
    """Task size the inputs were made at (`cpu` or `gpu`)."""
    timing_rounds: int = 0
    """Alternating reference/candidate timing rounds (0: timed one after the other; see EvalConfig)."""


@dataclass(frozen=True)
class EvalResult:
    """The harness's verdict on one candidate."""

    status: str
    """One of STATUSES."""
    compiled: bool = False
    """The candidate module imported and its extension built."""
    correct: bool = False
    """Every correctness trial agreed with the reference and no check fired."""
    runtime_ms: float = 0.0
    """Median candidate forward time (0 when not timed)."""
    runtime_std_ms: float = 0.0
    """Standard deviation of the candidate's timed trials."""
    ref_runtime_ms: float = 0.0
    """Median eager-PyTorch reference forward time, same run and conditions."""
    compile_ref_runtime_ms: float = 0.0
    """Median `torch.compile` reference time (0 when that baseline was not measured)."""
    speedup: float = 0.0
    """ref_runtime_ms / runtime_ms for a correct candidate, else 0."""
    speedup_vs_compile: float = 0.0
    """compile_ref_runtime_ms / runtime_ms for a correct candidate when measured, else 0."""
    flags: tuple[str, ...] = ()
    """Names of the checks that fired (e.g. `static:try_except`, `dynamic:torch_compute_op`, `suspicious_speedup`)."""
    feedback: str = ""
    """Short text the agent reads next turn (compiler lines, mismatch, speedup)."""
    max_abs_error: float = 0.0
    """Largest |candidate - reference| over correctness trials (0 when not compared)."""
    compile_s: float = 0.0
    """Wall time of the compile stage (small when the build cache served it; 0 when not reached)."""
    run_s: float = 0.0
    """Wall time of the run stage."""
    cached_build: bool = False
    """The candidate's extension came from the build cache."""
    conditions: Conditions = field(default_factory=Conditions)
    retries: int = 0
    """Times the evaluation was restarted after a harness fault: the worker running it was lost (an actor or
    node of the Ray executor died) or it came back `harness_error` (retried once). Records written before
    this field load with 0."""
    sol_fraction: float = 0.0
    """Speed of light: the task's roofline time on this device / runtime_ms (`kernelbench.harness.insight.roofline`), for a
    correct, timed kernel; 0 when not timed, not correct, interpreted, or the device's peaks are unknown. Not
    capped: above 1 carries the flag `above_roofline`. Records written before this field load with 0."""
    roofline_ms: float = 0.0
    """The least time the task can take on this device: max(bytes / bandwidth, FLOPs / peak) of its inputs,
    outputs and the reference's FLOPs on the timed configuration; 0 when not counted."""
    sol_bound: str = ""
    """Which ceiling limits the task: `memory` or `compute` ("" when no roofline)."""
    profile: Profile = field(default_factory=Profile)
    """The candidate's and the reference's top kernels in one extra untimed call after a correct, timed run
    (`kernelbench.harness.insight.profiling`): advisory feedback, never scored. Records written before this field load empty."""

    limits_held: tuple[str, ...] = ()
    """The resource limits the candidate's run child ran under (`kernelbench.harness.isolation.cgroups.LIMIT_NAMES`:
    `memory`, `memsw`, `pids`, `cpu`, `freeze`, `kill` from its cgroup, `tmpfs` for sized private tmpfs); all
    of `cgroups.REQUIRED` unless `EvalConfig.allow_missing_cgroups`. Empty for a result that never reached a
    run child, and in records written before this field."""

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["flags"] = list(self.flags)
        d["limits_held"] = list(self.limits_held)
        d["conditions"]["input_seeds"] = list(self.conditions.input_seeds)
        d["profile"] = self.profile.to_dict()
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvalResult":
        """The result a `to_dict` wrote, exactly (`record_codec.from_plain`): every field present, no other key,
        each value of its annotated type, nested records too, a known status and known limit names; anything
        else is a ValueError naming it (a record from elsewhere is never read as a verdict with fields dropped
        or defaulted). Two exceptions, both named: the fields of `ADDED_LATER` may be missing from records
        written before them, and `LEGACY_KEYS` are dropped."""
        d = {k: v for k, v in d.items() if k not in LEGACY_KEYS}
        d = {**{k: v for k, v in ADDED_LATER.items() if k not in d}, **d}
        if d.get("status") not in STATUSES:
            raise ValueError(f"EvalResult: unknown status {d.get('status')!r} (one of {', '.join(STATUSES)})")
        try:
            result = from_plain(cls, d)
        except ProtocolError as e:
            raise ValueError(f"{e} (not a record this harness wrote)") from None
        _limit_names(list(result.limits_held))
        return result


ADDED_LATER = {"retries": 0, "sol_fraction": 0.0, "roofline_ms": 0.0, "sol_bound": "", "profile": Profile().to_dict(),
               "limits_held": []}
"""Fields added after results were first saved, with the value an older record means (each field says so)."""


LEGACY_KEYS = ("score",)
"""Keys of older records that mean nothing now: `score` was a display score the harness stamped at the default
reward weight; the score of a verdict is `rewards.ScoreConfig.score`'s, under the run's own settings."""


def _limit_names(value: Any) -> tuple[str, ...]:
    """`limits_held` as recorded: a list of known limit names, nothing else (a record that claims a limit this
    harness does not know is not one it wrote)."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v in LIMIT_NAMES for v in value):
        raise ValueError(f"limits_held: expected a list of {LIMIT_NAMES}, got {value!r}")
    return tuple(value)
