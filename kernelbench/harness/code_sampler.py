"""Parent side: which code ran in a child's cgroup, sampled by the kernel (`perf_event_open`, cgroup mode).

Why: the built library's imports (`symbols.py`) say what it links, not what it runs. Native code can find a
compute routine it never imported (`dl_iterate_phdr` and the dynamic symbol table of `libtorch_cpu` give
`sgemm_`; a function pointer handed over through ctypes; code copied into fresh executable memory) and no
spelling rule sees it. The kernel sees it: a software clock event per CPU, bound to the child's cgroup v2
folder, samples the user-mode instruction pointer of whatever task of that cgroup runs, every `period_ns` of
its CPU time, for the child's whole life, so no call can be singled out. `code_attribution` then says which
mapped object each sample fell in, inside the windows of the candidate's calls.

Pure ctypes and mmap (no new dependency). Needs root (or CAP_PERFMON) and a cgroup v2 folder; where either is
missing `CodeSampler` raises `SamplerUnavailable` and the evaluation fails closed (`code_check`).

What it records: (pid, tid, time on CLOCK_MONOTONIC in ns, ip) per sample, lost-record counts, and snapshots
of the executable mappings of every process in the cgroup (`/proc/<pid>/maps`, read by this thread while the
child lives; the child cannot create executable memory after its guard: `child/spawn_guard.py`).
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import mmap
import os
import struct
import threading
import time
from dataclasses import dataclass, field

PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK = 1, 1
PERF_SAMPLE_IP, PERF_SAMPLE_TID, PERF_SAMPLE_TIME = 1 << 0, 1 << 1, 1 << 2
PERF_FLAG_PID_CGROUP, PERF_FLAG_FD_CLOEXEC = 1 << 2, 1 << 3
PERF_RECORD_LOST, PERF_RECORD_SAMPLE = 2, 9
ATTR_SIZE = 112  # PERF_ATTR_SIZE_VER5: holds clockid
SYS_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}
CLOCK_MONOTONIC = 1
SAMPLE = struct.Struct("<QIIQ")  # ip, pid, tid, time: the body of a sample with IP|TID|TIME
HEADER = struct.Struct("<IHH")  # type, misc, size
DEFAULT_PERIOD_NS = 500_000
"""2 kHz of each task's CPU time: a ReLU's calls give ~300 samples, a whole evaluation thousands. The cost is
one timer interrupt per period, dear in a VM (docs/harness.md, "Which code ran"): 10 kHz cost tens of per cent."""
RING_PAGES = 256
"""Data pages per CPU (1 MiB): ~32k samples, over 3 s of one busy CPU at 10 kHz, drained every `DRAIN_S`."""
DRAIN_S = 0.02
MAPS_MAX_BYTES = 1 << 20
"""Most of one process's `/proc/<pid>/maps` the parent reads (a torch process's is 50 KB, 350 lines). Why a bound:
the candidate makes the mappings this thread parses, outside every cgroup: split into ~65k areas (`madvise` on
every other page of a buffer) one read took 40 ms, and read after every drain by the parent, with 24-60 forked
copies, it took 3.5x the parent's CPU of an honest evaluation. A process over it is not read again, and a `strict`
evaluation is rejected (`code_check.MAPS_FLOOD`): its calls' code cannot be attributed."""
DIGEST_MAX_BYTES = 1 << 30
"""Most bytes of the build's mapped files this thread hashes over one child's life (each process's mappings are
hashed on their own: a forked copy may have rewritten its text before the guard). An honest library is a few
MB mapped by one or two processes; a large library mapped by hundreds of forked processes would make the parent
hash for minutes. Past it, each further process is treated as one whose mappings cannot be read
(`flooded_pids`)."""
SWEEP_SHARE_MAX = 0.1
"""Largest share of the wall time this thread spends reading mappings: after a sweep that took t, the next waits
t * (1 / share - 1). An honest child's sweep (one or two processes, ~1 ms) still runs after every drain."""


class SamplerUnavailable(RuntimeError):
    """perf_event_open or the cgroup could not be had: the check cannot run."""


class _Attr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
                ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
                ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64), ("wakeup_events", ctypes.c_uint32),
                ("bp_type", ctypes.c_uint32), ("config1", ctypes.c_uint64), ("config2", ctypes.c_uint64),
                ("branch_sample_type", ctypes.c_uint64), ("sample_regs_user", ctypes.c_uint64),
                ("sample_stack_user", ctypes.c_uint32), ("clockid", ctypes.c_int32),
                ("sample_regs_intr", ctypes.c_uint64), ("aux_watermark", ctypes.c_uint32),
                ("sample_max_stack", ctypes.c_uint16), ("reserved", ctypes.c_uint16)]


FLAG_DISABLED, FLAG_EXCLUDE_KERNEL, FLAG_EXCLUDE_HV, FLAG_USE_CLOCKID = 1 << 0, 1 << 5, 1 << 6, 1 << 25


@dataclass(frozen=True)
class MapsSnapshot:
    """The executable mappings of one process as read at `first_ns`..`last_ns` (CLOCK_MONOTONIC; the same
    content seen by consecutive reads is kept once): (start, end, path) each, path "" for anonymous memory."""

    pid: int
    first_ns: int
    last_ns: int
    regions: tuple[tuple[int, int, str], ...]


@dataclass(frozen=True)
class Sampled:
    """What a `CodeSampler` saw over a child's life."""

    samples: tuple[tuple[int, int, int, int], ...]
    """(pid, tid, time_ns, ip) of each sample, host pids, CLOCK_MONOTONIC."""
    lost_records: int
    """Samples the kernel dropped because a ring buffer was full (PERF_RECORD_LOST)."""
    maps: tuple[MapsSnapshot, ...]
    period_ns: int
    digests: dict[tuple[int, int, int], str]
    """(pid, start, end) -> sha256 of the file behind each mapping under the sampler's `digest_under`."""
    inner_pids: dict[int, int] = field(default_factory=dict)
    """host pid -> the pid the process has inside its own (innermost) pid namespace, as the sandboxed child sees
    itself (`NSpid` in /proc/<pid>/status); read with the first maps snapshot of each process."""
    flooded_pids: tuple[int, ...] = ()
    """Processes whose mappings ran past `MAPS_MAX_BYTES` (not read again)."""
    offsets: dict[tuple[int, int, int], int] = field(default_factory=dict)
    """(pid, start, end) -> the file offset of that executable mapping (`compute_code` places symbols by it)."""


def _perf_event_open(attr: _Attr, pid: int, cpu: int, flags: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    nr = SYS_PERF_EVENT_OPEN.get(os.uname().machine)
    if nr is None:
        raise SamplerUnavailable(f"perf_event_open: unknown syscall number on {os.uname().machine}")
    fd = libc.syscall(ctypes.c_long(nr), ctypes.byref(attr), ctypes.c_int(pid), ctypes.c_int(cpu),
                      ctypes.c_int(-1), ctypes.c_ulong(flags))
    if fd < 0:
        err = ctypes.get_errno()
        raise SamplerUnavailable(f"perf_event_open (cgroup mode, cpu {cpu}): {os.strerror(err)}")
    return fd


def read_exec_maps(pid: int, max_bytes: int = MAPS_MAX_BYTES,
                   offsets: dict[tuple[int, int, int], int] | None = None) -> tuple[tuple[int, int, str], ...] | None:
    """Executable mappings of `pid` ((start, end, path); "" anonymous, "[vdso]"-style names kept); () when the
    process is gone; None when its maps run past `max_bytes` (read no further). `offsets`: filled with each
    mapping's file offset, keyed (pid, start, end)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            text = f.read(max_bytes + 1)
    except (OSError, ValueError):
        return ()
    if len(text) > max_bytes:
        return None
    lines = text.splitlines()
    out = []
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 5 or "x" not in parts[1]:
            continue
        lo, hi = parts[0].split("-")
        out.append((int(lo, 16), int(hi, 16), parts[5].strip() if len(parts) > 5 else ""))
        if offsets is not None:
            offsets[(pid, out[-1][0], out[-1][1])] = int(parts[2], 16)
    return tuple(out)


def inner_pid(pid: int) -> int:
    """`pid`'s number in its innermost pid namespace (itself where /proc shows no `NSpid`; -1 when gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        return -1
    return pid


class _Ring:
    """One CPU's event and its ring buffer (the kernel writes at data_head, we read up to it and move data_tail)."""

    def __init__(self, fd: int, pages: int):
        self.fd = fd
        self.page = mmap.PAGESIZE
        self.map = mmap.mmap(fd, (1 + pages) * self.page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.size = pages * self.page

    def drain(self, samples: list, lost: list[int]) -> None:
        head = struct.unpack_from("<Q", self.map, 1024)[0]
        tail = struct.unpack_from("<Q", self.map, 1032)[0]
        base, size = self.page, self.size
        while tail < head:
            off = tail % size
            kind, _, length = HEADER.unpack(self._read(base, off, HEADER.size))
            if length < HEADER.size:
                break
            body = self._read(base, (off + HEADER.size) % size, length - HEADER.size)
            if kind == PERF_RECORD_SAMPLE and len(body) >= SAMPLE.size:
                ip, pid, tid, t = SAMPLE.unpack_from(body)
                samples.append((pid, tid, t, ip))
            elif kind == PERF_RECORD_LOST and len(body) >= 16:
                lost[0] += struct.unpack_from("<QQ", body)[1]
            tail += length
        struct.pack_into("<Q", self.map, 1032, tail)

    def _read(self, base: int, off: int, n: int) -> bytes:
        if off + n <= self.size:
            return self.map[base + off:base + off + n]
        first = self.size - off
        return self.map[base + off:base + self.size] + self.map[base:base + n - first]

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)


class CodeSampler:
    """Samples every task of the cgroup v2 folder `cgroup_dir` on every CPU from `start` to `stop`; a thread
    drains the ring buffers every `DRAIN_S` and then reads the executable mappings of each process that was
    sampled since its last read (a process that never runs costs nothing), within `SWEEP_SHARE_MAX`."""

    def __init__(self, cgroup_dir: str, period_ns: int = DEFAULT_PERIOD_NS, digest_under: str = ""):
        self.cgroup_dir, self.period_ns, self.digest_under = cgroup_dir, period_ns, digest_under
        self._digests: dict[tuple[int, int, int], str] = {}
        self._rings: list[_Ring] = []
        self._samples: list = []
        self._lost = [0]
        self._maps: list[MapsSnapshot] = []
        self._last: dict[int, int] = {}
        self._inner: dict[int, int] = {}
        self._flooded: set[int] = set()
        self._offsets: dict[tuple[int, int, int], int] = {}
        self._hashed_bytes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            cg_fd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as e:
            raise SamplerUnavailable(f"cgroup {cgroup_dir}: {e}") from e
        try:
            attr = _Attr(type=PERF_TYPE_SOFTWARE, size=ATTR_SIZE, config=PERF_COUNT_SW_TASK_CLOCK,
                         sample_period=period_ns, sample_type=PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
                         flags=FLAG_DISABLED | FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV | FLAG_USE_CLOCKID,
                         wakeup_events=0, clockid=CLOCK_MONOTONIC)
            for cpu in sorted(os.sched_getaffinity(0) | set(range(os.cpu_count() or 1))):
                fd = _perf_event_open(attr, cg_fd, cpu, PERF_FLAG_PID_CGROUP | PERF_FLAG_FD_CLOEXEC)
                try:
                    self._rings.append(_Ring(fd, RING_PAGES))
                except OSError as e:
                    os.close(fd)
                    raise SamplerUnavailable(f"perf ring buffer: {e}") from e
        except BaseException:
            self.close()
            raise
        finally:
            os.close(cg_fd)

    def start(self, drain: bool = True) -> None:
        """Enable the events; `drain=False` only imposes the sampling's cost (the paired reference: its ring
        buffers fill and the kernel counts what it drops)."""
        perf_event_ioc_enable = 0x2400
        for ring in self._rings:
            fcntl.ioctl(ring.fd, perf_event_ioc_enable, 0)
        if drain:
            self._thread = threading.Thread(target=self._run, daemon=True, name="code-sampler")
            self._thread.start()

    def _run(self) -> None:
        sampled: set[int] = set()  # processes with samples since their last read
        sweep_after = 0.0
        while not self._stop.is_set():
            before = len(self._samples)
            for ring in self._rings:
                ring.drain(self._samples, self._lost)
            sampled.update(s[0] for s in self._samples[before:])
            # read a sampled process's maps at the next drain, so a child whose calls and exit fit between two
            # reads (a short run on a loaded machine) still has a snapshot after its first call
            # (`code_attribution._regions`); 0.26 ms per read of a torch process
            if sampled and time.monotonic() >= sweep_after:
                t0 = time.monotonic()
                self.snapshot_maps(sampled)
                sampled = set()
                t1 = time.monotonic()
                sweep_after = t1 + (t1 - t0) * (1 / SWEEP_SHARE_MAX - 1)
            self._stop.wait(DRAIN_S)

    def snapshot_maps(self, only: set[int] | None = None) -> None:
        """Executable mappings of every process now in the cgroup (`only`: of those of them), consecutive equal
        reads merged."""
        try:
            with open(os.path.join(self.cgroup_dir, "cgroup.procs")) as f:
                pids = [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            return
        for pid in pids:
            if pid in self._flooded or (only is not None and pid not in only):
                continue
            t0 = time.monotonic_ns()
            regions = read_exec_maps(pid, offsets=self._offsets)
            if regions is None:
                self._flooded.add(pid)
                continue
            if not regions:
                continue
            if pid not in self._inner:
                self._inner[pid] = inner_pid(pid)
            self._digest_new(pid, regions)
            i = self._last.get(pid)
            if i is not None and self._maps[i].regions == regions:
                m = self._maps[i]
                self._maps[i] = MapsSnapshot(pid, m.first_ns, t0, regions)
            else:
                self._last[pid] = len(self._maps)
                self._maps.append(MapsSnapshot(pid, t0, t0, regions))

    def _digest_new(self, pid: int, regions: tuple[tuple[int, int, str], ...]) -> None:
        """sha256 of each mapped file under `digest_under`, read through the mapping itself
        (`/proc/<pid>/map_files/`), once per mapping: the bytes the process mapped, whatever its path says."""
        for lo, hi, path in regions:
            if not self.digest_under or not path.startswith(self.digest_under) or (pid, lo, hi) in self._digests:
                continue
            h = hashlib.sha256()
            try:
                with open(f"/proc/{pid}/map_files/{lo:x}-{hi:x}", "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    if self._hashed_bytes + size > DIGEST_MAX_BYTES:
                        self._flooded.add(pid)
                        self._digests[(pid, lo, hi)] = ""
                        continue
                    self._hashed_bytes += size
                    left = size  # a file that grows while read is hashed as it was
                    while left > 0 and (chunk := f.read(min(1 << 20, left))):
                        h.update(chunk)
                        left -= len(chunk)
                self._digests[(pid, lo, hi)] = h.hexdigest()
            except OSError:
                self._digests[(pid, lo, hi)] = ""

    def stop(self) -> Sampled:
        """Stop the thread, drain what is left, close the events."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for ring in self._rings:
            ring.drain(self._samples, self._lost)
        self.close()
        return Sampled(tuple(self._samples), self._lost[0], tuple(self._maps), self.period_ns, dict(self._digests),
                       dict(self._inner), tuple(sorted(self._flooded)), dict(self._offsets))

    def close(self) -> None:
        for ring in self._rings:
            ring.close()
        self._rings = []
