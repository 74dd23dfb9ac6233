"""Running untrusted code in a child process: bubblewrap when present, otherwise a plain child with rlimits.

Candidates are written by a policy that is rewarded for passing the harness, so the harness treats them as
adversarial (DESIGN.md, "The harness: rules" 1; Kevin-32B arXiv 2507.11948 reports reward hacking in
practice). Every candidate runs in its own child; nothing the candidate does raises here: the child's fate
comes back as a `ChildOutcome`.

What the bubblewrap sandbox covers:
- read-only root filesystem, private `/tmp` and `/dev/shm`, `$HOME` hidden (tmpfs over both `$HOME` and `/tmp`,
  with only what the child needs re-bound read-only wherever it lives: the interpreter, its site-packages, the
  project and the sys.path entries; `bwrap.child_readonly_paths`), one writable scratch folder, fresh `/dev`
  and `/proc` (the command line: `kernelbench.harness.bwrap`);
- a progress pipe (`PROGRESS_FD_ENV`) on which the worker says it started and when untrusted code begins, so
  a child that never started is told apart from a candidate's fault (`ChildOutcome.progress`);
- no network (own net namespace), own pid/ipc/uts namespaces, a new session (no terminal injection);
- when the harness runs as root: an unprivileged uid per worker slot with all capabilities dropped, so
  `RLIMIT_NPROC` applies (it never does to uid 0) and a fork bomb stops; a slot's processes are all killed
  afterwards by signalling as that uid (`kernelbench.harness.process_tree`);
- rlimits: processes, file size, core dumps 0, address space (CPU only: the CUDA driver maps huge ranges);
- once the run child's own threads run, no new thread or process at all (`child.spawn_guard.refuse_new_tasks`:
  RLIMIT_NPROC 0 and a seccomp filter), so parallelism hidden inside one call cannot be had by any spelling;
- environment cleared except a short allow-list (never API keys);
- wall-clock timeout; the outer process group and the pid namespace die with it.
What it does not cover: CPU-time fairness between concurrent children, GPU memory of other processes,
kernel exploits, or reading world-readable files on the host (the root is bound read-only, not hidden).

Without bubblewrap (or `setpriv`) the child is a plain process with the same rlimits, uid drop and
environment but the host's filesystem and network: a warning is logged, and `require_sandbox` refuses.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernelbench.harness import bwrap, process_tree

log = logging.getLogger(__name__)

BWRAP = "bwrap"
RLIMITS = "rlimits"
SLOT_UID_BASE = 61000
"""Sandboxed children run as uid SLOT_UID_BASE + slot (when the harness is root): one uid per slot, so
concurrent sandboxes never share an NPROC count and a slot's leftovers can be killed by uid."""
MAX_SLOTS = 256
TAIL_CHARS = 6000
ENV_ALLOWED = ("LANG", "OMP_NUM_THREADS", "THP_MEM_ALLOC_ENABLE", "GLIBC_TUNABLES", "KMP_BLOCKTIME", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "TORCH_EXTENSIONS_DIR",
               "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "NVIDIA_TF32_OVERRIDE", "CUPY_CACHE_DIR", "CUPY_CACHE_SAVE_CUDA_SOURCE",
               "TRITON_INTERPRET", "TRITON_CACHE_DIR")


class SandboxUnavailable(RuntimeError):
    """`require_sandbox` is set but bubblewrap cannot run here (a harness setup fault, not a candidate's)."""


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
    max_file_mb: int = 512


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
    progress: str = ""
    """What the worker said over its progress pipe (`PROGRESS_FD_ENV`): `S` once the interpreter ran and the
    project imported, then `C` just before untrusted code ran. The worker closes the pipe before that code
    runs, so a candidate can neither say it nor unsay it: a child without `S` never started (a harness
    fault, not the candidate's)."""

    @property
    def started(self) -> bool:
        return "S" in self.progress

    @property
    def untrusted_ran(self) -> bool:
        return "C" in self.progress


PROGRESS_FD_ENV = "KERNEL_AGENT_PROGRESS_FD"
STARTED, UNTRUSTED = "S", "C"


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


def sandbox_kind(require_sandbox: bool = False) -> str:
    """`bwrap` or `rlimits`; raises SandboxUnavailable when bubblewrap is required but absent."""
    if bwrap.find_bwrap():
        return BWRAP
    if require_sandbox:
        raise SandboxUnavailable("bubblewrap (bwrap) and setpriv are required (EvalConfig.require_sandbox) but unusable here")
    return RLIMITS


class SlotLease:
    """An exclusive worker slot (flock on a per-slot file, so it holds across harness processes too)."""

    def __init__(self) -> None:
        base = Path(tempfile.gettempdir()) / f"kernel-agent-slots-{os.geteuid()}"
        base.mkdir(mode=0o700, exist_ok=True)
        for slot in range(MAX_SLOTS):
            fd = os.open(base / f"{slot}.lock", os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self.slot, self._fd = slot, fd
            return
        raise RuntimeError(f"all {MAX_SLOTS} sandbox slots are busy")

    @property
    def uid(self) -> int:
        """The uid children of this slot run as, or -1 when the harness is not root (no uid drop)."""
        return SLOT_UID_BASE + self.slot if os.geteuid() == 0 else -1

    def release(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> "SlotLease":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def make_scratch(uid: int, prefix: str = "ka-") -> str:
    """A fresh folder the sandboxed uid may write (and nobody else may read)."""
    path = tempfile.mkdtemp(prefix=prefix)
    if uid >= 0:
        os.chown(path, uid, uid)
    return path


def give_tree(path: str, uid: int) -> None:
    """Hand a folder tree to the slot's uid so the sandboxed child can write it."""
    if uid < 0:
        return
    for root, dirs, files in os.walk(path):
        for name in [root] + [os.path.join(root, n) for n in dirs + files]:
            os.lchown(name, uid, uid)


def child_path() -> str:
    """The PATH every child gets: this Python's folder, the CUDA toolkit's, the system's."""
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    return os.pathsep.join(dict.fromkeys([os.path.dirname(sys.executable), os.path.join(cuda_home, "bin"),
                                          "/usr/local/bin", "/usr/bin", "/bin"]))


def _env(spec: ChildSpec) -> dict[str, str]:
    env = {"PATH": child_path(), "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONNOUSERSITE": "1"}
    for key in ("CUDA_VISIBLE_DEVICES", "CUDA_HOME"):
        if key in os.environ:
            env[key] = os.environ[key]
    env.update({k: v for k, v in spec.env if k in ENV_ALLOWED})
    return env


def _prlimit_argv(limits: Limits) -> list[str]:
    mb = 1024 * 1024
    argv = ["prlimit", f"--nproc={limits.max_processes}", f"--fsize={limits.max_file_mb * mb}", "--core=0"]
    if limits.memory_limit_mb > 0:
        argv.append(f"--as={limits.memory_limit_mb * mb}")
    return argv + ["--"]


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - TAIL_CHARS))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def run_child(spec: ChildSpec, slot: SlotLease, require_sandbox: bool = False) -> ChildOutcome:
    """Run `spec` sandboxed as `slot`'s uid; wait at most `limits.timeout_s`; never raise for the child's faults."""
    return start_child(spec, slot, require_sandbox).wait()


class RunningChild:
    """A started sandboxed child: `wait()` for its outcome; `freeze()`/`thaw()` stop and resume all of it.

    The deadline counts from the start, so a caller that talks to the child in between (paired timing) and
    then waits still gets the child's whole limit and no more.
    """

    def __init__(self, proc: subprocess.Popen, kind: str, uid: int, logs: str, start: float, timeout_s: float,
                 progress_fd: int = -1):
        self.proc, self.kind, self.uid, self.logs = proc, kind, uid, logs
        self.progress_fd = progress_fd
        self.start, self.deadline = start, start + timeout_s
        self._frozen: set[int] = set()
        self._outcome: ChildOutcome | None = None

    def remaining_s(self) -> float:
        return max(0.0, self.deadline - time.perf_counter())

    def restart_clock(self) -> None:
        """Count the limit from now: a child started early that waited, untrusted code not yet run, for the
        parent's word (paired timing's run child, `timing.GO`) gets its whole limit from then on."""
        self.deadline = time.perf_counter() + (self.deadline - self.start)
        self.start = time.perf_counter()

    def freeze(self) -> None:
        """SIGSTOP every process of this sandbox, threads and all, and return once each one has stopped.

        Why: while the trusted reference is timed beside a live candidate (paired timing on CPU), a thread
        or process the candidate left running would steal the reference's cores and inflate the speedup.
        The set is every descendant of the child in the host's pid view (bubblewrap's pid 1 reaps orphans,
        so a double fork stays a descendant) plus, as root, every process of the slot's uid. Rescanned until
        no new process turns up, so one forked during the sweep is caught on the next pass.
        """
        for _ in range(8):
            new = process_tree.sandbox_pids(self.proc.pid, self.uid) - self._frozen
            if not new:
                break
            for pid in new:
                process_tree.send_signal(pid, signal.SIGSTOP)
            self._frozen |= new
        until = time.perf_counter() + FREEZE_WAIT_S
        pending = set(self._frozen)
        while pending and time.perf_counter() < until:
            pending = {pid for pid in pending if process_tree.process_state(pid) not in ("T", "t", "X", "Z", "")}
            if pending:
                time.sleep(0.0005)

    def thaw(self) -> None:
        for pid in self._frozen | process_tree.sandbox_pids(self.proc.pid, self.uid):
            process_tree.send_signal(pid, signal.SIGCONT)
        self._frozen = set()

    def wait(self) -> ChildOutcome:
        """Wait for the child until its deadline (then kill it); clean up; the outcome, computed once."""
        if self._outcome is not None:
            return self._outcome
        if self._frozen:
            self.thaw()
        timed_out = False
        try:
            self.proc.wait(timeout=self.remaining_s())
        except subprocess.TimeoutExpired:
            timed_out = True
            process_tree.kill_group(self.proc.pid)
            self.proc.wait()
        wall = time.perf_counter() - self.start
        process_tree.kill_group(self.proc.pid)
        process_tree.kill_uid(self.uid)
        rc = self.proc.returncode
        if self.kind == BWRAP and 128 < rc < 128 + 65:  # bubblewrap reports a signal death of its child as 128 + signo
            rc = -(rc - 128)
        self._outcome = ChildOutcome(returncode=rc, signal=-rc if rc < 0 else 0, timed_out=timed_out, wall_s=wall,
                                     stdout_tail=_tail(os.path.join(self.logs, "stdout")),
                                     stderr_tail=_tail(os.path.join(self.logs, "stderr")), sandbox=self.kind,
                                     progress=self._read_progress())
        shutil.rmtree(self.logs, ignore_errors=True)
        return self._outcome

    def kill(self) -> ChildOutcome:
        self.deadline = time.perf_counter()
        return self.wait()

    def _read_progress(self) -> str:
        """Everything the worker wrote on its progress pipe (the child and its processes are gone by now)."""
        if self.progress_fd < 0:
            return ""
        data = b""
        try:
            os.set_blocking(self.progress_fd, False)
            while len(data) < 64:
                chunk = os.read(self.progress_fd, 64)
                if not chunk:
                    break
                data += chunk
        except OSError:  # nothing more (EAGAIN) or already closed
            pass
        finally:
            os.close(self.progress_fd)
            self.progress_fd = -1
        return data.decode("ascii", "replace")


FREEZE_WAIT_S = 0.5
"""How long `freeze` waits for the stopped processes to report it (a process in uninterruptible sleep stops
when it leaves it; it uses no CPU meanwhile)."""


def start_child(spec: ChildSpec, slot: SlotLease, require_sandbox: bool = False, cgroup_dir: str = "") -> RunningChild:
    """Start `spec` sandboxed as `slot`'s uid (see `run_child`); the caller must `wait()` on the result.
    `cgroup_dir`: a cgroup v2 folder the child's whole tree starts in (`_in_cgroup`)."""
    kind = sandbox_kind(require_sandbox)
    uid = slot.uid
    env = _env(spec)
    progress_r, progress_w = os.pipe()
    env[PROGRESS_FD_ENV] = str(progress_w)
    if kind == BWRAP:
        argv = _prlimit_argv(spec.limits) + bwrap.bwrap_argv(spec, uid, env)
        user = {}
    else:
        log.warning("bubblewrap unavailable: running the candidate in a plain child with rlimits only "
                    "(the host filesystem and network stay reachable)")
        argv = _prlimit_argv(spec.limits) + list(spec.argv)
        needed = [sys.executable, spec.scratch_dir + "/x"] + [b.src + "/x" for b in spec.binds]
        if uid >= 0 and not all(process_tree.reachable_by(p, uid) for p in needed):
            log.warning("a path the child needs is not reachable by other users (e.g. under a 0700 folder): the "
                        "plain child keeps the harness's uid, so RLIMIT_NPROC does not hold as root")
            uid = -1
        user = {"user": uid, "group": uid, "extra_groups": []} if uid >= 0 else {}
    argv = _in_cgroup(argv, cgroup_dir) if cgroup_dir and not user else argv
    process_tree.kill_uid(uid)  # leftovers of an earlier harness crash would count against this slot's NPROC
    logs = tempfile.mkdtemp(prefix="ka-log-")
    start = time.perf_counter()
    try:
        with open(os.path.join(logs, "stdout"), "wb") as out, open(os.path.join(logs, "stderr"), "wb") as err:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                    cwd=spec.scratch_dir, start_new_session=True, close_fds=True,
                                    pass_fds=tuple(spec.pass_fds) + (progress_w,), **user)
    except BaseException:
        os.close(progress_r)
        raise
    finally:
        os.close(progress_w)  # the child holds the only write end: EOF once it and its processes are gone
    if cgroup_dir and user:  # a child that starts as the slot uid cannot move itself: moved before it imports torch
        _move_to_cgroup(proc.pid, cgroup_dir)
    return RunningChild(proc, kind, uid, logs, start, spec.limits.timeout_s, progress_r)


# --- the run child's cgroup v2 folder for `code_check` (kept apart: a per-child cgroup module replaces it) ---
def _in_cgroup(argv: list[str], cgroup_dir: str) -> list[str]:
    """`argv` run by a shell that first moves itself into `cgroup_dir`, so every process of the child's tree
    starts there (no window in which a fork escapes the sampling)."""
    return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup_dir] + list(argv)


def _move_to_cgroup(pid: int, cgroup_dir: str) -> None:
    with open(os.path.join(cgroup_dir, "cgroup.procs"), "w") as f:
        f.write(str(pid))
