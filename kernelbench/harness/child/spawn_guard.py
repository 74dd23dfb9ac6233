"""In the sandboxed child: once its own threads run, the kernel refuses it every new thread and process.

Imported by the run child before any candidate code (`_CAPTURED` takes what it calls then).
"""

from __future__ import annotations

import _thread
import ctypes
import os
import platform
import resource
import struct


NEW_TASK_SYSCALLS_X86_64 = (56, 57, 58, 435)
"""clone, fork, vfork, clone3: every way a thread or process comes to be on x86-64 (glibc's pthread_create,
C11 thrd_create, std::thread, posix_spawn, _Fork and system() all end in one of them)."""


def refuse_new_tasks() -> dict[str, bool]:
    """In a sandboxed child, once its own threads are running (torch's pools, the OpenMP team, after the
    candidate's import and `__init__`): make the kernel refuse every further thread and process of it.

    Why: the timing counts one thread of work; a thread started and joined inside one call is never seen
    by a thread count taken between phases (C11 `thrd_create`, `clone`, a c10 thread pool: 1.6x from two
    hidden threads), and a list of spellings always misses one. Covers, by the kernel rather than by name:
    - `RLIMIT_NPROC` set to 0: the kernel counts threads against the limit of their real uid, and the
      child runs as its slot's own unprivileged uid, so any clone fails with EAGAIN (not for uid 0);
    - a seccomp filter (x86-64, all threads of the process: TSYNC) that answers clone, clone3, fork and
      vfork with EAGAIN, for children that kept uid 0 (the plain fallback child when the slot uid cannot
      reach the files it needs) and for 32-bit/x32 entry points (denied outright).
    Existing threads keep running. Not covered: work queued to threads that existed before the cap
    (torch's intra-op pool and the OpenMP team are the harness's, sized by `EvalConfig.threads`).
    Returns which layers took effect; `refused` is whether a probe thread failed to start. The functions it
    calls were captured when this module was imported, before any candidate code (`_CAPTURED`)."""
    setrlimit, start_thread, getuid = _CAPTURED["setrlimit"], _CAPTURED["start_thread"], _CAPTURED["getuid"]
    done = {"rlimit": False, "seccomp": False, "refused": False}
    try:
        setrlimit(resource.RLIMIT_NPROC, (0, 0))
        done["rlimit"] = getuid() != 0
    except (OSError, ValueError):
        pass
    done["seccomp"] = _seccomp_refuse_clone()
    try:
        start_thread(lambda: None, ())
    except RuntimeError:
        done["refused"] = True
    return done


_CAPTURED = {"setrlimit": resource.setrlimit, "start_thread": _thread.start_new_thread, "getuid": os.getuid,
             "libc": ctypes.CDLL(None, use_errno=True), "machine": platform.machine()}
"""What `refuse_new_tasks` calls, taken at import (the run child imports this module before the candidate),
so a candidate that rebinds `resource.setrlimit` or `ctypes.CDLL` does not disarm it."""


def _seccomp_refuse_clone() -> bool:
    """Install a classic-BPF seccomp filter on every thread of this process (x86-64 only) that fails the
    task-creating syscalls with EAGAIN; False where it cannot (another architecture, no seccomp)."""
    if _CAPTURED["machine"] != "x86_64":
        return False
    ld_w_abs, jeq_k, ret_k = 0x20, 0x15, 0x06
    allow, eagain, kill_errno = 0x7FFF0000, 0x00050000 | 11, 0x00050000 | 1  # RET_ALLOW, RET_ERRNO|EAGAIN/EPERM
    arch_x86_64, x32_bit = 0xC000003E, 0x40000000

    def stmt(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
        return struct.pack("HBBI", code, jt, jf, k)

    calls = NEW_TASK_SYSCALLS_X86_64
    prog = [stmt(ld_w_abs, 4), stmt(jeq_k, arch_x86_64, 1, 0), stmt(ret_k, kill_errno),  # other ABIs: nothing
            stmt(ld_w_abs, 0), stmt(0x35, x32_bit, 0, 1), stmt(ret_k, kill_errno)]  # jge: x32 numbers
    for i, nr in enumerate(calls):
        prog.append(stmt(jeq_k, nr, len(calls) - i, 0))  # to the EAGAIN return after the allow
    prog += [stmt(ret_k, allow), stmt(ret_k, eagain)]
    code = b"".join(prog)
    buf = ctypes.create_string_buffer(code, len(code))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.addressof(buf))
    libc = _CAPTURED["libc"]
    pr_set_no_new_privs, sys_seccomp, set_mode_filter, tsync = 38, 317, 1, 1
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
        return False
    rc = libc.syscall(ctypes.c_long(sys_seccomp), ctypes.c_long(set_mode_filter), ctypes.c_long(tsync),
                      ctypes.byref(fprog))
    return rc == 0
