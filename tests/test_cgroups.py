"""A cgroup per sandboxed child (`kernelbench.harness.isolation.cgroups`): real sandboxed children, each test a way around
the per-process limits that the child's cgroup (or the sized tmpfs) must close."""

from __future__ import annotations

import os
import sys
import time

import pytest

from kernelbench.harness.isolation import bwrap, cgroups, sandbox
from kernelbench.harness.isolation.sandbox import ChildSpec, Limits, SlotLease, make_scratch

needs_bwrap = pytest.mark.skipif(not bwrap.find_bwrap(), reason="bubblewrap unusable here")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="cgroups are made as root")

FILL = ("import sys\nchunk = b'\\x01' * (1 << 20)\nwritten = 0\n"
        "try:\n"
        "    with open(sys.argv[1], 'wb') as f:\n"
        "        for _ in range(512):\n            f.write(chunk); written += 1\n"
        "        f.flush()\n"
        "    print('WROTE', written, flush=True)\n"
        "except OSError as e:\n    print('REFUSED', written, e, flush=True)\n")


def start(code: str, limits: Limits, *args: str) -> tuple[sandbox.RunningChild, str]:
    slot = SlotLease()
    scratch = make_scratch(slot.uid)
    child = sandbox.start_child(ChildSpec(argv=(sys.executable, "-I", "-c", code, *args), scratch_dir=scratch,
                                          limits=limits), slot)
    child.lease = slot  # released with the test process; one slot per child
    return child, scratch


@needs_bwrap
@needs_root
@pytest.mark.parametrize("where", ["/dev/shm/hoard", "/tmp/hoard"])
def test_tmpfs_has_a_size(where):
    """512 MiB into a private tmpfs of 256 MiB: ENOSPC at its size (before: all 512 MiB of host memory held)."""
    child, _ = start(FILL, Limits(timeout_s=60, tmpfs_mb=256), where)
    out = child.wait()
    assert "REFUSED" in out.stdout_tail and "No space left" in out.stdout_tail, out
    assert int(out.stdout_tail.split("REFUSED")[1].split()[0]) <= 256, out
    assert cgroups.TMPFS in out.limits_held and cgroups.MEMORY in out.limits_held, out


@needs_bwrap
@needs_root
def test_memory_limit_charges_tmpfs_pages():
    """A tmpfs larger than the cgroup's memory limit: the pages written count against the limit (RLIMIT_AS
    never sees them), so the writer is stopped near 256 MiB whichever way the kernel stops it."""
    child, _ = start(FILL, Limits(timeout_s=60, tmpfs_mb=1024, cgroup_memory_mb=256), "/dev/shm/hoard")
    out = child.wait()
    assert "WROTE" not in out.stdout_tail, out
    assert out.oom_kills >= 1 or "REFUSED" in out.stdout_tail, out
    assert 0 < out.memory_peak_bytes <= (256 << 20), out


COUNTER = ("import os, sys, time\n"
           "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)\n"
           "for _ in range(15):\n"  # fifteen chains at once: each pass of a scan finds a new set
           "    if os.fork() == 0:\n        break\n"
           "else:\n    time.sleep(300)\n"  # the child's first process stays (the sandbox ends with it)
           "while True:\n"
           "    try:\n        pid = os.fork()\n    except OSError:\n        continue\n"
           "    if pid:\n        os._exit(0)\n"  # the parent leaves at once: the task doing the work keeps changing
           "    os.write(fd, b'x')\n")


def _v1_only(monkeypatch) -> None:
    """Hide the v2 hierarchy: the v1 freezer, cpuacct and the freeze-then-kill path are used instead."""
    mounts = cgroups._mounts
    monkeypatch.setattr(cgroups, "_mounts", lambda: (mounts()[0], ""))


@needs_bwrap
@needs_root
@pytest.mark.parametrize("hierarchy", ["v2", "v1"])
def test_freeze_stops_a_task_that_keeps_forking(hierarchy, monkeypatch):
    """Every step of the work runs in a new process whose parent has already exited: a /proc scan finds each
    one gone by the time it signals it. The cgroup freezer stops the whole tree: nothing is written while
    frozen, and the work goes on after the thaw."""
    if hierarchy == "v1":
        _v1_only(monkeypatch)
    child, scratch = start(COUNTER, Limits(timeout_s=60, max_processes=128), "count")
    path = os.path.join(scratch, "count")
    try:
        deadline = time.monotonic() + 30
        while (not os.path.exists(path) or os.path.getsize(path) < 100) and time.monotonic() < deadline:
            time.sleep(0.05)
        grew_while_frozen, grew_after = [], []
        for _ in range(5):  # as paired timing does, round after round
            child.freeze()
            time.sleep(0.1)
            frozen_at = os.path.getsize(path)
            time.sleep(0.4)
            grew_while_frozen.append(os.path.getsize(path) - frozen_at)
            child.thaw()
            time.sleep(0.2)
            grew_after.append(os.path.getsize(path) - frozen_at - grew_while_frozen[-1])
    finally:
        cg = child.cgroup
        out = child.kill()
    assert cg is not None and (bool(cg.v2_dir) == (hierarchy == "v2")) and cgroups.FREEZE in cg.held, cg
    assert not any(os.path.exists(d) for d in cg.dirs), "the cgroup was left behind (killed and removed)"
    assert not any(grew_while_frozen), f"steps ran while frozen, per round: {grew_while_frozen}"
    assert sum(grew_after) > 0, (grew_after, out)  # alive: the work goes on between the rounds


@needs_bwrap
@needs_root
@pytest.mark.parametrize("hierarchy", ["v2", "v1"])
def test_cgroup_counts_cpu_of_a_process_in_its_own_session_and_is_removed(hierarchy, monkeypatch):
    """A process that left the child's session and process group is still in its cgroup: its CPU time is
    counted, it dies with the child, and the cgroup is gone afterwards."""
    code = ("import os, time\n"
            "if os.fork() == 0:\n    os.setsid()\n    end = time.time() + 30\n"
            "    while time.time() < end:\n        pass\n    os._exit(0)\n"
            "time.sleep(1.5)\nprint('PARENT DONE', flush=True)\n")
    if hierarchy == "v1":
        _v1_only(monkeypatch)
    child, _ = start(code, Limits(timeout_s=60))
    cg = child.cgroup
    assert cg is not None and set(cgroups.REQUIRED) <= set(cg.held)
    time.sleep(0.3)
    c0 = child.cpu_ns()
    time.sleep(1.0)
    used_s = (child.cpu_ns() - c0) / 1e9
    out = child.wait()
    assert "PARENT DONE" in out.stdout_tail, out
    # the first process sleeps: CPU time in that second is the helper's (a loaded machine gives it less than a core)
    assert used_s > 0.05, f"the helper's CPU time went uncounted ({used_s:.3f} s in 1 s)"
    assert not any(os.path.exists(d) for d in cg.dirs), "the child's cgroup was left behind"


def test_missing_cgroups_refuse_to_start(monkeypatch):
    """No cgroup filesystem: the child does not start (a harness_error upstream) unless the config says the
    machine has none, and then its outcome says which limits it ran without."""
    monkeypatch.setattr(cgroups, "_mounts", lambda: ({}, ""))
    monkeypatch.delenv(cgroups.ALLOW_MISSING_ENV, raising=False)
    with pytest.raises(cgroups.CgroupsUnavailable, match="allow_missing_cgroups"):
        start("print('RAN')", Limits(timeout_s=30))
    child, _ = start("print('RAN')", Limits(timeout_s=30, allow_missing_cgroups=True))
    out = child.wait()
    assert "RAN" in out.stdout_tail and cgroups.MEMORY not in out.limits_held, out
    monkeypatch.setenv(cgroups.ALLOW_MISSING_ENV, "1")
    child, _ = start("print('RAN')", Limits(timeout_s=30))
    assert "RAN" in child.wait().stdout_tail
