"""Warm workers: the worker's children forked from an interpreter that imported torch once (a zygote,
`kernelbench.harness.child.zygote`), instead of a fresh interpreter per child.

Why: an evaluation starts three sandboxed children (compile, reference, run), and each spent most of its life
starting Python and importing torch (`scripts/bench_harness.py`: a warm-cache evaluation was 2.8-5.8x a bare
`import torch`, of which the timed trials were 0.16 s). A forked child starts with all of that done.

What does not change (each point is what the fresh child had, now done by trusted code after the fork):
- every job is its own process, forked from the zygote, never reused: nothing a job changes in its memory,
  its modules, its environment or its threads reaches the zygote or a later job (copy-on-write);
- under bubblewrap, every job gets its own sandbox: the parent starts bubblewrap per job exactly as for a
  fresh child (same mounts, private `/tmp` and `/dev/shm` of a bounded size, no network, own pid namespace)
  around a placeholder process, and the job's process joins that sandbox's namespaces and root (`setns`,
  `chroot`) before anything of the job runs; the sandbox is killed with the job, so a file planted in `/tmp`
  dies with it;
- the job's cgroup (joined first), its rlimits, its session, the slot's uid with no capability, its own
  descriptors only (at the numbers the parent gave them) and the job's environment;
- the zygote never touches CUDA (the GPU run child initialises it after the fork) and never sees a job's
  content: it forks on the parent's word and reports the exit status it reaps, so the verdict's facts about
  the child's end come from trusted code.
Which jobs: the worker's (`ChildSpec.worker`), when the harness runs as root (the job's process drops to the
slot's uid; as the harness's own uid a candidate could signal or trace the zygote) and
`EvalConfig.warm_workers` is on. Environment entries read when a library loads (`OMP_NUM_THREADS`,
`GLIBC_TUNABLES`, ...) must be the zygote's own: one zygote per distinct set of them (`key`); those read later
(`LATE_ENV`) are set per job. Not covered: the zygote's address-space layout is every job's (one fork
server's ASLR), which tells a candidate nothing about another job's data.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace

from kernelbench.harness.isolation import bwrap, cgroups, process_tree
from kernelbench.harness.child import launch
from kernelbench.harness.child.progress import PROGRESS_FD_ENV
from kernelbench.harness.isolation.child_spec import BWRAP, ChildSpec

LATE_ENV = frozenset({"TORCH_EXTENSIONS_DIR", "MAX_JOBS", "TORCH_CUDA_ARCH_LIST", "CUPY_CACHE_DIR",
                      "CUPY_CACHE_SAVE_CUDA_SOURCE", "TRITON_CACHE_DIR", "CUDA_VISIBLE_DEVICES",
                      "NVIDIA_TF32_OVERRIDE", "KMP_BLOCKTIME", "TRITON_INTERPRET", PROGRESS_FD_ENV})
"""Read after the fork, by code the job runs (torch's extension builder, CuPy, Triton (which the zygote does not
import), the CUDA driver at its first call, clang's OpenMP runtime when a candidate's library loads it): set
per job. Every other entry is
part of the zygote's key."""
SANDBOX_READY_S = 30.0
"""How long the parent waits for bubblewrap to set up a job's sandbox (it takes milliseconds)."""
OFF_ENV = "KERNEL_AGENT_WARM_WORKERS"
"""`0` turns warm workers off for the whole process (as `EvalConfig.warm_workers=False` does per evaluation)."""


class WarmWorkerLost(RuntimeError):
    """No trusted process said how a job ended (its keeper was killed and its zygote had gone): a harness fault
    (`harness_error`), never the candidate's."""


def serves(spec: ChildSpec) -> bool:
    """Whether a warm worker starts this child (see the module's docstring for when)."""
    return (spec.worker is not None and os.geteuid() == 0 and os.environ.get(OFF_ENV, "1") != "0"
            and not os.environ.get(launch.CHILD_PYTHON_ENV))


def key(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in env.items() if k not in LATE_ENV))


class Zygote:
    """One zygote process and its control socket (requests from any thread, one message each)."""

    def __init__(self, env: dict[str, str]):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log = tempfile.NamedTemporaryFile(prefix="ka-zygote-", suffix=".log", delete=False)
        boot = (f"import sys; sys.path.insert(0, {launch.PROJECT_ROOT!r}); "
                f"from kernelbench.harness.child import zygote; zygote.serve({theirs.fileno()})")
        self.proc = subprocess.Popen([sys.executable, "-I", "-c", boot], env=env, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT, pass_fds=(theirs.fileno(),),
                                     start_new_session=True, cwd="/")
        theirs.close()
        self.control = ours
        self.lock = threading.Lock()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, request: dict, fds: list[int]) -> socket.socket:
        """Send one job; our end of its reply socket (the keeper's pid, then the job's wait status)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with self.lock:
                socket.send_fds(self.control, [json.dumps(request).encode()], [theirs.fileno(), *fds])
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        return ours

    def close(self) -> None:
        self.control.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        os.unlink(self.log.name)


_ZYGOTES: dict[tuple, Zygote] = {}
_LOCK = threading.Lock()


def _forget_after_fork() -> None:
    """A forked copy of this process (a Ray or multiprocessing worker) is not its zygotes' parent: it starts its
    own when it needs one, and never closes the parent's."""
    global _LOCK
    _ZYGOTES.clear()
    _LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
atexit.register(lambda: stop_all())


def zygote(env: dict[str, str], failed: Zygote | None = None) -> Zygote:
    """The running zygote for `env`'s import-time entries, started (or restarted) when needed; `failed`: one
    whose control socket refused a request, replaced even if its process has not finished exiting yet."""
    k = key(env)
    with _LOCK:
        z = _ZYGOTES.get(k)
        if z is None or z is failed or not z.alive():
            if z is not None:
                z.close()
            z = _ZYGOTES[k] = Zygote({name: value for name, value in k})
        return z


def stop_all() -> None:
    """End every zygote of this process (tests; a process's zygotes also end when it exits)."""
    with _LOCK:
        for z in _ZYGOTES.values():
            z.close()
        _ZYGOTES.clear()


class WarmProcess:
    """A job's process in a warm worker, as `sandbox.RunningChild` uses a `subprocess.Popen`: `pid` (the job's
    process, leader of its own session), `wait(timeout)`, `returncode` (negative: killed by that signal)."""

    exact_status = True
    """The status is the job's own (bubblewrap reports a signal death as 128 + signo; this does not)."""

    def __init__(self, reply: socket.socket, pid: int, sandbox: subprocess.Popen | None, zygote_log: str):
        self.reply, self.pid, self.sandbox, self.zygote_log = reply, pid, sandbox, zygote_log
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        """The job's exit status as the keeper (or, when the keeper was killed, the zygote) reaped it."""
        if self.returncode is not None:
            return self.returncode
        ready, _, _ = select.select([self.reply], [], [], timeout)
        if not ready:
            raise subprocess.TimeoutExpired("warm worker job", timeout or 0.0)
        try:
            msg = self.reply.recv(256)
        except OSError:
            msg = b""
        self._close()
        if not msg:  # neither the keeper nor the zygote said how the job ended
            raise WarmWorkerLost(f"the warm worker serving pid {self.pid} went away (its log: {self.zygote_log})")
        status = int(json.loads(msg)["status"])
        self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        return self.returncode

    def _close(self) -> None:
        self.reply.close()
        if self.sandbox is not None:  # the placeholder and its sandbox go with the job
            process_tree.kill_group(self.sandbox.pid)
            self.sandbox.wait()


def start(spec: ChildSpec, kind: str, uid: int, env: dict[str, str], cg: cgroups.Cgroup | None, stdout: int,
          stderr: int, progress_w: int) -> WarmProcess:
    """Start `spec`'s worker job in a warm worker: under bubblewrap, first its sandbox (the placeholder), then
    the request; returns once the job's process exists."""
    sandbox, sandbox_pid = _sandbox(spec, uid, env, cg) if kind == BWRAP else (None, 0)
    try:
        mb = 1024 * 1024
        limits = spec.limits
        request = {"scratch": spec.worker.scratch, "prebuild": spec.worker.prebuild, "env": env, "uid": uid,
                   "rlimits": {"nproc": limits.max_processes, "fsize": limits.max_file_mb * mb, "core": 0,
                               "as": limits.memory_limit_mb * mb if limits.memory_limit_mb > 0 else -1},
                   "cgroup_procs": [os.path.join(d, "cgroup.procs") for d in (cg.dirs if cg is not None else ())],
                   "sandbox_pid": sandbox_pid,
                   "fd_targets": [1, 2, *spec.pass_fds, progress_w]}
        fds = [stdout, stderr, *spec.pass_fds, progress_w]
        z = zygote(env)
        try:
            reply = z.request(request, fds)
        except OSError:  # it died since it was last seen alive: once more, with a fresh one
            z = zygote(env, failed=z)
            reply = z.request(request, fds)
        ready, _, _ = select.select([reply], [], [], SANDBOX_READY_S)
        msg = reply.recv(256) if ready else b""
        if not msg:
            reply.close()
            raise WarmWorkerLost(f"the warm worker did not start the job (its log: {z.log.name})")
        return WarmProcess(reply, int(json.loads(msg)["pid"]), sandbox, z.log.name)
    except BaseException:
        if sandbox is not None:
            process_tree.kill_group(sandbox.pid)
            sandbox.wait()
        raise


PLACEHOLDER = "printf R && exec sleep 2147483647"
"""The sandbox's only process until the job joins: says it is up on its stdout (bubblewrap has set up every
mount by then), then waits to be killed with the job."""


def _sandbox(spec: ChildSpec, uid: int, env: dict[str, str], cg: cgroups.Cgroup | None) -> tuple[subprocess.Popen, int]:
    """Bubblewrap around a placeholder, as for a fresh child of `spec` (same mounts, binds, namespaces), in the
    job's cgroup; returns it and the host pid of the sandbox's first process (whose namespaces the job joins)."""
    ready_r, ready_w = os.pipe()
    info_r, info_w = os.pipe()
    errors = tempfile.TemporaryFile()
    try:
        holder = replace(spec, argv=("/bin/sh", "-c", PLACEHOLDER), pass_fds=())
        argv = bwrap.bwrap_argv(holder, uid, env)
        argv[1:1] = ["--info-fd", str(info_w)]
        argv = (cg.shim_argv() if cg is not None else []) + argv
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=ready_w, stderr=errors, env=env,
                                cwd=spec.scratch_dir, start_new_session=True, close_fds=True, pass_fds=(info_w,))
    except BaseException:
        for fd in (ready_r, info_r):
            os.close(fd)
        errors.close()
        raise
    finally:
        os.close(ready_w)
        os.close(info_w)
    try:
        deadline = time.monotonic() + SANDBOX_READY_S
        ready, _, _ = select.select([ready_r], [], [], SANDBOX_READY_S)
        up = bool(ready) and os.read(ready_r, 1) == b"R"
        info = _read_all(info_r, deadline) if up else b""
        pid = int(json.loads(info)["child-pid"]) if info else 0
        if not up or pid <= 0:
            process_tree.kill_group(proc.pid)
            proc.wait()
            errors.seek(0)
            raise RuntimeError("bubblewrap did not set up a warm worker's sandbox: "
                               + errors.read().decode(errors="replace")[-600:])
        return proc, pid
    finally:
        os.close(ready_r)
        os.close(info_r)
        errors.close()


def _read_all(fd: int, deadline: float) -> bytes:
    data = b""
    while len(data) < 4096:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(fd, 4096) if ready else b""
        if not chunk:
            return data
        data += chunk
    return data
