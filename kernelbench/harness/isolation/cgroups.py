"""A cgroup per sandboxed child: a memory limit that counts tmpfs pages, a pids limit, the CPU time of every
task, a freezer for the whole tree and a kill switch (DESIGN.md, "The harness: rules" 9).

Why: rlimits and /proc scans judge processes one at a time, and a candidate chooses what its processes are.
RLIMIT_AS never sees tmpfs pages (a run filled its private /dev/shm with 1.95 GB of host memory that the OOM
killer, choosing by process, could not free); a /proc scan misses a task that keeps forking and exiting, and a
helper process started in `__init__` in its own session worked beside the timed calls uncharged. A cgroup
holds every task the child creates, whatever its clone flags, session or process group, and charges every
page any of them touches, tmpfs included.

Covers: the child is placed in its cgroup before it execs anything (`shim_argv`: a trusted `sh` writes its own
pid into each `cgroup.procs`, then execs the sandbox's command line), so no task of the child ever ran outside
it; memory (`memory.limit_in_bytes`, and `memory.memsw.limit_in_bytes` where swap is accounted, or v2
`memory.max` / `memory.swap.max`), tasks (`pids.max`, threads included), CPU time of every task
(`cpu_ns`: v2 `cpu.stat`, else v1 `cpuacct.usage`), freezing (v2 `cgroup.freeze`, else the v1 freezer) and
killing (v2 `cgroup.kill`, else freeze, SIGKILL each task, thaw) of the whole tree.
Not covered: memory the kernel does not charge to a cgroup (most kernel objects without kmem accounting, GPU
memory); CPU time of work the child causes in other cgroups (the parent's reads of its pipes, kernel threads);
a task that outlived a harness killed mid-evaluation (its cgroup is kept; empty ones are removed by the next
harness process: `_sweep`).

Layout: `<mount>/<the harness's own cgroup>/kernel-agent/<name>` in each hierarchy it uses, so a harness that
runs in a cgroup of its own (a job's, a container's) nests its children under that one's limits.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from dataclasses import dataclass

ROOT_NAME = "kernel-agent"
MEMORY, MEMSW, PIDS, CPU, FREEZE, KILL = "memory", "memsw", "pids", "cpu", "freeze", "kill"
TMPFS = "tmpfs"
LIMIT_NAMES = (MEMORY, MEMSW, PIDS, CPU, FREEZE, KILL, TMPFS)
"""What a child's limits may name (`Cgroup.held`, `sandbox.ChildOutcome.limits_held`, `EvalResult.limits_held`):
each one a limit or a reading the child had. `tmpfs`: the sandbox's private tmpfs mounts have a size (set by
bubblewrap, not by the cgroup)."""
REQUIRED = (MEMORY, PIDS, CPU, FREEZE, KILL)
"""What a judged child must have unless `EvalConfig.allow_missing_cgroups`: memsw is not among them (a host
without swap has nothing for it to bound)."""
ALLOW_MISSING_ENV = "KERNEL_AGENT_ALLOW_MISSING_CGROUPS"
FREEZE_WAIT_S = 2.0
"""How long `freeze` waits for the kernel to report the whole tree frozen (a task in uninterruptible sleep
freezes when it leaves it; it uses no CPU meanwhile)."""


class CgroupsUnavailable(RuntimeError):
    """A child's cgroup could not be made with every required limit (a harness setup fault: `harness_error`)."""


def allow_missing(flag: bool) -> bool:
    """The config's `allow_missing_cgroups`, or `KERNEL_AGENT_ALLOW_MISSING_CGROUPS=1` in the environment (machines
    without a writable cgroup filesystem, e.g. an unprivileged CI container)."""
    return flag or os.environ.get(ALLOW_MISSING_ENV, "") == "1"


def _mounts() -> tuple[dict[str, str], str]:
    """v1 mount point of each controller, and the v2 (unified) mount point ("" when none)."""
    v1: dict[str, str] = {}
    v2 = ""
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 4:
                continue
            if parts[2] == "cgroup2" and not v2:
                v2 = parts[1]
            elif parts[2] == "cgroup":
                for opt in parts[3].split(","):
                    v1.setdefault(opt, parts[1])
    return v1, v2


def _own_paths() -> tuple[dict[str, str], str]:
    """The harness's own cgroup path in each v1 controller and in v2, from /proc/self/cgroup."""
    v1: dict[str, str] = {}
    v2 = "/"
    with open("/proc/self/cgroup") as f:
        for line in f:
            num, ctrls, path = line.rstrip("\n").split(":", 2)
            if num == "0" and not ctrls:
                v2 = path
            for c in ctrls.split(","):
                v1[c] = path
    return v1, v2


def _write(path: str, text: str) -> bool:
    try:
        with open(path, "w") as f:
            f.write(text)
        return True
    except OSError:
        return False


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _keyed(text: str, key: str) -> int | None:
    """The value of `key` in a flat-keyed cgroup file (`cpu.stat`, `memory.events`, `memory.oom_control`)."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
            return int(parts[1])
    return None


_SWEPT: set[str] = set()


def _make(parent: str, name: str) -> str:
    """mkdir `parent/kernel-agent/name`; "" when it cannot be made. The first time in a process, the empty
    cgroups of harness processes that are gone (killed mid-evaluation) are removed."""
    base = os.path.join(parent, ROOT_NAME)
    try:
        os.makedirs(base, exist_ok=True)
        if base not in _SWEPT:
            _SWEPT.add(base)
            _sweep(base)
        path = os.path.join(base, name)
        os.mkdir(path)
        return path
    except OSError:
        return ""


def _sweep(base: str) -> None:
    for entry in os.listdir(base):
        pid = entry.split("-", 1)[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                os.rmdir(os.path.join(base, entry))  # fails while a task is left in it: kept
            except OSError:
                pass


def _under(mount: str, own: str) -> str:
    return mount.rstrip("/") + (own.rstrip("/") if own not in ("", "/") else "")


_SHIM = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'
"""Writes the shell's own pid into each `cgroup.procs` named, then execs the rest of its arguments: the child
is in every hierarchy's cgroup before anything of it runs (no race, no preexec_fn in a threaded parent)."""
SHIM_FAILED = 125
"""The shim's exit status when a write failed: the child never started (`harness_error`)."""


@dataclass(frozen=True)
class Cgroup:
    """One child's cgroup in every hierarchy the host offers; `held` names what it gives (LIMIT_NAMES)."""

    name: str
    v2_dir: str = ""
    """The child's cgroup in the v2 (unified) hierarchy ("" without one): also where perf events of the child's
    tasks are opened (perf_event cgroup mode)."""
    memory_dir: str = ""
    pids_dir: str = ""
    cpu_dir: str = ""
    freezer_dir: str = ""
    """The v1 freezer's cgroup, used only where v2 has no `cgroup.freeze`."""
    held: tuple[str, ...] = ()
    memory_limit_bytes: int = 0
    pids_limit: int = 0

    @property
    def dirs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d for d in (self.v2_dir, self.memory_dir, self.pids_dir, self.cpu_dir,
                                               self.freezer_dir) if d))

    def shim_argv(self) -> list[str]:
        """The argv prefix that puts the child into this cgroup before it execs anything ([] for no cgroup)."""
        files = [os.path.join(d, "cgroup.procs") for d in self.dirs]
        return ["/bin/sh", "-c", _SHIM, "cgroup-shim", str(len(files)), *files] if files else []

    def _v2(self, d: str) -> bool:
        return bool(d) and d == self.v2_dir

    def cpu_ns(self) -> int | None:
        """CPU time of every task that ever ran in the cgroup (user + system, ns); None when unreadable."""
        if self._v2(self.cpu_dir):
            usec = _keyed(_read(os.path.join(self.cpu_dir, "cpu.stat")), "usage_usec")
            return None if usec is None else usec * 1000
        text = _read(os.path.join(self.cpu_dir, "cpuacct.usage")).strip() if self.cpu_dir else ""
        return int(text) if text.isdigit() else None

    def memory_peak_bytes(self) -> int:
        """Most memory the cgroup held at once (tmpfs pages included); 0 when unknown."""
        name = "memory.peak" if self._v2(self.memory_dir) else "memory.max_usage_in_bytes"
        text = _read(os.path.join(self.memory_dir, name)).strip() if self.memory_dir else ""
        return int(text) if text.isdigit() else 0

    def oom_kills(self) -> int:
        """Tasks the kernel killed for the cgroup's memory limit."""
        if not self.memory_dir:
            return 0
        name = "memory.events" if self._v2(self.memory_dir) else "memory.oom_control"
        return _keyed(_read(os.path.join(self.memory_dir, name)), "oom_kill") or 0

    def _ids(self, name: str) -> list[int]:
        d = self.dirs[0] if self.dirs else ""
        return [int(x) for x in _read(os.path.join(d, name)).split() if x.isdigit()] if d else []

    def pids(self) -> list[int]:
        """Every process in the cgroup (host pids)."""
        return self._ids("cgroup.procs")

    def tids(self) -> list[int]:
        """Every task (thread) in the cgroup (host ids)."""
        return self._ids("cgroup.threads" if self.dirs and self._v2(self.dirs[0]) else "tasks")

    def freeze(self) -> bool:
        """Freeze every task of the tree; True once the kernel reports it frozen (within FREEZE_WAIT_S)."""
        if self.v2_dir and os.path.exists(os.path.join(self.v2_dir, "cgroup.freeze")):
            if not _write(os.path.join(self.v2_dir, "cgroup.freeze"), "1"):
                return False
            return self._wait(lambda: _keyed(_read(os.path.join(self.v2_dir, "cgroup.events")), "frozen") == 1)
        if self.freezer_dir and _write(os.path.join(self.freezer_dir, "freezer.state"), "FROZEN"):
            return self._wait(lambda: _read(os.path.join(self.freezer_dir, "freezer.state")).strip() == "FROZEN")
        return False

    def thaw(self) -> None:
        if self.v2_dir and os.path.exists(os.path.join(self.v2_dir, "cgroup.freeze")):
            _write(os.path.join(self.v2_dir, "cgroup.freeze"), "0")
        elif self.freezer_dir:
            _write(os.path.join(self.freezer_dir, "freezer.state"), "THAWED")

    @staticmethod
    def _wait(done) -> bool:
        until = time.perf_counter() + FREEZE_WAIT_S
        while not done():
            if time.perf_counter() > until:
                return False
            time.sleep(0.0002)
        return True

    def kill(self) -> None:
        """SIGKILL every task, including those that fork meanwhile (v2 `cgroup.kill`; v1: frozen, then killed)."""
        if self.v2_dir and _write(os.path.join(self.v2_dir, "cgroup.kill"), "1"):
            return
        for _ in range(20):
            pids = self.pids()
            if not pids:
                return
            self.freeze()
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            self.thaw()
            time.sleep(0.005)

    def remove(self, wait_s: float = 5.0) -> bool:
        """Kill what is left and remove the cgroup (rmdir needs it empty); False when a directory stayed."""
        until = time.perf_counter() + wait_s
        self.kill()
        left = list(self.dirs)
        while left:
            for d in list(left):
                try:
                    os.rmdir(d)
                    left.remove(d)
                except FileNotFoundError:
                    left.remove(d)
                except OSError:
                    pass
            if left:
                if time.perf_counter() > until:
                    return False
                self.kill()
                time.sleep(0.01)
        return True


def create(memory_bytes: int, pids: int, required: bool = True) -> Cgroup:
    """A fresh cgroup with these limits (0: none); raises CgroupsUnavailable when `required` and any of REQUIRED
    did not hold (what was made is removed again)."""
    name = f"{os.getpid()}-{secrets.token_hex(6)}"
    try:
        v1m, v2m = _mounts()
        v1own, v2own = _own_paths()
    except (OSError, ValueError):
        v1m, v2m, v1own, v2own = {}, "", {}, "/"
    v2 = _make(_under(v2m, v2own), name) if v2m else ""

    def v1(ctrl: str) -> str:
        return _make(_under(v1m[ctrl], v1own.get(ctrl, "/")), name) if ctrl in v1m else ""

    held: list[str] = []
    mem_dir = _v2_controller(v2, "memory") or v1("memory")
    if mem_dir and memory_bytes > 0:
        held += _limit_memory(mem_dir, mem_dir == v2, memory_bytes)
    pids_dir = _v2_controller(v2, "pids") or v1("pids")
    if pids_dir and pids > 0 and _write(os.path.join(pids_dir, "pids.max"), str(pids)):
        held.append(PIDS)
    cpu_dir = v2 if v2 and _keyed(_read(os.path.join(v2, "cpu.stat")), "usage_usec") is not None else v1("cpuacct")
    held += [CPU] if cpu_dir else []
    v2_freeze = bool(v2) and os.path.exists(os.path.join(v2, "cgroup.freeze"))
    freezer_dir = "" if v2_freeze else v1("freezer")
    held += [FREEZE] if v2_freeze or freezer_dir else []
    held += [KILL] if (v2 and os.path.exists(os.path.join(v2, "cgroup.kill"))) or FREEZE in held else []
    cg = Cgroup(name, v2, mem_dir, pids_dir, cpu_dir, freezer_dir, tuple(h for h in LIMIT_NAMES if h in held),
                memory_bytes, pids)
    missing = [r for r in REQUIRED if r not in cg.held]
    if required and missing:
        cg.remove(wait_s=0.5)
        raise CgroupsUnavailable(
            f"the child's cgroup lacks {', '.join(missing)} (cgroup v1 mounts: {sorted(v1m) or 'none'}; v2: "
            f"{v2m or 'none'}; made: {list(cg.dirs) or 'nothing'}): the harness refuses to judge without them; "
            f"set EvalConfig.allow_missing_cgroups or {ALLOW_MISSING_ENV}=1 on a machine without cgroups")
    return cg


def _v2_controller(v2: str, ctrl: str) -> str:
    """`v2` when the v2 hierarchy offers `ctrl` to it (enabled in its parent's subtree_control), else ""."""
    if not v2:
        return ""
    parent = os.path.dirname(v2)
    if ctrl not in _read(os.path.join(parent, "cgroup.controllers")).split():
        return ""
    _write(os.path.join(parent, "cgroup.subtree_control"), f"+{ctrl}")
    return v2 if os.path.exists(os.path.join(v2, f"{ctrl}.max")) else ""


def _limit_memory(d: str, v2: bool, limit: int) -> list[str]:
    """Set the memory limit (and swap's, where accounted) of `d`; the names of those that held."""
    if v2:
        held = [MEMORY] if _write(os.path.join(d, "memory.max"), str(limit)) else []
        return held + ([MEMSW] if held and _write(os.path.join(d, "memory.swap.max"), "0") else [])
    held = [MEMORY] if _write(os.path.join(d, "memory.limit_in_bytes"), str(limit)) else []
    memsw = os.path.join(d, "memory.memsw.limit_in_bytes")
    return held + ([MEMSW] if held and os.path.exists(memsw) and _write(memsw, str(limit)) else [])
