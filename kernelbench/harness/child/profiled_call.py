"""The children's profiled call: one untimed forward under torch's profiler (or Nsight Compute's range), sent
by the run child as the one frame allowed after its report (`report.PROFILE_LABEL`), so nothing it does can
change the verdict (`kernelbench.harness.insight.profiling`)."""

from __future__ import annotations

import json
import signal
from typing import Any

from kernelbench.harness.child import profiler, report as report_channel

_setitimer, _signal_handler, _SIGALRM = signal.setitimer, signal.signal, signal.SIGALRM


def warm_up(device: str) -> str:
    """Start the profiler once before timing (`profiler.warm_up`); what went wrong, or "": a profiler that cannot
    start is the harness's problem and costs only the profile, never the evaluation."""
    try:
        profiler.warm_up(device)
    except Exception as e:
        return f"the profiler could not start: {type(e).__name__}: {e}"[:300]
    return ""


def report(model: Any, args: list[Any], device: str, kernels: Any) -> dict[str, Any]:
    """The profile of one untimed call as the plain report the parent reads; a failure is a report too."""

    try:
        return profiler.profile_call(model, args, device, kernels)
    except BaseException as e:  # the profiler's fault or the call's: either way only the profile is lost
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}


def after_report(kind: str, model: Any, args: list[Any], device: str, reporter: Any, kernels: Any,
                 limit_s: float, error: str = "") -> None:
    """The run child's last step, after its report: the profiled call and its table as the trailer frame.
    `limit_s` (`EvalConfig.profile_timeout_s`): then SIGALRM at its default action ends the child, its report
    already sent."""

    _signal_handler(_SIGALRM, signal.SIG_DFL)
    _setitimer(signal.ITIMER_REAL, max(limit_s, 0.1))
    if error:
        payload = {"ok": False, "error": error}
    elif kind == "ncu":
        try:
            payload = profiler.ncu_call(model, args)
        except BaseException as e:
            payload = {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}
    else:
        payload = report(model, args, device, kernels)
    reporter.send_bytes(report_channel.PROFILE_LABEL, json.dumps(payload, default=str).encode())
