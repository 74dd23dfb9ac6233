"""The processes of a sandbox: found by descent and by uid from /proc, signalled, and killed.

A sandboxed child's processes can leave its process group (a double fork, `setsid`), so the harness finds
them twice over: as descendants of the child in the host's pid view (bubblewrap's pid 1 reaps orphans, so a
double fork stays a descendant) and, as root, as every process of the slot's own uid.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def kill_uid(uid: int) -> None:
    """Kill every process of `uid` by signalling -1 as that uid (reaches processes that left the group)."""
    if uid < 0:
        return
    for _ in range(3):
        subprocess.run(["kill", "-KILL", "-1"], user=uid, group=uid, extra_groups=[],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if not uid_has_processes(uid):
            return
        time.sleep(0.05)


def uid_has_processes(uid: int) -> bool:
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            for line in status.read_text().splitlines():
                if line.startswith("Uid:"):
                    if int(line.split()[1]) == uid:
                        return True
                    break
        except (OSError, ValueError):
            continue
    return False


def sandbox_pids(root: int, uid: int) -> set[int]:
    """`root` and its descendants, plus (uid >= 0) every process owned by `uid`, from one scan of /proc."""
    parent: dict[int, int] = {}
    owned: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            if uid >= 0 and entry.stat().st_uid == uid:
                owned.add(pid)
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            parent[pid] = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError):
            continue
    found, frontier = {root}, [root]
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return (found & set(parent)) | owned


def process_state(pid: int) -> str:
    """The one-letter state of `pid` from /proc (T: stopped), or "" when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2:].split()[0].decode()
    except (OSError, ValueError, IndexError):
        return ""


def send_signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def reachable_by(path: str, uid: int) -> bool:
    """Whether `uid` (no groups) can traverse every folder above `path` (the plain child's uid drop needs it)."""
    p = Path(os.path.realpath(path)).parent
    while True:
        try:
            st = p.stat()
        except OSError:
            return False
        if not (st.st_mode & 0o001 or (st.st_uid == uid and st.st_mode & 0o100)):
            return False
        if p == p.parent:
            return True
        p = p.parent


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stop_all(root: int, uid: int, already: set[int], wait_s: float) -> set[int]:
    """SIGSTOP `root`'s descendants and `uid`'s processes (`sandbox_pids`), rescanned until no new one turns up
    (at most 8 passes), then wait up to `wait_s` for each to report it; the set stopped.

    The fallback of a child without a cgroup freezer: a task that keeps forking and exiting can stay ahead of
    the scans (the cgroup freezer has no such gap)."""
    stopped = set(already)
    for _ in range(8):
        new = sandbox_pids(root, uid) - stopped
        if not new:
            break
        for pid in new:
            send_signal(pid, signal.SIGSTOP)
        stopped |= new
    until = time.perf_counter() + wait_s
    pending = set(stopped)
    while pending and time.perf_counter() < until:
        pending = {pid for pid in pending if process_state(pid) not in ("T", "t", "X", "Z", "")}
        if pending:
            time.sleep(0.0005)
    return stopped
