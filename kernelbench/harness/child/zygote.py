"""The warm worker (a zygote): an interpreter that has imported torch and the worker's code once and forks one
fresh process per job, so a job no longer pays for starting Python and importing torch (the parent's side,
what it asks for and why: `kernelbench.harness.isolation.warm_child`).

Runs only trusted code: this module, the worker's modules and what they import. It never reads a job (the
job's file is read by the forked process, as the fresh child read it), never runs candidate code, never
initialises CUDA (a forked CUDA context is broken: the job's process initialises it after the fork), and has
no thread of its own at a fork beyond those the imports left idle.

For each request (one message on the control socket: the JSON below and the file descriptors it names) it
forks a keeper, which
1. enters the job's cgroup (before anything else of the job exists, as the parent's shim does for a fresh
   child) and, under bubblewrap, the namespaces of a sandbox the parent started for this job (mount, pid,
   network, ipc, uts, cgroup; `setns`) and its root (`chroot`), so the job sees exactly what a fresh child
   there would: bubblewrap's mounts, private `/tmp` and `/dev/shm`, no network;
2. forks the job's process (in that pid namespace), reports its pid, waits for it, reports its wait status
   and leaves with it.
The job's process starts its own session, takes the rlimits, drops every capability and becomes the slot's
uid (as `prlimit` and `setpriv` did), keeps only the descriptors the parent passed (at the numbers the parent
gave them), takes the job's environment, reseeds `random`, and runs `worker.main` on the job's folder.
The zygote reaps each keeper and sends its wait status on the job's reply socket too (the only status when the
keeper was killed, at a timeout): the job's outcome is known to trusted code only, and a job in flight
outlives a zygote that dies.

Request: {"scratch", "prebuild", "env", "uid", "rlimits": {"nproc", "fsize", "core", "as"}, "cgroup_procs":
[paths], "sandbox_pid": host pid of the sandbox's first process or 0, "fd_targets": [numbers]}; descriptors:
the reply socket, then one per `fd_targets` entry (stdout and stderr at 1 and 2, the job's pipes at theirs).
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import random
import resource
import select
import signal
import socket
import sys
import traceback

# Imports inside functions: the sandbox's import budget: the zygote imports what every job needs once, a job's own
# modules load in the forked child.

SETUP_FAILED = 125
"""Exit status of a keeper or job process whose setup failed before the worker ran (the worker never said
`S` on its progress pipe: the parent reports a harness fault, never the candidate's)."""
MAX_REQUEST = 1 << 16
MAX_FDS = 64
NAMESPACES = ("ipc", "uts", "net", "cgroup", "pid", "mnt")
"""Entered in this order: the mount namespace last (after it, /proc is the sandbox's)."""
HIGH_FD = 1000
"""Passed descriptors are parked at and above this number while everything else is closed."""
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, PR_SET_NO_NEW_PRIVS = 24, 47, 4, 38

_libc = ctypes.CDLL(None, use_errno=True)


def serve(control_fd: int) -> None:
    """Serve requests until the parent closes the control socket (it exited), then leave."""
    from kernelbench.harness.child import worker  # noqa: F401  torch and the worker's code, imported once here

    _import_lazy_modules()
    control = socket.socket(fileno=control_fd)
    keepers: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (keeper pid, reply socket)
    while True:
        ready, _, _ = select.select([control, *keepers], [], [])
        for r in ready:
            if r is control:
                try:
                    msg, fds, _, _ = socket.recv_fds(control, MAX_REQUEST, MAX_FDS)
                except OSError:
                    msg, fds = b"", []
                if not msg:
                    os._exit(0)
                _start(msg, fds, keepers)
            else:
                pid, reply = keepers.pop(r)
                _, status = os.waitpid(pid, 0)
                os.close(r)
                try:
                    reply.send(json.dumps({"status": status}).encode())
                except OSError:
                    pass
                reply.close()


LAZY_MODULES = ("torch.fx.experimental.symbolic_shapes", "torch.utils.flop_counter", "torch.utils.cpp_extension")
"""Modules torch or the worker import on first use inside a job, imported here once instead of in every job:
`symbolic_shapes` (and sympy) on the first `torch._check` of a meta tensor, which the reference's size check
makes (`reference._refuse_oversized`: 0.25 s of every reference on a 2-core VM); `flop_counter` (and triton,
where installed) for the reference's count of work (`work.count_work`, 0.13 s here, about 1 s with triton);
`cpp_extension` for the run child's kernel-call count. None of them initialises CUDA (the zygote must not)."""


def _import_lazy_modules() -> None:
    import importlib

    for name in LAZY_MODULES:
        importlib.import_module(name)


def _start(msg: bytes, fds: list[int], keepers: dict) -> None:
    if not fds:
        return
    reply = socket.socket(fileno=fds[0])
    try:
        request = json.loads(msg)
    except ValueError:
        for fd in fds[1:]:
            os.close(fd)
        reply.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = SETUP_FAILED
        try:
            _keeper(request, fds)
        except BaseException:
            _say(traceback.format_exc())
        finally:
            os._exit(code)
    for fd in fds[1:]:  # the job's copies live in the keeper now: the parent sees EOF once the job is gone
        os.close(fd)
    keepers[os.pidfd_open(pid)] = (pid, reply)


def _say(text: str) -> None:
    try:
        os.write(2, text.encode(errors="replace")[-4000:])
    except OSError:
        pass


def _keeper(request: dict, fds: list[int]) -> None:
    reply_fd, passed = fds[0], fds[1:]
    _close_all_but(set(fds))
    if len(passed) > 1:  # the keeper's own faults go to the job's stderr (its tail reaches the parent)
        os.dup2(passed[1], 2)
    for procs in request["cgroup_procs"]:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    if request["sandbox_pid"]:
        _enter(int(request["sandbox_pid"]))
    pid = os.fork()
    if pid == 0:
        os.close(reply_fd)
        try:
            _job(request, passed)
        except BaseException:
            _say(traceback.format_exc())
        os._exit(SETUP_FAILED)
    for fd in passed:
        os.close(fd)
    reply = socket.socket(fileno=reply_fd)
    reply.send(json.dumps({"pid": pid}).encode())
    _, status = os.waitpid(pid, 0)
    try:  # said here too, so a job outlives its zygote: the parent takes the first status it gets
        reply.send(json.dumps({"status": status}).encode())
    except OSError:
        pass
    if os.WIFSIGNALED(status):  # leave the way the job did, so the zygote reports the same status
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else SETUP_FAILED)


def _enter(sandbox_pid: int) -> None:
    """Join the namespaces and root of the sandbox whose first process is `sandbox_pid` (bubblewrap's)."""
    root = os.open(f"/proc/{sandbox_pid}/root", os.O_RDONLY | os.O_DIRECTORY)
    own = {n: os.stat(f"/proc/self/ns/{n}").st_ino for n in NAMESPACES if os.path.exists(f"/proc/self/ns/{n}")}
    for name in NAMESPACES:
        path = f"/proc/{sandbox_pid}/ns/{name}"
        if name not in own or os.stat(path).st_ino == own[name]:
            continue  # not made for this sandbox (a cgroup namespace where none could be)
        fd = os.open(path, os.O_RDONLY)
        try:
            if _libc.setns(fd, 0) != 0:
                raise OSError(ctypes.get_errno(), f"setns({name}) failed")
        finally:
            os.close(fd)
    os.fchdir(root)
    os.chroot(".")
    os.close(root)


def _job(request: dict, passed: list[int]) -> None:
    """The job's process: becomes what a fresh sandboxed child was, then runs the worker (never returns)."""
    os.setsid()
    limits = request["rlimits"]
    for name, which in (("nproc", resource.RLIMIT_NPROC), ("fsize", resource.RLIMIT_FSIZE),
                        ("core", resource.RLIMIT_CORE), ("as", resource.RLIMIT_AS)):
        if limits.get(name, -1) >= 0:
            resource.setrlimit(which, (limits[name], limits[name]))
    _descriptors(passed, [int(t) for t in request["fd_targets"]])
    # as bubblewrap sets for every sandbox: no exec of a setuid or file-capability program can give back
    # what the uid drop below takes (the fresh children had it from bubblewrap)
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    uid = int(request["uid"])
    if uid >= 0:
        _drop_privileges(uid)
    scratch = request["scratch"]
    os.chdir(scratch)
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in request["env"].items()})
    sys.argv = ["-c"]
    random.seed()  # every fork would otherwise share the zygote's stream
    from kernelbench.harness.child import prebuild, worker

    if request["prebuild"]:
        prebuild.start(scratch)
    worker.main(["worker", scratch])


def _descriptors(passed: list[int], targets: list[int]) -> None:
    """Keep exactly the passed descriptors, at the parent's numbers; stdin is /dev/null."""
    if len(passed) != len(targets):
        raise ValueError("descriptors and their numbers disagree")
    parked = [fcntl.fcntl(fd, fcntl.F_DUPFD, HIGH_FD + i) for i, fd in enumerate(passed)]
    _close_all_but(set(parked))
    for fd, target in zip(parked, targets):
        os.dup2(fd, target)
        os.close(fd)
    if 0 not in targets:
        null = os.open("/dev/null", os.O_RDONLY)
        if null != 0:
            os.dup2(null, 0)
            os.close(null)


def _close_all_but(keep: set[int]) -> None:
    for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:  # the listing's own descriptor, already gone
                pass


def _drop_privileges(uid: int) -> None:
    """As `setpriv --reuid --regid --clear-groups --inh-caps=-all --bounding-set=-all`: no capability can come
    back (bounding set emptied, ambient cleared), then the slot's uid and gid (which empties the rest)."""
    cap = 0
    while _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (uid, uid, uid):
        raise OSError("the uid drop did not hold")


if __name__ == "__main__":
    serve(int(sys.argv[1]))
