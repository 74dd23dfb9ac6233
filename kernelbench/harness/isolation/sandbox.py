"""Running untrusted code in a child process: bubblewrap when present, otherwise a plain child with rlimits.

Candidates are written by a policy that is rewarded for passing the harness, so the harness treats them as
adversarial (DESIGN.md, "The harness: rules" 1; Kevin-32B arXiv 2507.11948 reports reward hacking in
practice). Every candidate runs in its own child; nothing the candidate does raises here: the child's fate
comes back as a `ChildOutcome`.

What the bubblewrap sandbox covers:
- read-only root filesystem, private `/tmp` and `/dev/shm`, `$HOME` hidden (tmpfs over both `$HOME` and `/tmp`,
  with only what the child needs re-bound read-only wherever it lives: the interpreter, its site-packages, the
  project and the sys.path entries; `bwrap.child_readonly_paths`), one writable scratch folder, fresh `/dev`
  and `/proc` (the command line: `kernelbench.harness.isolation.bwrap`);
- a progress pipe (`PROGRESS_FD_ENV`) on which the worker says it started and when untrusted code begins, so
  a child that never started is told apart from a candidate's fault (`ChildOutcome.progress`);
- no network (own net namespace), own pid/ipc/uts namespaces, a new session (no terminal injection);
- when the harness runs as root: an unprivileged uid per worker slot with all capabilities dropped, so
  `RLIMIT_NPROC` applies (it never does to uid 0) and a fork bomb stops; a slot's processes are all killed
  afterwards by signalling as that uid (`kernelbench.harness.isolation.process_tree`);
- rlimits: processes, file size, core dumps 0, address space (CPU only: the CUDA driver maps huge ranges);
- a cgroup per child (`kernelbench.harness.isolation.cgroups`), entered before the child execs anything: memory with
  tmpfs pages (every private tmpfs has a size too), pids, the CPU time of every task, a freezer for the whole
  tree and a kill of every task whatever its session, process group or clone flags; a start that cannot set
  them raises `cgroups.CgroupsUnavailable` (a `harness_error`) unless `Limits.allow_missing_cgroups`;
- once the run child's own threads run, no new thread or process at all (`child.spawn_guard.refuse_new_tasks`:
  RLIMIT_NPROC 0 and a seccomp filter), so parallelism hidden inside one call cannot be had by any spelling;
- environment cleared except a short allow-list (never API keys);
- wall-clock timeout; the outer process group and the pid namespace die with it.
What it does not cover: CPU-time fairness between concurrent children (each child's CPU time is read, not
capped), GPU memory of other processes, kernel exploits, or reading world-readable files on the host (the
root is bound read-only, not hidden).

Without bubblewrap (or `setpriv`) the child is a plain process with the same rlimits, uid drop and
environment but the host's filesystem and network: a warning is logged, and `require_sandbox` refuses.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Callable

from kernelbench.harness.isolation import bwrap, cgroups, process_tree, warm_child
from kernelbench.harness.child.progress import PROGRESS_FD_ENV
from kernelbench.harness.isolation.child_spec import (BWRAP, ENV_ALLOWED, RLIMITS, TAIL_CHARS,  # noqa: F401 (re-exported)
                                                      Bind, ChildOutcome, ChildSpec, Limits, WorkerEntry)
from kernelbench.harness.isolation.slots import MAX_SLOTS, SLOT_UID_BASE, SlotLease, TimingLease, give_tree, make_scratch  # noqa: F401 (re-exported)

log = logging.getLogger(__name__)


class SandboxUnavailable(RuntimeError):
    """`require_sandbox` is set but bubblewrap cannot run here (a harness setup fault, not a candidate's)."""


def sandbox_kind(require_sandbox: bool = False) -> str:
    """`bwrap` or `rlimits`; raises SandboxUnavailable when bubblewrap is required but absent."""
    if bwrap.find_bwrap():
        return BWRAP
    if require_sandbox:
        raise SandboxUnavailable("bubblewrap (bwrap) and setpriv are required (EvalConfig.require_sandbox) but unusable here")
    return RLIMITS


def child_path() -> str:
    """The PATH every child gets: this Python's folder, the CUDA toolkit's, the system's."""
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    return os.pathsep.join(dict.fromkeys([os.path.dirname(sys.executable), os.path.join(cuda_home, "bin"),
                                          "/usr/local/bin", "/usr/bin", "/bin"]))


def child_environment(spec: ChildSpec) -> dict[str, str]:
    """The whole environment a child of `spec` starts with (its progress descriptor aside)."""
    return _env(spec)


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

    def __init__(self, proc: subprocess.Popen | warm_child.WarmProcess, kind: str, uid: int, logs: str, start: float, timeout_s: float,
                 progress_fd: int = -1, cgroup: cgroups.Cgroup | None = None, limits_held: tuple[str, ...] = ()):
        self.proc, self.kind, self.uid, self.logs = proc, kind, uid, logs
        self.progress_fd = progress_fd
        self.start, self.deadline = start, start + timeout_s
        self.cgroup, self.limits_held = cgroup, limits_held
        self._frozen: set[int] = set()
        self._cgroup_frozen = False
        self._outcome: ChildOutcome | None = None

    def remaining_s(self) -> float:
        return max(0.0, self.deadline - time.perf_counter())

    def restart_clock(self) -> None:
        """Count the limit from now: a child started early that waited, untrusted code not yet run, for the
        parent's word (paired timing's run child, `timing.GO`) gets its whole limit from then on."""
        self.deadline = time.perf_counter() + (self.deadline - self.start)
        self.start = time.perf_counter()

    def extend_s(self, seconds: float) -> None:
        """Push the deadline back by `seconds` the parent made the child wait (paired timing's turn,
        `slots.TimingLease`): waiting for another evaluation's timing is not the candidate's time."""
        self.deadline += max(0.0, seconds)

    def freeze(self) -> bool:
        """Stop every task of this sandbox and return once the kernel says each one has stopped (True) or the
        wait ran out (False).

        Why: while the trusted reference is timed beside a live candidate (paired timing on CPU), a thread
        or process the candidate left running would steal the reference's cores and inflate the speedup.
        With the child's cgroup, its freezer: every task in it, whatever it does meanwhile (a task that keeps
        forking and exiting escaped the /proc scan below). Without one (`allow_missing_cgroups`): SIGSTOP to
        every descendant and every process of the slot's uid, rescanned (`process_tree.stop_all`)."""
        if self.cgroup is not None and cgroups.FREEZE in self.cgroup.held:
            self._cgroup_frozen = True
            return self.cgroup.freeze()
        self._frozen |= process_tree.stop_all(self.proc.pid, self.uid, self._frozen, FREEZE_WAIT_S)
        return True

    def thaw(self) -> None:
        if self._cgroup_frozen and self.cgroup is not None:
            self.cgroup.thaw()
            self._cgroup_frozen = False
        for pid in self._frozen | (process_tree.sandbox_pids(self.proc.pid, self.uid) if self._frozen else set()):
            process_tree.send_signal(pid, signal.SIGCONT)
        self._frozen = set()

    def cpu_ns(self) -> int | None:
        """CPU time every task of the child has used so far (its cgroup); None without one."""
        return self.cgroup.cpu_ns() if self.cgroup is not None and cgroups.CPU in self.cgroup.held else None

    def wait(self) -> ChildOutcome:
        """Wait for the child until its deadline (then kill it); clean up; the outcome, computed once."""
        if self._outcome is not None:
            return self._outcome
        if self._frozen or self._cgroup_frozen:
            self.thaw()
        timed_out = False
        try:
            self.proc.wait(timeout=self.remaining_s())
        except subprocess.TimeoutExpired:
            timed_out = True
            self._kill_all()
            self.proc.wait()
        wall = time.perf_counter() - self.start
        self._kill_all()
        rc = self.proc.returncode
        if self.kind == BWRAP and not getattr(self.proc, "exact_status", False) and 128 < rc < 128 + 65:  # bubblewrap reports a signal death of its child as 128 + signo
            rc = -(rc - 128)
        cg = self.cgroup
        self._outcome = ChildOutcome(returncode=rc, signal=-rc if rc < 0 else 0, timed_out=timed_out, wall_s=wall,
                                     stdout_tail=_tail(os.path.join(self.logs, "stdout")),
                                     stderr_tail=_tail(os.path.join(self.logs, "stderr")), sandbox=self.kind,
                                     limits_held=self.limits_held,
                                     memory_peak_bytes=cg.memory_peak_bytes() if cg is not None else 0,
                                     oom_kills=cg.oom_kills() if cg is not None else 0,
                                     progress=self._read_progress())
        shutil.rmtree(self.logs, ignore_errors=True)
        if cg is not None and not cg.remove():
            log.warning("the cgroup %s of a finished child could not be removed (a task would not die)", cg.name)
        return self._outcome

    def _kill_all(self) -> None:
        """Every task of the sandbox: its cgroup's (whatever session or group), its group's, its uid's."""
        if self.cgroup is not None:
            self.cgroup.kill()
        process_tree.kill_group(self.proc.pid)
        process_tree.kill_uid(self.uid)

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


def start_child(spec: ChildSpec, slot: SlotLease, require_sandbox: bool = False,
                on_cgroup: Callable[[str], None] | None = None) -> RunningChild:
    """Start `spec` sandboxed as `slot`'s uid (see `run_child`); the caller must `wait()` on the result.
    Raises `cgroups.CgroupsUnavailable` when the child's cgroup cannot hold its limits (see `Limits`).
    `on_cgroup(v2_dir)` runs once the child's cgroup exists and before anything of the child runs ("" without
    a v2 cgroup): the check of which code ran (`code_check`) opens its perf events on it there."""
    kind = sandbox_kind(require_sandbox)
    uid = slot.uid
    env = _env(spec)
    progress_r, progress_w = os.pipe()
    env[PROGRESS_FD_ENV] = str(progress_w)
    if kind == BWRAP:
        argv = _prlimit_argv(spec.limits) + bwrap.bwrap_argv(spec, uid, env)
        user = {}
    else:
        argv, uid = _plain_argv(spec, uid)
        user = {"user": uid, "group": uid, "extra_groups": []} if uid >= 0 else {}
    process_tree.kill_uid(uid)  # leftovers of an earlier harness crash would count against this slot's NPROC
    cg = None
    try:
        cg = _cgroup(spec.limits, uid if user else -1)
        if on_cgroup is not None:
            on_cgroup(cg.v2_dir if cg is not None else "")
    except BaseException:
        os.close(progress_r)
        os.close(progress_w)
        if cg is not None:
            cg.remove()
        raise
    if cg is not None and user:  # the shim writes cgroup.procs as root: the uid drop follows it
        argv, user = _setpriv_argv(uid) + argv, {}
    held = (cg.held if cg is not None else ()) + ((cgroups.TMPFS,) if kind == BWRAP and spec.limits.tmpfs_mb > 0 else ())
    argv = (cg.shim_argv() if cg is not None else []) + argv
    logs = tempfile.mkdtemp(prefix="ka-log-")
    start = time.perf_counter()
    try:
        with open(os.path.join(logs, "stdout"), "wb") as out, open(os.path.join(logs, "stderr"), "wb") as err:
            if warm_child.serves(spec) and uid >= 0:  # forked from a warm worker: the same sandbox, no start
                # (never a job that keeps the harness's uid: it could signal or trace the zygote)
                proc = warm_child.start(spec, kind, uid, env, cg, out.fileno(), err.fileno(), progress_w)
            else:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                        cwd=spec.scratch_dir, start_new_session=True, close_fds=True,
                                        pass_fds=tuple(spec.pass_fds) + (progress_w,), **user)
    except BaseException:
        os.close(progress_r)
        if cg is not None:
            cg.remove()
        raise
    finally:
        os.close(progress_w)  # the child holds the only write end: EOF once it and its processes are gone
    return RunningChild(proc, kind, uid, logs, start, spec.limits.timeout_s, progress_r, cg,
                        tuple(h for h in cgroups.LIMIT_NAMES if h in held))


def _plain_argv(spec: ChildSpec, uid: int) -> tuple[list[str], int]:
    """The plain child's command line (no bubblewrap) and the uid it may drop to (-1: none)."""
    log.warning("bubblewrap unavailable: running the candidate in a plain child with rlimits only "
                "(the host filesystem and network stay reachable)")
    needed = [sys.executable, spec.scratch_dir + "/x"] + [b.src + "/x" for b in spec.binds]
    if uid >= 0 and not all(process_tree.reachable_by(p, uid) for p in needed):
        log.warning("a path the child needs is not reachable by other users (e.g. under a 0700 folder): the "
                    "plain child keeps the harness's uid, so RLIMIT_NPROC does not hold as root")
        uid = -1
    return _prlimit_argv(spec.limits) + list(spec.argv), uid


def _setpriv_argv(uid: int) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


def _cgroup(limits: Limits, drop_uid: int) -> cgroups.Cgroup | None:
    """The child's cgroup (`kernelbench.harness.isolation.cgroups`); None where there is none and that is allowed. A plain
    child dropping to `drop_uid` needs `setpriv` after the shim (the shim must run as root)."""
    required = not cgroups.allow_missing(limits.allow_missing_cgroups)
    cg = cgroups.create(limits.cgroup_memory_mb << 20, limits.max_processes, required)
    if drop_uid >= 0 and not shutil.which("setpriv"):
        cg.remove()
        if required:
            raise cgroups.CgroupsUnavailable("a plain child dropping to a slot's uid needs setpriv to enter its "
                                             "cgroup first; set EvalConfig.allow_missing_cgroups to run without")
        return None
    return cg if cg.dirs else None
