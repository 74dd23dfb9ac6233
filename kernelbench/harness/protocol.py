"""The messages between the parent and its sandboxed children: the job the parent writes, the report a child
sends back. Both ends are written against these frozen records; the wire is JSON.

- Jobs (parent -> child, `SCRATCH/job.json`, read and deleted by the child before any candidate code runs):
  `CompileJob`, `ReferenceJob`, `RunJob`, told apart by their `mode` key (`job_from_dict`).
- Reports (child -> parent): `CompileReport` and `RunReport` over the parent's report pipe
  (`kernelbench.harness.child.report`: framing, nonce, ordering rules), `ReferenceReport` in the reference child's
  `result.json` (trusted task code only, `child.result_files.read_result`). A report carries either a `Fault` (an
  exception stopped the child) or the mode's result, never both.

Why strict: string-keyed dicts read with `.get(key, default)` turned a key one end forgot to write into a
silent default the verdict was computed from (STYLE.md). `from_dict` requires exactly the fields of the record
(a missing or an unknown key raises `ProtocolError`) and checks each value's type against the annotation;
`to_dict` writes every field. A report of a child that ran candidate code is untrusted bytes: the parent reads
one that does not decode exactly as it reads a missing one (`decode_untrusted`).

Imports only the standard library: the child imports it before the candidate, and cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from kernelbench.harness.record_codec import ProtocolError, R, Record, from_plain, to_plain  # the codec: re-exported, both ends name them here


CHECK_POOL_FACTOR = 2
"""Check calls drawn per evaluation, as a multiple of those expected among the trials (`children.timing_checks`):
the count per block is random (`paired.draw_checks`, `timing.Measurement.place_checks`), and the pool must
rarely run dry (with 10 expected, a pool of 20 runs dry in about 2 runs in 1,000, and then only for the last trials)."""

# --- jobs (parent -> child) --------------------------------------------------------------------------


@dataclass(frozen=True)
class PipeFds(Record):
    """The child's ends of paired timing's two pipes (`kernelbench.harness.paired.Pipes`, `timing.Channel`)."""

    read_fd: int
    write_fd: int


@dataclass(frozen=True)
class TaskFields(Record):
    """The task as the reference child rebuilds it (`kernelbench.tasks.task.Task`)."""

    id: str
    level: int
    name: str
    origin: str
    source: str
    path: str
    op_policy: str


@dataclass(frozen=True)
class Setup(Record):
    """What the reference and the run child of one evaluation share: device, seeds, trial counts, profiling."""

    device: str
    threads: int
    """torch's intra-op threads (`EvalConfig.threads`)."""
    init_seed: int
    input_seeds: tuple[int, ...]
    extra_seeds: tuple[int, ...]
    warmup_trials: int
    timing_trials: int
    """0: no timing (correctness only)."""
    timing_input_sets: int
    timing_budget_s: float
    min_trials: int
    timing_checks: tuple[tuple[int, int], ...]
    """(timing set, seed) of each hidden check call among the timed trials (`evaluate` draws them)."""
    profile: str
    """"" (none), "torch" or, for the untimed run child under Nsight Compute, "ncu"."""
    profile_timeout_s: float
    max_input_set_mb: int = 0
    """`EvalConfig.max_input_set_mb` (0: no limit): the reference child refuses a larger input set."""


@dataclass(frozen=True)
class CompileJob(Record):
    """Import the candidate (its `load_inline` calls build into TORCH_EXTENSIONS_DIR)."""

    mode: ClassVar[str] = "compile"
    nonce: str
    device: str
    candidate: str
    """The candidate's file name in the scratch folder."""
    pch_dir: str
    """Precompiled headers the build may use ("" when none)."""
    report_fd: int
    """The write end of the parent's report pipe (`report.Collector`)."""


@dataclass(frozen=True)
class ReferenceJob(Record):
    """Run the task's trusted `Model`: inputs, reference outputs, reference timing."""

    mode: ClassVar[str] = "reference"
    nonce: str
    setup: Setup
    task: TaskFields
    size: str
    time_compile: bool
    """Also time `torch.compile(Model)` (`EvalConfig.time_compile_baseline`)."""
    timing_seeds: tuple[int, ...]
    paired: PipeFds | None
    """Paired timing's pipes (CPU), None when timed in one go."""
    part: str = "all"
    """`all`: inputs, outputs and timing. A group's paired timing (`reference_cache`): `outputs`, the group's
    inputs and outputs, untimed; `timing`, paired timing beside one candidate of the group on the group's
    `inputs.pt` (the parent's copy, already in the scratch folder), no outputs (the parent holds them)."""


REFERENCE_PARTS = ("all", "outputs", "timing")


@dataclass(frozen=True)
class RunJob(Record):
    """Run the candidate on the reference's inputs; every output goes over the report pipe."""

    mode: ClassVar[str] = "run"
    nonce: str
    setup: Setup
    candidate: str
    pch_dir: str
    triton: bool
    """The candidate launches Triton kernels (`triton_kernels.uses_triton`)."""
    trace_ops: bool
    """Trace the aten ops of every candidate call (`child/call_checks.py`): the `strict` policy judges them; the
    `partial` policy judges only the kernel calls, counted on every call either way."""
    build_manifest: dict[str, dict[str, str]]
    """The build folder as the parent recorded it: all the child may load (`build_manifest`)."""
    refuse_exec_memory: bool
    """After `__init__`, refuse new executable memory too (`spawn_guard.EXEC_MEMORY_RULES`): set where the parent
    judges which code ran (`code_check`: CPU, `strict`)."""
    report_fd: int
    paired: PipeFds | None


Job = CompileJob | ReferenceJob | RunJob
JOBS: dict[str, type] = {c.mode: c for c in (CompileJob, ReferenceJob, RunJob)}


def job_to_dict(job: Job) -> dict[str, Any]:
    return {"mode": job.mode, **job.to_dict()}


def job_from_dict(data: Any) -> Job:
    """The job of `data["mode"]`, exactly (`ProtocolError` otherwise)."""
    if not isinstance(data, dict) or data.get("mode") not in JOBS:
        raise ProtocolError(f"no job of mode {data.get('mode') if isinstance(data, dict) else data!r}")
    fields = dict(data)
    return from_plain(JOBS[fields.pop("mode")], fields)


# --- verdict records -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Violation(Record):
    """A rule a candidate broke: found in its source by the static checks, in its built library's imports
    (`build.symbols`), or in the ops its calls ran (`child.op_policy`)."""

    flag: str
    """`static:<rule>`, `dynamic:<rule>` or `warn:<rule>` (warnings do not reject)."""
    reason: str
    """One line the agent can read."""


# --- reports (child -> parent) -----------------------------------------------------------------------


@dataclass(frozen=True)
class Fault(Record):
    """Why a child stopped before the end of its job: an exception escaped (the candidate's, or the task's)."""

    phase: str
    """Where: `import`, `format` (compile child), `init`, `forward`, `timing`, `trace` (run child), `unknown`."""
    error: str
    """`Type: message`, bounded."""
    error_type: str
    oom: bool
    """An allocation failure (`worker.OOM_MARKERS`)."""
    traceback: str


@dataclass(frozen=True)
class Timing(Record):
    """Trial times of one model in milliseconds (`child.timing.stats`), as both children report them."""

    median_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    total_ms: float
    trials: int
    warmup: int


@dataclass(frozen=True)
class TaskRefusal(Record):
    """Which layers of the run child's refusal of new threads and processes took effect
    (`spawn_guard.refuse_new_tasks`); `refused`: a probe thread failed to start."""

    rlimit: bool
    seccomp: bool
    refused: bool
    exec_memory: bool
    """New executable memory is refused too (asked for by `RunJob.refuse_exec_memory`)."""


@dataclass(frozen=True)
class CompileReport(Record):
    nonce: str
    fault: Fault | None
    """None: imported, and `ModelNew` is a class."""


@dataclass(frozen=True)
class Work(Record):
    """What one forward of the reference moves and computes (`child.work.count_work`: its module docstring has the
    rules); the roofline's input (`insight.roofline`)."""

    input_bytes: int = 0
    """Arguments, parameters and buffers, each distinct tensor once."""
    output_bytes: int = 0
    """Returned tensors, each once (an output sharing an input's memory moves nothing more)."""
    matmul_flops: int = 0
    """FLOPs `FlopCounterMode` counted (matrix products, convolutions, attention): tensor-core work on a GPU."""
    other_flops: int = 0
    """FLOPs of every other op, by the rules above (vector-unit work)."""
    matmul_dtype: str = ""
    """dtype of the matrix products' operands (the largest one's when they differ); "" when there are none."""
    dtype: str = ""
    """dtype of the other ops' outputs (the largest one's when they differ)."""
    tf32: bool = False
    """Whether the reference ran with TF32 allowed for fp32 matrix products (the harness turns it off)."""
    estimated_ops: tuple[str, ...] = ()
    """Ops counted by the fallback rule (1 FLOP per element of their largest tensor)."""
    ops: int = 0
    """ATen ops the forward dispatched."""

    @property
    def bytes(self) -> int:
        return self.input_bytes + self.output_bytes

    @property
    def flops(self) -> int:
        return self.matmul_flops + self.other_flops


@dataclass(frozen=True)
class ReferenceResult(Record):
    """What the reference child measured (its outputs are in `reference.pt`, its inputs in `inputs.pt`)."""

    structures: tuple[str, ...]
    """Each input set's output structure (`outputs.flatten_output`)."""
    work: Work | None
    """Bytes and FLOPs of the timed configuration; None when not counted (`work_error` says why, when it failed)."""
    work_error: str
    """Why counting failed ("" when it did not or was not asked)."""
    set_configs: tuple[int, ...]
    """Input configuration of each correctness set; empty: the task has one configuration."""
    config_labels: tuple[str, ...]
    timing: Timing | None
    """The timed trials; None when not timed."""
    timing_blocks: list[list[float]] | None
    """Paired timing: each block's trial times; None when timed in one go."""
    profile: dict[str, Any] | None
    """The profile report of one untimed call (`profiling.table_from_report`); None when not asked."""
    compile_timing: Timing | None
    """The same trials of `torch.compile(Model)`; None when not asked."""


@dataclass(frozen=True)
class ReferenceReport(Record):
    nonce: str
    fault: Fault | None
    result: ReferenceResult | None


@dataclass(frozen=True)
class RunResult(Record):
    """What the run child recorded of the candidate; its outputs travel in frames of their own."""

    structures: tuple[str, ...]
    output_meta: list[list[dict[str, Any]]]
    """Per input set, per output tensor: type, dtype, shape, device, density, layout (`outputs.flatten_output`)."""
    ops: tuple[str, ...]
    """The distinct aten ops of every candidate call, sorted (`call_checks.CallChecks`; empty when not traced)."""
    kernel_calls: int
    """Calls of the candidate's compiled functions in the candidate call that made the fewest
    (`call_checks.CallChecks.fewest_kernel_calls`; 0: some call ran no kernel)."""
    timer_patched: tuple[str, ...]
    harness_tampered: tuple[str, ...]
    """What the candidate rebound, phase by phase (`snapshot.Snapshot`)."""
    threads_before: int
    threads_after: int
    os_threads_before: int
    os_threads_after: int
    new_tasks_refused: TaskRefusal | None
    """None in the untimed child Nsight Compute profiles (it refuses nothing)."""
    checks_installed: tuple[str, ...]
    timing: Timing | None
    timing_blocks: list[list[float]] | None
    call_windows_ns: tuple[tuple[int, int], ...]
    """CLOCK_MONOTONIC (start, end) of every call of the candidate's model after `__init__`, in order
    (`child/call_windows.py`): where the parent looks for the code that ran (`code_attribution`)."""
    op_windows_ns: tuple[tuple[int, int, int, int], ...] = ()
    """(thread id, CLOCK_MONOTONIC start, end, bytes written) of every ATen op the candidate's calls dispatched on
    the calling thread (`call_checks.CallTracer`; empty when not traced): time `code_attribution` charges to
    PyTorch, up to what the bytes a fill or copy wrote take."""
    state_dict_checked: bool = False
    """Whether the reference's `state_dict` came with the inputs (a task declaring `KEEP_STATE_DICT`) and the
    candidate's keys and shapes were compared with it (`candidate_run._weights`)."""
    state_dict_mismatch: str = ""
    """Empty when they matched (the reference's weights were then loaded into `ModelNew`); else how they differ."""


@dataclass(frozen=True)
class RunReport(Record):
    nonce: str
    build_refused: tuple[str, ...]
    """Builds the child refused to load or run (`build_manifest.REFUSED`), caught by the candidate or not."""
    fault: Fault | None
    result: RunResult | None


@dataclass(frozen=True)
class CallRecord(Record):
    """One call the run child reports in a frame of its own (`forward/i`, `check/j`, `verify/k`): the output as
    plain dense CPU tensors, and the arguments after the call (None for an argument that is no tensor). The
    frame is this shape (`outputs.call_record`) encoded by `call_frames.encode`, read by `call_frames.decode`."""

    outputs: list[Any]
    inputs_after: list[Any]


def decode_untrusted(cls: type[R], data: Any, nonce: str) -> R | None:
    """A report from a child that ran candidate code: the record when `data` decodes exactly, carries `nonce`
    and holds exactly one of `fault` / `result` (when it has both fields); otherwise None, read as no report
    (the candidate shares the process that wrote it: a malformed report is never a default)."""
    try:
        report = from_plain(cls, data)
    except (ProtocolError, TypeError, ValueError):
        return None
    if getattr(report, "nonce") != nonce:
        return None
    if hasattr(report, "result") and (report.fault is None) == (report.result is None):
        return None
    return report
