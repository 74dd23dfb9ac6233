"""Warm workers (kernelbench.harness.isolation.warm_child): children forked from a zygote that imported torch once keep every
isolation a fresh sandboxed child had.

A planting candidate leaves something in every place a later job could look (files in each writable folder,
the environment, patched modules and builtins, a global in torch, a thread, a process that tries to outlive its
sandbox, an open descriptor, System V shared memory, an abstract socket, a key in its uid's kernel keyring) and
tries to harm the zygote and the keeper above it; an honest candidate must then be `correct`, and a looking
candidate, evaluated after both, fails loudly (`runtime_error` naming what it found) if anything of the plant
reached it. Every job here must be served by a warm worker (counted), else the test would pass on the
fresh-interpreter path and prove nothing.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import replace

import pytest

from kernelbench.harness.isolation import process_tree, warm_child
from kernelbench.harness.isolation.slots import SLOT_UID_BASE
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.evaluate import evaluate
from kernelbench.harness.result import CORRECT, REJECTED
from kernelbench.tasks.task import Task

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="warm workers serve only a harness running as root")

RELU = Task(id="warm/relu", level=1, name="relu", origin="test", source='''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
''')

MARK = "ka_plant_7f3a"

PLANTER = f'''
import builtins, ctypes, os, signal, socket, sys, threading, time
import torch
import torch.nn as nn

MARK = "{MARK}"
planted = []


def _try(name, fn):
    try:
        fn()
        planted.append(name)
    except Exception:
        pass


def _write(path):
    with open(path, "w") as f:
        f.write(MARK)


def _daemon():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            ctypes.CDLL(None).prctl(15, MARK[:15].encode(), 0, 0, 0)  # PR_SET_NAME
            time.sleep(600)
        os._exit(0)


def _abstract_socket():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\\0" + MARK)
    s.listen(1)
    builtins._ka_keep = s


def _sysv_shm():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.shmget(0x4B41, 4096, 0o1666) < 0:  # IPC_CREAT | 0666
        raise OSError(ctypes.get_errno(), "shmget")


def _key():
    # a user key in the slot uid's own keyring (@u, -4), readable by every uid: keyrings are the host kernel's
    libc = ctypes.CDLL(None, use_errno=True)
    key = libc.syscall(248, b"user", MARK.encode(), MARK.encode(), len(MARK), -4)  # add_key
    if key < 0:
        raise OSError(ctypes.get_errno(), "add_key")
    libc.syscall(250, 5, key, 0x3F3F3F3F)  # KEYCTL_SETPERM: all rights to possessor, user, group, other


def plant():
    for folder in ("/tmp", "/dev/shm", os.path.expanduser("~"), os.getcwd(), os.path.dirname(os.getcwd()), "/var/tmp"):
        _try("file " + folder, lambda folder=folder: _write(os.path.join(folder, MARK)))
    os.environ[MARK] = "1"
    builtins.__dict__[MARK] = 1
    sys.modules[MARK] = sys
    torch.__dict__[MARK] = 1
    torch.relu = lambda x: x * 0
    _try("fd", lambda: os.set_inheritable(os.open("/dev/null", os.O_RDONLY), True))
    _try("thread", lambda: threading.Thread(target=time.sleep, args=(600,), name=MARK, daemon=True).start())
    _try("daemon", _daemon)
    _try("abstract socket", _abstract_socket)
    _try("sysv shm", _sysv_shm)
    _try("key", _key)
    # the parent (0 from inside the sandbox's pid namespace when it is the keeper, which is root) and the
    # sandbox's first process: never ours to signal (kill(0) would be the candidate's own group)
    for pid in {{os.getppid(), 1}} - {{0, os.getpid()}}:
        _try(f"signal {{pid}}", lambda pid=pid: os.kill(pid, signal.SIGKILL))


plant()


class ModelNew(nn.Module):
    def forward(self, x):
        plant()
        return x.clamp_min(0.0)
'''

HONEST = '''
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_min(0.0)
'''

LOOKER = f'''
import builtins, ctypes, os, socket, sys
import torch
import torch.nn as nn

MARK = "{MARK}"


def look():
    found = []
    for folder in ("/tmp", "/dev/shm", os.path.expanduser("~"), os.getcwd(), os.path.dirname(os.getcwd()), "/var/tmp"):
        if os.path.exists(os.path.join(folder, MARK)):
            found.append("file in " + folder)
    if MARK in os.environ:
        found.append("environment")
    if MARK in builtins.__dict__ or MARK in sys.modules or MARK in torch.__dict__:
        found.append("module state")
    if float(torch.relu(torch.ones(1))[0]) != 1.0:
        found.append("patched torch.relu")
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if open(f"/proc/{{pid}}/comm").read().strip() == MARK[:15]:
                    found.append("process " + pid)
            except OSError:
                pass
    for fd in os.listdir("/proc/self/fd"):
        try:
            if MARK in os.readlink(f"/proc/self/fd/{{fd}}"):
                found.append("descriptor")
        except OSError:
            pass
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\\0" + MARK)
        found.append("abstract socket")
    except OSError:
        pass
    finally:
        s.close()
    if ctypes.CDLL(None).shmget(0x4B41, 0, 0) >= 0:
        found.append("sysv shm")
    try:
        if MARK in open("/proc/keys").read():
            found.append("kernel keyring")
    except OSError:
        pass
    if found:
        raise RuntimeError("PLANT FOUND: " + ", ".join(found))


look()


class ModelNew(nn.Module):
    def forward(self, x):
        look()
        return x.clamp_min(0.0)
'''


def _config(cache: str) -> EvalConfig:
    # plain PyTorch on purpose (the op policy is not what is tested: `partial`, so neither the op tracer nor the
    # check of which code ran judges PyTorch's own kernels); static checks off: the planter's code must meet the
    # sandbox and the warm worker, not a rule on its spelling
    return EvalConfig(device="cpu", size="cpu", build_cache_dir=cache, static_checks=False, op_checks=False,
                      op_policy="partial", timing_trials=20, run_timeout_s=60.0, profile="off")


def _host_processes_named(name: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if open(f"/proc/{pid}/comm").read().strip() == name[:15]:
                    found.append(int(pid))
            except OSError:
                pass
    return found


def _invalidate_planted_keys() -> list[str]:
    """Keys named MARK left in the host kernel (a failed run must not leave them for the next one)."""
    import ctypes

    libc, left = ctypes.CDLL(None, use_errno=True), []
    with open("/proc/keys") as f:
        for line in f:
            if MARK in line:
                left.append(line.strip())
                libc.syscall(250, 21, int(line.split()[0], 16))  # KEYCTL_INVALIDATE
    return left


def test_nothing_a_job_plants_reaches_a_later_job_or_the_zygote(tmp_path, monkeypatch):
    try:
        _nothing_planted_reaches_a_later_job(tmp_path, monkeypatch)
    finally:
        left = _invalidate_planted_keys()
    assert not left, f"a planted key outlived its sandbox: {left}"


def _nothing_planted_reaches_a_later_job(tmp_path, monkeypatch) -> None:
    served = []
    start = warm_child.start
    monkeypatch.setattr(warm_child, "start", lambda *a, **k: served.append(1) or start(*a, **k))
    cache = str(tmp_path / "builds")
    config = _config(cache)
    planter = evaluate(RELU, PLANTER, config)
    zygotes = {k: z.proc.pid for k, z in warm_child._ZYGOTES.items()}
    honest = evaluate(RELU, HONEST, config)
    looker = evaluate(RELU, LOOKER, config)
    # compile, reference and run child of each of the three
    assert len(served) >= 9, f"only {len(served)} children came from warm workers: the test proves nothing"
    # the planter ran its plants in the compile and run children (the harness rejects it for the patched torch
    # and the thread; what matters here is that it ran and was judged, not a harness fault)
    assert planter.status == REJECTED and "dynamic:threads" in planter.flags, planter.feedback
    assert honest.status == CORRECT, honest.feedback
    assert looker.status == CORRECT, looker.feedback
    assert {k: z.proc.pid for k, z in warm_child._ZYGOTES.items() if k in zygotes} == zygotes, \
        "a zygote was replaced: the planter harmed it"
    assert all(z.alive() for z in warm_child._ZYGOTES.values())
    assert not _host_processes_named(MARK), "a planted process outlived its sandbox"
    assert not any(os.path.exists(os.path.join(d, MARK)) for d in ("/tmp", "/dev/shm", os.path.expanduser("~")))


def test_a_fresh_interpreter_still_serves_when_warm_workers_are_off(tmp_path, monkeypatch):
    served = []
    monkeypatch.setattr(warm_child, "start", lambda *a, **k: served.append(1))
    result = evaluate(RELU, HONEST, replace(_config(str(tmp_path / "builds")), warm_workers=False))
    assert result.status == CORRECT, result.feedback
    assert not served


def test_a_job_outlives_its_zygote_and_the_next_job_gets_a_new_one(tmp_path):
    """The keeper reports the job's status itself, so a zygote that dies mid-evaluation costs no verdict; the
    next child finds it dead and starts another."""
    import threading
    import time

    warm_child.stop_all()
    config = _config(str(tmp_path / "builds"))
    assert evaluate(RELU, HONEST, config).status == CORRECT
    (key, first), = warm_child._ZYGOTES.items()
    result = {}
    worker = threading.Thread(target=lambda: result.update(r=evaluate(RELU, HONEST.replace("clamp_min(0.0)",
                              "clamp_min(0.0) if __import__('time').sleep(0.05) is None else x"), config)))
    worker.start()
    time.sleep(1.0)  # inside the run stage: its children were forked from `first`
    first.proc.kill()
    first.proc.wait()
    worker.join()
    assert result["r"].status == CORRECT, result["r"].feedback
    assert evaluate(RELU, HONEST, config).status == CORRECT
    assert warm_child._ZYGOTES[key].alive() and warm_child._ZYGOTES[key].proc.pid != first.proc.pid


@pytest.mark.skipif(not process_tree.reachable_by(sys.executable, SLOT_UID_BASE),
                    reason="this interpreter lives where a slot's uid cannot read it (a 0700 folder): the plain child "
                           "keeps the harness's uid there, which warm workers never serve (the next test)")
def test_warm_workers_serve_the_plain_fallback_too(tmp_path, monkeypatch):
    """Without bubblewrap (a GPU machine without it, say) the job's process skips the namespaces and keeps the
    cgroup, rlimits and uid drop; the honest candidate is judged as before."""
    from kernelbench.harness.isolation import bwrap

    served = []
    start = warm_child.start
    monkeypatch.setattr(warm_child, "start", lambda *a, **k: served.append(a[1]) or start(*a, **k))
    monkeypatch.setattr(bwrap, "find_bwrap", lambda: "")
    cache = tempfile.mkdtemp(prefix="ka-warm-test-")
    os.chmod(cache, 0o755)
    try:
        result = evaluate(RELU, HONEST, _config(cache))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    assert result.status == CORRECT, result.feedback
    assert served and set(served) == {"rlimits"}


def test_a_job_that_would_keep_the_harness_uid_is_never_forked_from_a_warm_worker(tmp_path, monkeypatch):
    """Without bubblewrap, a build folder under a 0700 folder keeps the plain child at the harness's uid (root):
    such a job could signal or trace the zygote, so it starts a fresh interpreter instead."""
    from kernelbench.harness.isolation import bwrap

    served = []
    monkeypatch.setattr(warm_child, "start", lambda *a, **k: served.append(1))
    monkeypatch.setattr(bwrap, "find_bwrap", lambda: "")
    result = evaluate(RELU, HONEST, _config(str(tmp_path / "builds")))
    assert result.status == CORRECT, result.feedback
    assert not served


PRIVILEGES = '''
import os
import torch.nn as nn


def check():
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
    wrong = [k for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb") if int(status[k].strip(), 16) != 0]
    if status["NoNewPrivs"].strip() != "1":
        wrong.append("NoNewPrivs")
    if 0 in os.getresuid() or 0 in os.getresgid() or os.getgroups():
        wrong.append("ids")
    if wrong:
        raise RuntimeError("PRIVILEGED: " + ", ".join(wrong))


check()


class ModelNew(nn.Module):
    def forward(self, x):
        check()
        return x.clamp_min(0.0)
'''


def test_a_forked_job_holds_no_privilege(tmp_path):
    """As bubblewrap plus setpriv left a fresh child: no capability in any set, no_new_privs, the slot's uid and gid."""
    result = evaluate(RELU, PRIVILEGES, _config(str(tmp_path / "builds")))
    assert result.status == CORRECT, result.feedback
