"""Profiler-guided feedback: which kernels one untimed call of the candidate (and of the reference) spent its
time in, for the agent's next turn.

Where it runs (kernelbench.harness.child.worker): the run child profiles one extra forward only AFTER its final report is in
the parent's pipe, so nothing in this step can change the verdict or the timing; the table follows as one more
frame (`report.PROFILE_LABEL`). The reference child profiles its own call the same way after its timing.

Why it is advisory only: the candidate's code runs inside the profiled call, so it can see that a profiler is
on and behave differently, emit ranges of its own with any name (very long, imitating the reference's ops,
carrying newlines or instructions), or stop the profiler. So the table is never scored, every name is reduced
to a short identifier (`sanitise_name`) before it reaches a prompt, numbers are clamped, and a table that does
not parse is dropped with a note (`Profile.unavailable`), never turned into a verdict.

What a row is: on CPU, each op the call ran (aten ops, and each of the candidate's compiled extension
functions, recorded as a named range around its call), aggregated by name, by self time; `launches` of a table
is the number of top-level calls the forward made. On CUDA, each GPU kernel (and memcpy/memset) by device
time; `launches` is the number of kernels launched. `share` is a row's fraction of the whole profiled call
(wall time, device synchronised at its end). Nsight Compute rows (`kernelbench.harness.insight.ncu`) add per-kernel hardware
counters when asked for (`EvalConfig.profile == "ncu"`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from kernelbench.harness.child.profiler import MARK, MAX_REPORT_NAME, MAX_ROWS  # noqa: F401 (the child's capture limits, read here)

MAX_NAME = 48
"""Characters of a kernel name kept for the prompt."""
FEEDBACK_ROWS = 3
"""Rows per side shown in the feedback text."""
_NOT_NAME = re.compile(r"[^A-Za-z0-9_:<>,.*&+\-\[\]]+")


def sanitise_name(name: Any) -> str:
    """A kernel name as a short identifier: the argument list of a CUDA signature and a leading `void` dropped,
    every run of other characters (spaces, newlines, backticks, quotes, non-ASCII) made one `_`, cut to MAX_NAME.
    The candidate chooses its names, so this is what keeps them from carrying text into the prompt."""
    s = str(name).strip()
    if s.startswith("void "):
        s = s[5:]
    call = re.search(r"[\w>]\(", s)  # a signature's argument list (not "Memset (Device)")
    if call:
        s = s[:call.start() + 1]
    s = _NOT_NAME.sub("_", s).strip("_")
    if len(s) > MAX_NAME:
        s = s[:MAX_NAME - 3] + "..."
    return s or "?"


def _number(value: Any, low: float = 0.0, high: float = math.inf) -> float:
    """A finite float in [low, high]; anything else raises ValueError (the child's report is untrusted)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"not a finite number: {str(value)[:40]!r}")
    return min(max(float(value), low), high)


@dataclass(frozen=True)
class ProfileRow:
    """One kernel (or op) of a profiled call."""

    name: str
    """Sanitised name (`sanitise_name`): chosen by whoever wrote the kernel, so advisory."""
    self_time_us: float
    """Time in this kernel itself (CPU: the op's self time; CUDA: device time), summed over its launches."""
    share: float
    """self_time_us over the whole profiled call's time, in [0, 1]."""
    launches: int
    """Times it ran in the call."""


@dataclass(frozen=True)
class NcuRow:
    """One kernel's hardware counters from Nsight Compute (`--profile ncu`), averaged over its launches by duration."""

    name: str
    """Sanitised kernel name."""
    launches: int
    duration_us: float
    """gpu__time_duration.sum over its launches (under ncu's replay, caches flushed: not the timed figure)."""
    dram_throughput_pct: float
    """dram__throughput.avg.pct_of_peak_sustained_elapsed."""
    sm_throughput_pct: float
    """sm__throughput.avg.pct_of_peak_sustained_elapsed."""
    achieved_occupancy_pct: float
    """sm__warps_active.avg.pct_of_peak_sustained_active."""


@dataclass(frozen=True)
class ProfileTable:
    """The top kernels of one profiled call (empty when not profiled)."""

    rows: tuple[ProfileRow, ...] = ()
    """At most MAX_ROWS, largest self time first."""
    call_us: float = 0.0
    """Wall time of the profiled call (device synchronised), profiler overhead included."""
    launches: int = 0
    """CPU: top-level calls the forward made; CUDA: kernels launched."""
    ncu_rows: tuple[NcuRow, ...] = ()
    """Nsight Compute counters per kernel (empty unless `--profile ncu` on CUDA)."""

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [vars(r).copy() for r in self.rows], "call_us": self.call_us, "launches": self.launches,
                "ncu_rows": [vars(r).copy() for r in self.ncu_rows]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ProfileTable":
        return cls(rows=tuple(ProfileRow(**r) for r in d.get("rows", ())), call_us=d.get("call_us", 0.0),
                   launches=d.get("launches", 0), ncu_rows=tuple(NcuRow(**r) for r in d.get("ncu_rows", ())))


@dataclass(frozen=True)
class Profile:
    """The candidate's and the reference's tables for one correct, timed evaluation; advisory, never scored."""

    candidate: ProfileTable = field(default_factory=ProfileTable)
    reference: ProfileTable = field(default_factory=ProfileTable)
    tool: str = ""
    """`torch.profiler`, `torch.profiler+ncu`, or empty when nothing was profiled (not correct, or profiling off)."""
    unavailable: str = ""
    """Why a table (or the ncu part) is missing: the profiler failed, the profiled call raised, crashed or hung,
    or its report did not parse. Empty when every asked-for table came back."""

    def to_dict(self) -> dict[str, Any]:
        return {"candidate": self.candidate.to_dict(), "reference": self.reference.to_dict(), "tool": self.tool,
                "unavailable": self.unavailable}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "Profile":
        d = d or {}
        return cls(candidate=ProfileTable.from_dict(d.get("candidate") or {}),
                   reference=ProfileTable.from_dict(d.get("reference") or {}), tool=d.get("tool", ""),
                   unavailable=d.get("unavailable", ""))

    def summary(self) -> str:
        """The feedback lines: both tables, compactly ("your kernel: 3 launches, 71 % in `relu_k`; ...")."""
        if not self.tool:
            return ""
        head = f"profile of one extra untimed call ({self.tool}; advisory, names as the kernels report them):"
        lines = [head]
        for who, table in (("your kernel", self.candidate), ("reference", self.reference)):
            if table.rows or table.launches:
                lines.append(f"  {who}: {table_text(table)}")
            for r in table.ncu_rows[:FEEDBACK_ROWS]:
                lines.append(f"    ncu `{r.name}`: DRAM {r.dram_throughput_pct:.0f} % of peak, SM {r.sm_throughput_pct:.0f} %"
                             f", occupancy {r.achieved_occupancy_pct:.0f} %")
        if self.unavailable:
            lines.append(f"  profile unavailable: {self.unavailable}")
        return "\n".join(lines)


def table_text(table: ProfileTable) -> str:
    """One side of the feedback: launches, then the share of the top rows (those that round to at least 1 %)."""
    parts = [f"{table.launches} launch" + ("es" if table.launches != 1 else "")]
    parts += [f"{r.share * 100:.0f} % in `{r.name}`" + (f" (x{r.launches})" if r.launches > 1 else "")
              for r in table.rows[:FEEDBACK_ROWS] if r.share >= 0.005]  # rows that round to 0 % say nothing
    return ", ".join(parts)


def table_from_report(report: Any) -> ProfileTable:
    """The parent's reading of a child's profile report (untrusted: types checked, numbers clamped, names
    sanitised, rows capped and re-sorted); raises ValueError when it does not parse or says the step failed."""
    if not isinstance(report, dict):
        raise ValueError("the profile report is not an object")
    if not report.get("ok"):
        raise ValueError(str(report.get("error") or "the profile step failed")[:300])
    call_us = _number(report.get("call_us"))
    raw = report.get("rows")
    if not isinstance(raw, list):
        raise ValueError("the profile report has no rows")
    rows = []
    for item in raw[:4 * MAX_ROWS]:
        if not isinstance(item, list) or len(item) != 3:
            raise ValueError("malformed profile row")
        name, self_us, launches = item
        self_us = _number(self_us)
        rows.append(ProfileRow(sanitise_name(name), round(self_us, 3),
                               round(min(self_us / call_us, 1.0), 4) if call_us > 0 else 0.0,
                               int(_number(launches, 0, 1e9))))
    rows.sort(key=lambda r: -r.self_time_us)
    return ProfileTable(rows=tuple(rows[:MAX_ROWS]), call_us=round(call_us, 3),
                        launches=int(_number(report.get("launches", 0), 0, 1e9)))
