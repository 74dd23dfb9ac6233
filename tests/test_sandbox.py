"""The sandbox with plain Python children (no compiles): each test is an escape the sandbox must stop."""

from __future__ import annotations

import os
import sys
import time

import pytest

from kernelbench.harness.isolation import bwrap, process_tree, sandbox
from kernelbench.harness.isolation.sandbox import ChildSpec, Limits, SlotLease, make_scratch, run_child

needs_bwrap = pytest.mark.skipif(not bwrap.find_bwrap(), reason="bubblewrap unusable here")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop (and so NPROC) needs root")


def run_py(code: str, limits: Limits = Limits(timeout_s=60), env=(), require=False):
    with SlotLease() as slot:
        scratch = make_scratch(slot.uid)
        out = run_child(ChildSpec(argv=(sys.executable, "-I", "-c", code), scratch_dir=scratch, limits=limits, env=env),
                        slot, require_sandbox=require)
        return out, scratch, slot.uid


@needs_bwrap
def test_network_is_unreachable():
    out, _, _ = run_py("import socket\n"
                       "s = socket.socket(); s.settimeout(3)\n"
                       "try:\n    s.connect(('1.1.1.1', 80)); print('CONNECTED')\n"
                       "except OSError as e:\n    print('BLOCKED', e)\n")
    assert "BLOCKED" in out.stdout_tail and "CONNECTED" not in out.stdout_tail
    assert out.sandbox == sandbox.BWRAP


@needs_bwrap
def test_root_filesystem_is_read_only_and_scratch_writable():
    target = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox_escape_probe")
    out, scratch, _ = run_py(f"open('ok.txt', 'w').write('x')\n"
                             f"try:\n    open({target!r}, 'w').write('x'); print('WROTE')\n"
                             f"except OSError as e:\n    print('DENIED', e.errno)\n")
    assert "DENIED" in out.stdout_tail, out
    assert not os.path.exists(target)
    assert os.path.exists(os.path.join(scratch, "ok.txt"))


@needs_bwrap
def test_home_is_hidden():
    home = os.path.expanduser("~")
    marker = os.path.join(home, ".ka_sandbox_secret")
    with open(marker, "w") as f:
        f.write("secret")
    try:
        out, _, _ = run_py(f"import os\nprint('HOME', os.environ['HOME'])\n"
                           f"print('SEEN' if os.path.exists({marker!r}) else 'HIDDEN')\n")
    finally:
        os.unlink(marker)
    assert "HIDDEN" in out.stdout_tail and "HOME /tmp" in out.stdout_tail, out


@needs_bwrap
def test_the_hosts_cgroups_are_hidden():
    """Every child's cgroup (the paired reference's, other evaluations') lies under /sys/fs/cgroup: read-only, but
    their live CPU and memory counters and process lists were readable from inside."""
    assert os.listdir("/sys/fs/cgroup"), "this machine has no cgroup tree to hide: the test proves nothing"
    out, _, _ = run_py("import os\nprint('CGROUPS', sorted(os.listdir('/sys/fs/cgroup')))\n")
    assert "CGROUPS []" in out.stdout_tail, out


def test_environment_is_stripped(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    out, _, _ = run_py("import os\nprint(sorted(os.environ))", env=(("OMP_NUM_THREADS", "1"), ("EVIL", "1")))
    assert out.returncode == 0, out
    assert "OPENAI_API_KEY" not in out.stdout_tail and "HF_TOKEN" not in out.stdout_tail
    assert "EVIL" not in out.stdout_tail and "OMP_NUM_THREADS" in out.stdout_tail


@needs_root
def test_child_runs_as_unprivileged_slot_uid():
    out, _, uid = run_py("import os\nprint('UID', os.getuid(), os.geteuid())")
    assert f"UID {uid} {uid}" in out.stdout_tail and uid >= sandbox.SLOT_UID_BASE


@needs_root
def test_fork_bomb_stops_at_nproc():
    code = ("import os, time\n"
            "n = 0\n"
            "for _ in range(400):\n"
            "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
            "    if pid == 0:\n        time.sleep(30); os._exit(0)\n"
            "    n += 1\n"
            "print('FORKED', n, flush=True)\n")
    start = time.perf_counter()
    out, _, uid = run_py(code, Limits(timeout_s=60, max_processes=20))
    forked = int(out.stdout_tail.split("FORKED")[1].split()[0])
    assert forked < 20, out
    assert time.perf_counter() - start < 30  # the sleeping children were killed, not waited for
    assert not process_tree.uid_has_processes(uid)


def test_timeout_kills_the_whole_group():
    code = ("import subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
            "print('SPAWNED', flush=True); time.sleep(300)\n")
    start = time.perf_counter()
    out, _, uid = run_py(code, Limits(timeout_s=3))
    assert out.timed_out and out.signal == 9
    assert time.perf_counter() - start < 20
    if uid >= 0:
        assert not process_tree.uid_has_processes(uid)


def test_restart_clock_gives_a_waiting_child_its_whole_limit_from_then_on():
    """Paired timing starts the run child before its inputs exist and restarts its clock when they arrive: a
    child that sleeps 4 s under a 3 s limit, its clock restarted after 2 s, finishes; the same child without the
    restart times out."""
    outcomes = []
    for restart in (True, False):
        with SlotLease() as slot:
            spec = ChildSpec(argv=(sys.executable, "-I", "-c", "import time; time.sleep(4); print('DONE')"),
                             scratch_dir=make_scratch(slot.uid), limits=Limits(timeout_s=3))
            child = sandbox.start_child(spec, slot)
            time.sleep(2)
            if restart:
                child.restart_clock()
            outcomes.append(child.wait())
    assert not outcomes[0].timed_out and "DONE" in outcomes[0].stdout_tail, outcomes[0]
    assert outcomes[1].timed_out


def test_memory_limit_stops_large_allocation():
    out, _, _ = run_py("b = bytearray(3 * 1024**3)\nprint('ALLOCATED')", Limits(timeout_s=60, memory_limit_mb=1024))
    assert "ALLOCATED" not in out.stdout_tail and "MemoryError" in out.stderr_tail, out


def test_file_size_limit():
    out, _, _ = run_py("open('big', 'wb').write(b'x' * (8 * 1024 * 1024))\nprint('WROTE')",
                       Limits(timeout_s=60, max_file_mb=1))
    assert "WROTE" not in out.stdout_tail
    assert out.returncode != 0


def test_fallback_without_bwrap_uses_rlimits(monkeypatch, caplog):
    monkeypatch.setattr(bwrap, "find_bwrap", lambda: "")
    with caplog.at_level("WARNING"):
        out, scratch, uid = run_py("import os\nopen('ok', 'w').write('x')\nprint('UID', os.getuid())",
                                   Limits(timeout_s=60, max_processes=64))
    assert out.sandbox == sandbox.RLIMITS and out.returncode == 0, out
    assert "bubblewrap unavailable" in caplog.text
    assert os.path.exists(os.path.join(scratch, "ok"))
    if uid >= 0 and process_tree.reachable_by(sys.executable, uid):
        assert f"UID {uid}" in out.stdout_tail


def test_require_sandbox_refuses_without_bwrap(monkeypatch):
    monkeypatch.setattr(bwrap, "find_bwrap", lambda: "")
    with pytest.raises(sandbox.SandboxUnavailable):
        run_py("print(1)", require=True)


def test_faults_are_outcomes_not_exceptions():
    out, _, _ = run_py("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    assert out.signal == 11 and out.returncode == -11 and not out.timed_out
    out, _, _ = run_py("import os\nos._exit(3)")
    assert out.returncode == 3 and out.signal == 0


def test_concurrent_slots_get_distinct_uids():
    with SlotLease() as a, SlotLease() as b:
        assert a.slot != b.slot


def _counter(path: str) -> int:
    try:
        with open(path) as f:
            return int(f.read() or 0)
    except (OSError, ValueError):
        return 0


@pytest.mark.parametrize("kind", ["bwrap", "rlimits"])
def test_freeze_stops_the_child_and_what_it_left_running(kind, monkeypatch):
    """Paired timing freezes the candidate while the reference times: a detached grandchild (double fork
    and setsid, out of the child's process group) and a thread must stop too, and run again after thaw.
    Without bubblewrap and without a slot uid (harness not root, or paths other users cannot reach) an
    orphan leaves the process tree and escapes (and a new session escapes the final group kill); there the
    grandchild keeps its parent and its process group (docs/harness.md)."""
    if kind == "bwrap" and not bwrap.find_bwrap():
        pytest.skip("bubblewrap unusable here")
    if kind == "rlimits":
        monkeypatch.setattr(bwrap, "find_bwrap", lambda: "")
    code = ("import os, threading, time\n"
            "def count(name):\n"
            "    n = 0\n"
            "    while True:\n"
            "        n += 1\n"
            "        with open(name + '.tmp', 'w') as f: f.write(str(n))\n"
            "        os.replace(name + '.tmp', name)\n"
            "        time.sleep(0.002)\n"
            "if os.fork() == 0:\n"
            f"    {'os.setsid()' if kind == 'bwrap' else 'pass'}\n"
            "    if os.fork() == 0:\n"
            "        count('grandchild')\n"
            f"    {'os._exit(0)' if kind == 'bwrap' else 'time.sleep(300)'}\n"
            "threading.Thread(target=count, args=('thread',), daemon=True).start()\n"
            "time.sleep(300)\n")
    with SlotLease() as slot:
        scratch = make_scratch(slot.uid)
        child = sandbox.start_child(ChildSpec(argv=(sys.executable, "-I", "-c", code), scratch_dir=scratch,
                                              limits=Limits(timeout_s=60)), slot)
        try:
            files = [os.path.join(scratch, n) for n in ("grandchild", "thread")]
            deadline = time.time() + 30
            while not all(_counter(f) > 0 for f in files) and time.time() < deadline:
                time.sleep(0.05)
            assert all(_counter(f) > 0 for f in files), "the child never started counting"
            child.freeze()
            before = [_counter(f) for f in files]
            time.sleep(0.5)
            assert [_counter(f) for f in files] == before, "something ran while frozen"
            child.thaw()
            time.sleep(0.5)
            after = [_counter(f) for f in files]
            assert all(a > b for a, b in zip(after, before)), "nothing ran after thaw"
        finally:
            out = child.kill()
        assert out.timed_out


REFUSAL_PROBE = """
import ctypes, json, os, subprocess, sys, threading
sys.path.insert(0, {root!r})
from kernelbench.harness.child import spawn_guard
t = threading.Thread(target=lambda: None); t.start(); t.join()  # before the cap: allowed
seen = {{"before": "started", **spawn_guard.refuse_new_tasks()}}
try:
    threading.Thread(target=lambda: None).start(); seen["thread"] = "started"
except RuntimeError:
    seen["thread"] = "refused"
libc = ctypes.CDLL(None)
body = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(lambda arg: 0)
handle = ctypes.c_ulong()
seen["thrd_create"] = "started" if libc.thrd_create(ctypes.byref(handle), body, None) == 0 else "refused"
try:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0); seen["fork"] = "started"
except OSError:
    seen["fork"] = "refused"
try:
    subprocess.run(["true"]); seen["spawn"] = "started"
except OSError:
    seen["spawn"] = "refused"
print(json.dumps(seen))
"""


@pytest.mark.parametrize("kind", ["bwrap", "plain"])
def test_new_threads_and_processes_are_refused_after_the_cap(kind, monkeypatch):
    """`refuse_new_tasks` (the run child calls it after `__init__`): no thread or process can start by any
    route afterwards, in the bubblewrap child (slot uid: RLIMIT_NPROC and seccomp) and in the plain fallback
    child (which keeps uid 0 when the slot uid cannot reach this Python: seccomp alone)."""
    import json

    if kind == "bwrap" and not bwrap.find_bwrap():
        pytest.skip("bubblewrap unusable here")
    if kind == "plain":
        monkeypatch.setattr(bwrap, "find_bwrap", lambda: "")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out, _, _ = run_py(REFUSAL_PROBE.format(root=root))
    assert out.returncode == 0, out
    seen = json.loads(out.stdout_tail.strip().splitlines()[-1])
    assert seen["before"] == "started" and seen["refused"], seen
    assert {seen[k] for k in ("thread", "thrd_create", "fork", "spawn")} == {"refused"}, seen
    assert seen["seccomp"] or seen["rlimit"], seen
