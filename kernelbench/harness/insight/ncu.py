"""Nsight Compute (`ncu`) for `--profile ncu`: the command that wraps a run child, and the reading of its CSV.

Why a separate child: ncu replays every kernel it profiles several times and injects itself into the process,
so the candidate's timed run never runs under it. After a correct verdict on CUDA, a second run child (no
timing) runs under `ncu --profile-from-start off`, and its profiled call is bracketed by cudaProfilerStart /
Stop (`child.profiler.ncu_call`): only that call's kernels are measured. The metric set is fixed (METRICS). What
comes back is advisory like the rest of the profile: the log file lies in the child's scratch folder, which the
candidate can write, so every name is sanitised and every number clamped.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
from typing import Any

from kernelbench.harness.insight.profiling import MAX_ROWS, NcuRow, sanitise_name

DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
DURATION = "gpu__time_duration.sum"
METRICS = (DRAM, SM, OCCUPANCY, DURATION)
LOG_FILE = "ncu.csv"
MAX_LOG_BYTES = 8 << 20
_TIME_UNITS_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
                  "second": 1e6, "s": 1e6}


def find() -> str:
    """Path of the `ncu` executable, or empty when Nsight Compute is not installed."""
    found = shutil.which("ncu")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"):
        path = os.path.join(home, "bin", "ncu") if home else ""
        if path and os.access(path, os.X_OK):
            return path
    return ""


def command(ncu: str, argv: tuple[str, ...], log_path: str) -> tuple[str, ...]:
    """`argv` run under ncu: only the cudaProfilerStart/Stop range, the fixed metrics, CSV into `log_path`
    (base units, so durations are nanoseconds)."""
    return (ncu, "--csv", "--print-units", "base", "--profile-from-start", "off", "--target-processes", "all",
            "--metrics", ",".join(METRICS), "--log-file", log_path, *argv)


def _value(text: str) -> float:
    """A metric value as ncu prints it ("86.52", "1,024", "n/a")."""
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return float("nan")


def parse_csv(text: str) -> tuple[NcuRow, ...]:
    """Per-kernel rows from `ncu --csv` output (the details page: one line per kernel launch and metric, after
    any `==PROF==` lines): launches counted by the `ID` column, durations summed, percentages averaged over
    launches weighted by duration, names sanitised, largest total duration first. Raises ValueError when no
    header with the needed columns is found."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID",')), -1)
    if start < 0:
        raise ValueError("no ncu CSV header in the log")
    reader = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    need = {"ID", "Kernel Name", "Metric Name", "Metric Value"}
    if not need <= set(reader.fieldnames or ()):
        raise ValueError(f"the ncu CSV lacks columns {sorted(need - set(reader.fieldnames or ()))}")
    launches: dict[str, dict[str, float]] = {}
    names: dict[str, str] = {}
    for row in reader:
        launch = row.get("ID") or ""
        metric = row.get("Metric Name") or ""
        if not launch or metric not in METRICS:
            continue
        value = _value(row.get("Metric Value") or "")
        if metric == DURATION:
            value *= _TIME_UNITS_US.get((row.get("Metric Unit") or "nsecond").strip(), 1e-3)
        launches.setdefault(launch, {})[metric] = value
        names[launch] = sanitise_name(row.get("Kernel Name") or "?")
    by_name: dict[str, list[dict[str, float]]] = {}
    for launch, metrics in launches.items():
        by_name.setdefault(names[launch], []).append(metrics)
    rows = [_row(name, ms) for name, ms in by_name.items()]
    rows.sort(key=lambda r: -r.duration_us)
    return tuple(rows[:MAX_ROWS])


def _row(name: str, launches: list[dict[str, Any]]) -> NcuRow:
    durations = [_clean(m.get(DURATION), 1e12) for m in launches]
    total = sum(durations)
    weights = durations if total > 0 else [1.0] * len(launches)

    def mean(metric: str) -> float:
        pairs = [(w, _clean(m.get(metric), 100.0)) for w, m in zip(weights, launches) if _finite(m.get(metric))]
        norm = sum(w for w, _ in pairs)
        return round(sum(w * v for w, v in pairs) / norm, 2) if norm > 0 else 0.0

    return NcuRow(name=name, launches=len(launches), duration_us=round(total, 3), dram_throughput_pct=mean(DRAM),
                  sm_throughput_pct=mean(SM), achieved_occupancy_pct=mean(OCCUPANCY))


def _finite(v: Any) -> bool:
    return isinstance(v, float) and v == v and abs(v) != float("inf")


def _clean(v: Any, high: float) -> float:
    return min(max(v, 0.0), high) if _finite(v) else 0.0


def read_log(path: str) -> tuple[NcuRow, ...]:
    """`parse_csv` of the log file (at most MAX_LOG_BYTES read); raises ValueError / OSError when unusable."""
    with open(path, "rb") as f:
        data = f.read(MAX_LOG_BYTES)
    return parse_csv(data.decode("utf-8", "replace"))
