"""`EvalConfig`: every setting of one evaluation, each documented (defaults follow DESIGN.md).

A pydantic dataclass (docs/architecture.md, "Configuration"): construction validates every field, a mode
outside its `Literal` is an error naming the field, and unknown fields are refused.
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass

Device = Literal["cpu", "cuda"]
Size = Literal["cpu", "gpu"]
OpPolicy = Literal["", "strict", "partial"]
"""Empty: each task's own policy."""
Profiler = Literal["torch", "ncu", "off"]


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class EvalConfig:
    """Settings for `kernelbench.harness.evaluate`."""

    device: Device = "cpu"
    """`cpu` (C++ kernels via load_inline) or `cuda` (CUDA kernels, CUDA-event timing, NVML)."""
    size: Size = "cpu"
    """Task size to build inputs at: `cpu` (small, for CPUs and tests) or `gpu` (1-15 ms on an H100-class GPU)."""
    cuda_device: str = ""
    """CUDA: the one GPU the reference and run children see (their `CUDA_VISIBLE_DEVICES`: an index or UUID of
    this process's own view); empty: this process's view as it is. Set per run by an evaluator with GPUs of
    its own (`ExecutorConfig.gpus`, from a training run's layout: `train.layout`)."""
    shared_gpu: bool = False
    """CUDA: the GPU candidates are timed on also trains or generates (a one-GPU check of a training run,
    `train.layout`'s `share_timing_gpu`): every result carries the flag `shared_timing_gpu` (it rejects
    nothing; the speedups are not comparable with a run that owns its timing GPU)."""
    op_policy: OpPolicy = ""
    """`strict` (no PyTorch compute op in forward), `partial` (allowed beside custom kernels that run),
    or empty to use the task's own policy."""
    correctness_trials: int = 5
    """Trials with fresh `get_inputs()` draws (KernelBench's scripts use 5)."""
    extra_distribution_trials: int = 2
    """Additional trials with the same shapes but other distributions (signed, scaled) so a kernel
    cannot lean on `torch.rand`'s non-negative values."""
    atol: dict[str, float] = field(default_factory=lambda: {"float32": 1e-4, "float64": 1e-7,
                                                            "float16": 1e-2, "bfloat16": 1e-2})
    """Absolute tolerance by dtype (KernelBench HEAD: 1e-4 fp32, 1e-2 fp16/bf16)."""
    rtol: dict[str, float] = field(default_factory=lambda: {"float32": 1e-4, "float64": 1e-7,
                                                            "float16": 1e-2, "bfloat16": 1e-2})
    """Relative tolerance by dtype."""
    scale_atol_by_rms: bool = True
    """Multiply atol by the reference output's RMS when it exceeds 1 (see `compare.atol_scale`): long fp32
    sums differ between correct summation orders in proportion to the output's scale, not each entry's."""
    warmup_trials: int = 3
    """Untimed calls before timing (KernelBench: 3)."""
    timing_trials: int = 100
    """Timed calls; the median is reported (KernelBench: 100)."""
    timing_rounds: int = 10
    """CPU: the reference and the candidate are timed in this many alternating blocks (each child alive,
    the other one's turn waiting; the candidate frozen during the reference's), and the speedup is the
    median of the per-round ratios. Why: on a shared machine a process's memory bandwidth drifts by tens
    of percent within a second, so two medians taken seconds apart disagree; interleaving cancels drift
    slower than a round. 0: time them one after the other (always so on CUDA, where timings are steady)."""
    timing_checks: int = 4
    """Untimed calls hidden among the timed trials, on timing inputs perturbed by secret seeds, whose outputs the
    reference computed: a candidate that skips its work on the calls it guesses are timed is judged incorrect
    when a check lands among them (`timing.Measurement._check`). The number expected among the trials, as if
    each trial were preceded by one independently (a binomial count at uniform positions,
    `Measurement.place_checks`; in paired timing the parent draws each round's count for both children,
    `paired.draw_checks`, at least one per block on average, so `max(timing_checks, timing_rounds)` expected
    in all). Twice that are drawn (`protocol.CHECK_POOL_FACTOR`); the rest run in the verification round.
    0: none."""
    min_timing_trials: int = 10
    """Floor of timed trials per side whatever the warm-up said (the candidate's warm-up sets its per-call
    estimate, so it must not be able to shrink its own timing below this)."""
    timing_input_sets: int = 4
    """Distinct timing base sets, drawn from their own secret seeds (never a correctness set), one drawn
    uniformly for each timed or check call (a rotation named a call's kind), each call perturbed element by
    element, so a cache of results keyed by input cannot win."""
    max_input_set_mb: int = 1024
    """Largest input set (the tensors of one `get_inputs()` call) a task may have, in MiB: an evaluation draws
    about a dozen sets on one CPU thread, keeps them in two children and passes them through a file, so a task
    over it is refused at once with its size (a harness error) instead of running for minutes. Measured: a
    2 GiB ReLU set made every evaluation on an H200 outlast 190 s. The built-in tasks stay under 256 MiB
    (docs/tasks.md, "Sizes"); 0: no limit."""
    time_compile_baseline: bool = False
    """Also time `torch.compile(Model)` as a second baseline (slow to compile; on for benchmarks)."""
    suspicious_speedup: float = 10.0
    """Speedups above this are re-verified and flagged `suspicious_speedup`."""
    compile_timeout_s: float = 300.0
    """Wall-clock limit of the compile stage (CUDA load_inline takes 30-90 s cold)."""
    run_timeout_s: float = 120.0
    """Wall-clock limit of the run stage (correctness + timing)."""
    memory_limit_mb: int = 8192
    """Address-space limit of each process of the compile and run children on CPU (not applied on CUDA, whose
    driver maps huge ranges)."""
    cgroup_memory_mb: int = 8192
    """Memory of all tasks of one child together, tmpfs pages and page cache included: the cgroup of each
    compile, reference and run child, CPU and CUDA (`kernelbench.harness.isolation.cgroups`). Why beside
    `memory_limit_mb`: RLIMIT_AS is per process, never counts tmpfs pages, and is not applied on CUDA."""
    tmpfs_mb: int = 1024
    """Size of each private tmpfs of the sandbox (`/tmp`, `/dev/shm`, a hidden `$HOME`): a full one is ENOSPC."""
    allow_missing_cgroups: bool = False
    """Judge even where a child's cgroup cannot hold its limits (no writable cgroup filesystem, not root): only
    for such machines, e.g. an unprivileged CI container (`KERNEL_AGENT_ALLOW_MISSING_CGROUPS=1` does the
    same). Off, such a start is a `harness_error`. Results say which limits held (`EvalResult.limits_held`)."""
    max_processes: int = 256
    """RLIMIT_NPROC of the sandboxed user and `pids.max` of each child's cgroup (fork bombs stop here)."""
    max_file_mb: int = 512
    """RLIMIT_FSIZE: largest file the candidate may write."""
    require_sandbox: bool = False
    """Refuse to run without bubblewrap instead of falling back to a plain child with rlimits."""
    allow_unsampled: bool = False
    """Judge CPU candidates even where the check of which code ran during their calls cannot run (no
    `perf_event_open` for the harness, no cgroup v2): the result carries the flag `unsampled`. Off by default:
    without it a kernel that calls MKL found at run time is judged as the candidate's own (`code_check`).
    A machine marked as having no cgroups (`allow_missing_cgroups`, `KERNEL_AGENT_ALLOW_MISSING_CGROUPS=1`)
    has no child cgroup to sample either, so that mark allows this too: one setting for such machines."""
    build_cache_dir: str = ""
    """Where compiled extensions are cached by source hash; empty: `$KERNEL_AGENT_CACHE` or `~/.cache/kernel-agent/builds`."""
    static_checks: bool = True
    """Run the static policy checks before compiling. Off only in tests that prove the sandbox and the
    dynamic checks hold by themselves."""
    op_checks: bool = True
    """Judge the traced aten ops and the kernel-call count of one forward (the op policy). Off only in tests
    of candidates that are pure PyTorch on purpose (they prove the other checks hold by themselves)."""
    threads: int = 1
    """torch intra-op threads for reference and candidate on CPU (equal, so timing is fair)."""
    warm_workers: bool = True
    """Fork the compile, reference and run children from a warm worker that imported torch once
    (`kernelbench.harness.isolation.warm_child`: the same sandbox, cgroup, uid and limits per child) instead of starting
    an interpreter for each; only where the harness runs as root. Off: a fresh interpreter per child, as before
    (`scripts/bench_harness.py --cold-workers` measures both)."""
    harness_error_limit: int = 3
    """An `Evaluator` stops (raises `HarnessBroken`, naming the cause) after this many `harness_error` results
    in a row, each already retried once: a broken judge must stop a job, not feed it verdicts."""
    profile: Profiler = "torch"
    """After a correct, timed evaluation, profile one extra untimed call of the candidate and of the reference
    for the feedback (`kernelbench.harness.insight.profiling`; advisory, never scored, after the verdict): `torch`
    (torch.profiler), `ncu` (that, plus Nsight Compute's per-kernel DRAM / SM throughput and occupancy on CUDA,
    from a second, untimed run child under ncu), or `off`."""
    profile_timeout_s: float = 30.0
    """Limit of the profiled call (after the report, so reaching it loses only the profile, never the verdict)."""
