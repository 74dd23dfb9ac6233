"""What a sandboxed child is asked to be and what became of it: the records `kernelbench.harness.isolation.sandbox` and
`kernelbench.harness.isolation.warm_child` (the warm workers) share, apart from both so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelbench.harness.child.progress import STARTED, UNTRUSTED

BWRAP = "bwrap"
RLIMITS = "rlimits"
TAIL_CHARS = 6000
ENV_ALLOWED = ("LANG", "OMP_NUM_THREADS", "THP_MEM_ALLOC_ENABLE", "GLIBC_TUNABLES", "KMP_BLOCKTIME", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "TORCH_EXTENSIONS_DIR",
               "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "NVIDIA_TF32_OVERRIDE", "CUPY_CACHE_DIR", "CUPY_CACHE_SAVE_CUDA_SOURCE",
               "TRITON_INTERPRET", "TRITON_CACHE_DIR")


@dataclass(frozen=True)
class Bind:
    """A host path made visible inside the sandbox at `dest` (same path when `dest` is empty)."""

    src: str
    dest: str = ""
    writable: bool = False


@dataclass(frozen=True)
class Limits:
    """Resource limits of one child."""

    timeout_s: float = 120.0
    memory_limit_mb: int = 0
    """RLIMIT_AS; 0 for none (CUDA children)."""
    max_processes: int = 256
    """RLIMIT_NPROC of the slot's uid and `pids.max` of the child's cgroup (threads count in both)."""
    max_file_mb: int = 512
    cgroup_memory_mb: int = 8192
    """Memory of every task of the child together, page cache and tmpfs pages included (its cgroup); 0: none,
    which `cgroups.REQUIRED` refuses unless `allow_missing_cgroups`."""
    tmpfs_mb: int = 1024
    """Size of each private tmpfs of the sandbox (`/tmp`, `/dev/shm`, `$HOME`); 0: unbounded."""
    allow_missing_cgroups: bool = False
    """Run without the cgroup's limits where they cannot be set (`cgroups.allow_missing`), instead of refusing."""


@dataclass(frozen=True)
class ChildOutcome:
    """What happened to one child. Faults are values: nothing here is raised."""

    returncode: int
    """Exit status; negative when killed by a signal (as subprocess reports it)."""
    signal: int
    """The signal that killed the child (0 when it exited)."""
    timed_out: bool
    wall_s: float
    stdout_tail: str
    stderr_tail: str
    sandbox: str
    """`bwrap` or `rlimits`."""
    limits_held: tuple[str, ...] = ()
    """The limits this child ran under (`cgroups.LIMIT_NAMES`)."""
    memory_peak_bytes: int = 0
    """Most memory the child's cgroup held at once, tmpfs pages included (0: no cgroup)."""
    oom_kills: int = 0
    """Tasks of the child the kernel killed for its cgroup's memory limit."""
    progress: str = ""
    """What the worker said over its progress pipe (`PROGRESS_FD_ENV`): `S` once the interpreter ran and the
    project imported, then `C` just before untrusted code ran. The worker closes the pipe before that code
    runs, so a candidate can neither say it nor unsay it: a child without `S` never started (a harness
    fault, not the candidate's)."""

    @property
    def started(self) -> bool:
        return STARTED in self.progress

    @property
    def untrusted_ran(self) -> bool:
        return UNTRUSTED in self.progress




@dataclass(frozen=True)
class WorkerEntry:
    """The child is the harness's worker (`kernelbench.harness.child.worker`) on the job in `scratch`: such a child
    may be forked from a warm worker (`kernelbench.harness.isolation.warm_child`) instead of starting an interpreter."""

    scratch: str
    prebuild: bool = False
    """The compile child: start the parent's planned early build first (`kernelbench.harness.child.prebuild`)."""


@dataclass(frozen=True)
class ChildSpec:
    """One command to run sandboxed."""

    argv: tuple[str, ...]
    scratch_dir: str
    """Writable folder (bound at the same path); also the child's working directory."""
    limits: Limits = field(default_factory=Limits)
    binds: tuple[Bind, ...] = ()
    cuda: bool = False
    """Bind the /dev/nvidia* device nodes."""
    env: tuple[tuple[str, str], ...] = ()
    """Extra environment entries (filtered through ENV_ALLOWED)."""
    pass_fds: tuple[int, ...] = ()
    """Parent-made pipe ends the child inherits (the paired-timing channel); nothing else stays open."""
    worker: WorkerEntry | None = None
    """Set when `argv` runs the worker (`launch.child_argv`) and a warm worker may serve it instead (root only,
    `kernelbench.harness.isolation.warm_child`); None: always `argv` in a fresh interpreter."""
