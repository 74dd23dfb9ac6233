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


def refuse_new_tasks(exec_memory: bool = False) -> dict[str, bool]:
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
    With `exec_memory` (strict CPU runs) the same filter refuses new executable memory (`EXEC_MEMORY_RULES`).
    Returns which layers took effect; `refused` is whether a probe thread failed to start. The functions it
    calls were captured when this module was imported, before any candidate code (`_CAPTURED`)."""
    setrlimit, start_thread, getuid = _CAPTURED["setrlimit"], _CAPTURED["start_thread"], _CAPTURED["getuid"]
    done = {"rlimit": False, "seccomp": False, "refused": False, "exec_memory": False}
    try:
        setrlimit(resource.RLIMIT_NPROC, (0, 0))
        done["rlimit"] = getuid() != 0
    except (OSError, ValueError):
        pass
    done["seccomp"] = _seccomp_refuse_clone(exec_memory)
    done["exec_memory"] = exec_memory and done["seccomp"]
    try:
        start_thread(lambda: None, ())
    except RuntimeError:
        done["refused"] = True
    return done


_CAPTURED = {"setrlimit": resource.setrlimit, "start_thread": _thread.start_new_thread, "getuid": os.getuid,
             "libc": ctypes.CDLL(None, use_errno=True), "machine": platform.machine()}
"""What `refuse_new_tasks` calls, taken at import (the run child imports this module before the candidate),
so a candidate that rebinds `resource.setrlimit` or `ctypes.CDLL` does not disarm it."""


KEYRING_SYSCALLS_X86_64 = {248: "add_key", 249: "request_key", 250: "keyctl"}
"""The kernel's key management. Why refused: keyrings are not in any namespace the sandbox makes; a slot uid's user
keyring (`@u`) is the host kernel's, outlives the sandbox, its cgroup and the harness process, and a key can be
made readable by every uid, so one job could leave a key that a later job, another slot's child or another
evaluation reads (measured: a run child read the key its own compile child planted, and a later evaluation in a
new process read both). No candidate needs them."""


KEYRING_FILTER_EXPECTED = platform.machine() == "x86_64"
"""Where the filter must hold: a child that cannot install it there is a harness fault, not a sandbox without it."""


def refuse_keyrings() -> bool:
    """From the start of every sandboxed child, before any candidate code: the kernel's key management syscalls
    fail with EPERM in this process, its threads and everything it starts (`KEYRING_SYSCALLS_X86_64`). True
    when the filter holds; False where it cannot be installed (not x86-64)."""
    if _CAPTURED["machine"] != "x86_64":
        return False
    return _install(_program(False, deny=tuple(KEYRING_SYSCALLS_X86_64), tasks=False))


def _seccomp_refuse_clone(exec_memory: bool = False) -> bool:
    """Install a classic-BPF seccomp filter on every thread of this process (x86-64 only) that fails the
    task-creating syscalls with EAGAIN and, with `exec_memory`, new executable memory with EPERM
    (`EXEC_MEMORY_RULES`); False where it cannot (another architecture, no seccomp)."""
    if _CAPTURED["machine"] != "x86_64":
        return False
    return _install(_program(exec_memory))


def _install(prog: list[tuple]) -> bool:
    """Install `prog` as a seccomp filter on every thread of this process (filters stack: each one installed
    later narrows what the earlier ones allow)."""
    code = _assemble(prog)
    buf = ctypes.create_string_buffer(code, len(code))
    count = len(code) // 8

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(count, ctypes.addressof(buf))
    libc = _CAPTURED["libc"]
    pr_set_no_new_privs, sys_seccomp, set_mode_filter, tsync = 38, 317, 1, 1
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
        return False
    rc = libc.syscall(ctypes.c_long(sys_seccomp), ctypes.c_long(set_mode_filter), ctypes.c_long(tsync),
                      ctypes.byref(fprog))
    return rc == 0


EXEC_MEMORY_RULES = {"deny": {25: "mremap", 59: "execve", 322: "execveat", 216: "remap_file_pages",
                              311: "process_vm_writev"},
                     "prot_exec": {9: "mmap", 10: "mprotect", 329: "pkey_mprotect"}, "shm_exec": {30: "shmat"}}
"""x86-64 syscalls refused (EPERM) once executable memory is refused: mmap, mprotect and pkey_mprotect asking
for PROT_EXEC, shmat asking for SHM_EXEC; mremap (it could move existing code to an address a snapshot of the
mappings attributed to other code; glibc's realloc falls back to malloc and copy when it fails), execve and
execveat (a new image), remap_file_pages and process_vm_writev. Why: the parent attributes each sampled
instruction to what `/proc/<pid>/maps` shows at its address (`code_attribution`); with no executable memory
created after the guard, any snapshot taken after it shows what was mapped at every later sample."""
PROT_EXEC, SHM_EXEC = 0x4, 0o100000


def _program(exec_memory: bool, deny: tuple[int, ...] = (), tasks: bool = True) -> list[tuple]:
    """The filter as (opcode, k, true label, false label) rows and ("label", name) marks: new tasks refused
    (`tasks`), the syscalls in `deny` refused (EPERM), new executable memory refused (`exec_memory`)."""
    ld_w_abs, jeq_k, jset_k, ret_k = 0x20, 0x15, 0x45, 0x06
    allow, eagain, eperm = 0x7FFF0000, 0x00050000 | 11, 0x00050000 | 1  # RET_ALLOW, RET_ERRNO|EAGAIN/EPERM
    arch_x86_64, x32_bit, prot_arg_low = 0xC000003E, 0x40000000, 32  # seccomp_data.args[2], low word
    prog: list[tuple] = [(ld_w_abs, 4, None, None), (jeq_k, arch_x86_64, "native", "eperm"), ("label", "native"),
                         (ld_w_abs, 0, None, None), (0x35, x32_bit, "eperm", "x64")]  # jge: x32 numbers
    prog.append(("label", "x64"))
    prog += [(jeq_k, nr, "eagain", None) for nr in (NEW_TASK_SYSCALLS_X86_64 if tasks else ())]
    prog += [(jeq_k, nr, "eperm", None) for nr in deny]
    if exec_memory:
        prog += [(jeq_k, nr, "eperm", None) for nr in EXEC_MEMORY_RULES["deny"]]
        prog += [(jeq_k, nr, "prot", None) for nr in EXEC_MEMORY_RULES["prot_exec"]]
        prog += [(jeq_k, nr, "shm", None) for nr in EXEC_MEMORY_RULES["shm_exec"]]
    prog.append((ret_k, allow, None, None))
    if exec_memory:
        prog += [("label", "prot"), (ld_w_abs, prot_arg_low, None, None), (jset_k, PROT_EXEC, "eperm", "allow"),
                 ("label", "shm"), (ld_w_abs, prot_arg_low, None, None), (jset_k, SHM_EXEC, "eperm", "allow")]
    prog += [("label", "allow"), (ret_k, allow, None, None), ("label", "eagain"), (ret_k, eagain, None, None),
             ("label", "eperm"), (ret_k, eperm, None, None)]
    return prog


def _assemble(prog: list[tuple]) -> bytes:
    """sock_filter rows; jump labels resolved to forward offsets (None: fall through)."""
    rows, labels = [], {}
    for item in prog:
        if item[0] == "label":
            labels[item[1]] = len(rows)
        else:
            rows.append(item)
    out = []
    for i, (code, k, jt, jf) in enumerate(rows):
        t = labels[jt] - i - 1 if jt else 0
        f = labels[jf] - i - 1 if jf else 0
        out.append(struct.pack("HBBI", code, t, f, k))
    return b"".join(out)
