"""The profiled call as the child captures it: torch's profiler (or Nsight Compute's range) around one untimed
forward, reduced to the plain report the parent reads (`kernelbench.harness.insight.profiling.table_from_report`,
which says why the table is advisory only). torch is imported lazily: the parent imports the constants."""

from __future__ import annotations

import sys
from typing import Any, Iterable

# Imports inside functions: torch loads in the sandboxed child when it profiles; the parent's records
# (`insight.profiling`, `result`) import this module's constants without torch.

MARK = "kernel_agent::profiled_call"
"""Name of the range around the whole profiled call (its duration is the call's)."""
MAX_ROWS = 8
"""Rows kept per table (by self time)."""
MAX_REPORT_NAME = 256
"""Characters of a name the child sends (the parent shortens further)."""


def warm_up(device: str) -> None:
    """Start and stop the profiler once, early: Kineto starts its threads on first use, which must happen
    before the run child counts its threads and before it refuses new ones (`spawn_guard.refuse_new_tasks`).
    Both children call it, so both carry the same idle threads while timed."""
    import torch
    from torch.autograd import profiler

    # a range and an op inside it too: their first use initialises things lazily, which would otherwise land in
    # the profiled call (a reference's 80 µs ReLU once read 0.56 s)
    with profiler.profile(use_cpu=True, use_device="cuda" if device == "cuda" else None, use_kineto=True):
        with profiler.record_function(MARK):
            torch.zeros(8, device=device).add_(1)


def profile_call(model: Any, args: list[Any], device: str, kernels: Iterable[tuple[str, Any]] = ()) -> dict[str, Any]:
    """One forward of `model` on `args` under torch's profiler (the lower-level `torch.autograd.profiler`:
    `torch.profiler.profile` imports torch._inductor, seconds per child). `kernels` are (name, function) of the
    candidate's compiled extension functions: a profile hook records each call of one as a named range, since
    a pybind function is invisible to the dispatcher. Returns the plain report the parent reads with
    `table_from_report`."""
    import torch
    from torch.autograd import profiler

    names = {id(fn): name for name, fn in kernels}
    open_ranges: list[Any] = []

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and id(arg) in names:
            r = profiler.record_function(names[id(arg)])
            r.__enter__()
            open_ranges.append(r)
        elif event in ("c_return", "c_exception") and id(arg) in names and open_ranges:
            open_ranges.pop().__exit__(None, None, None)

    cuda = device == "cuda"
    with torch.no_grad(), profiler.profile(use_cpu=True, use_device="cuda" if cuda else None, use_kineto=True) as prof:
        with profiler.record_function(MARK):
            sys.setprofile(hook if names else None)
            try:
                model(*args)
            finally:
                sys.setprofile(None)
                while open_ranges:
                    open_ranges.pop().__exit__(None, None, None)
            if cuda:
                torch.cuda.synchronize()
    return table_report(prof.function_events, cuda)


def table_report(events: Any, cuda: bool) -> dict[str, Any]:
    """Rows aggregated by name from a profile's events (see the module docstring for what a row is)."""
    from torch.autograd import DeviceType

    marks = [e for e in events if e.name == MARK and e.cpu_parent is None]
    if not marks:
        raise RuntimeError("the profiled call's range is missing from the profile")
    mark = marks[0]
    totals: dict[str, list[float]] = {}
    launches = 0
    for e in events:
        if cuda:  # device events only; a range's copy on the GPU timeline (gpu_user_annotation) is not a kernel
            if e.device_type == DeviceType.CPU or getattr(e, "is_user_annotation", False) or e.name == MARK:
                continue
            self_us = float(e.time_range.elapsed_us())
            launches += 1
        else:
            if e.device_type != DeviceType.CPU or e is mark:
                continue
            self_us = float(e.self_cpu_time_total)
        row = totals.setdefault(str(e.name)[:MAX_REPORT_NAME], [0.0, 0])
        row[0] += self_us
        row[1] += 1
    if not cuda:
        launches = len(mark.cpu_children)
    rows = sorted(([name, t, n] for name, (t, n) in totals.items()), key=lambda r: -r[1])[:4 * MAX_ROWS]
    return {"ok": True, "call_us": float(mark.cpu_time_total), "launches": launches, "rows": rows}


def ncu_call(model: Any, args: list[Any]) -> dict[str, Any]:
    """The call Nsight Compute measures: bracketed by cudaProfilerStart/Stop, ncu running with
    `--profile-from-start off`, so only this call's kernels are replayed (`kernelbench.harness.insight.ncu`)."""
    import torch

    with torch.no_grad():
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        try:
            model(*args)
            torch.cuda.synchronize()
        finally:
            torch.cuda.profiler.stop()
    return {"ok": True, "ncu": True}
