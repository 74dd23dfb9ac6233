"""The sandboxed child: `python -m kernelbench.harness.child.worker SCRATCH` runs the job in SCRATCH/job.json.

The job is one of `protocol.CompileJob`, `ReferenceJob`, `RunJob`, read strictly (a missing or unknown field
ends the child before any candidate code runs, a harness error) and deleted before the mode runs:
- `compile`: import the candidate (its `load_inline` calls build into TORCH_EXTENSIONS_DIR) and check that
  it defines a `ModelNew` class (`run_compile`).
- `reference`: the task's trusted `Model` alone (`kernelbench.harness.child.reference`).
- `run`: the candidate through its audited phases (`kernelbench.harness.child.candidate_run`).
The compile and run children report over the parent's pipe (`kernelbench.harness.child.report`), echoing the job's
nonce; the reference child, which runs only trusted task code, writes `result.json` (`result_files.read_result`). Every
child ends with `os._exit` right after reporting, whatever happened before. Anything else a child prints is
only a log tail.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any, Callable

from kernelbench.harness.child import timing  # noqa: F401  (first: captures the timers before any candidate code runs)
from kernelbench.harness.child import spawn_guard  # noqa: E402,F401  (captures what it calls before candidate code)
from kernelbench.harness import protocol  # noqa: E402
from kernelbench.harness.child import build_manifest
from kernelbench.harness.child import candidate_run, prebuild, reference  # noqa: E402
from kernelbench.harness.child.candidate_run import import_candidate  # noqa: E402
from kernelbench.harness.child.progress import STARTED, UNTRUSTED, progress  # noqa: E402
from kernelbench.harness.child.result_files import RESULT_FILE  # noqa: E402

# Imports inside functions: the sandbox's import order: `timing` first (it captures the timers), the rest after; a
# job's own modules when it runs.

MAX_ERROR_CHARS = 1 << 20
"""Most characters of an import error the compile child reports (a compiler log inside torch's message)."""


def run_compile(job: protocol.CompileJob, scratch: str, reporter: Any) -> tuple[protocol.Fault | None, None]:
    """Import the candidate (which builds it). The outcome is returned to `main`, which sends it over the
    parent's pipe and ends the process: the old `result.json` in this scratch folder stayed writable by the
    candidate's code (a thread, or an `atexit` handler once the child left through an exception) after it
    was written. Whether `ModelNew` is a class is read from the module's dict (no module `__getattr__`);
    an import error's message is the candidate's own code (`__str__`), read once and guarded (`_text`)."""
    from kernelbench.harness.child import load_inline_hook

    load_inline_hook.patch_load_inline(job.device, job.pch_dir)
    stop_early_build, refused, as_fault = prebuild.stop, _refused, _refused_build  # captured before candidate code runs
    progress(UNTRUSTED, close=True)
    try:
        try:
            module = import_candidate(os.path.join(scratch, job.candidate))
        finally:
            stop_early_build()  # an early build the import never asked for is not the candidate's library
    except BaseException as e:  # SystemExit too: whatever stops the import is the candidate's compile fault
        error = _text(e)
        error = error[:MAX_ERROR_CHARS // 2] + error[-MAX_ERROR_CHARS // 2:] if len(error) > MAX_ERROR_CHARS else error
        return as_fault(refused) or protocol.Fault(phase="import", error=error, error_type=_name(e), oom=False,
                                                   traceback=_traceback_tail()), None
    if refused:  # a refused build, whether or not the candidate's code caught the error
        return as_fault(refused), None
    if not _isinstance(module.__dict__.get("ModelNew"), type):
        return protocol.Fault(phase="format", error="the candidate defines no class ModelNew", error_type="",
                              oom=False, traceback=""), None
    return None, None


def _refused_build(refused: list[str]) -> protocol.Fault | None:
    """The compile child's refused builds (`load_inline_hook`: flags `build_flags` does not allow) as the
    fault the parent rejects (`builder`: phase `build_flags`); None when there were none."""
    if not refused:
        return None
    return protocol.Fault(phase="build_flags", error="; ".join(map(str, refused))[:4000], error_type="BuildFlagsRefused",
                          oom=False, traceback="")


def _text(e: BaseException) -> str:
    """`Type: message` of an exception the candidate raised; its `__str__` is candidate code and may raise."""
    try:
        return f"{type(e).__name__}: {e}"
    except BaseException:
        return f"{type(e).__name__}: <the exception's message could not be read>"


def _name(e: BaseException) -> str:
    try:
        return str(type(e).__name__)
    except BaseException:
        return ""


def _traceback_tail() -> str:
    try:
        return traceback.format_exc()[-3000:]
    except BaseException:
        return ""


OOM_MARKERS = ("out of memory", "bad_alloc", "outofmemoryerror", "cudaerrormemoryallocation",
               "cublas_status_alloc_failed", "cannot allocate memory")
"""Lower-cased texts of allocation failures: MemoryError, C++ `std::bad_alloc` (pybind11 turns it into a
MemoryError whose message is `std::bad_alloc`), torch's CUDA OOM, cuBLAS / CUDA runtime allocation errors."""


def _describe(e: BaseException) -> dict[str, Any]:
    text = _text(e)
    oom = isinstance(e, MemoryError) or any(m in text.lower() for m in OOM_MARKERS)
    return {"error": text[:4000], "error_type": type(e).__name__, "oom": oom, "traceback": _traceback_tail()}


MODES: dict[str, Callable[..., tuple[Any, Callable[[], None] | None]]] = {
    "compile": run_compile, "reference": reference.run_reference, "run": candidate_run.run_candidate}
"""Each mode returns its outcome (`Fault | None` for compile, the mode's result record otherwise) and the
step `main` runs after sending the report (the run child's profiled call), or None."""


_exit, _flush_out, _flush_err = os._exit, sys.stdout.flush, sys.stderr.flush
_isinstance = isinstance
"""Captured at import, before any candidate code: how the child ends, and the builtin the compile child's
format check calls (a candidate can rebind `builtins.isinstance`)."""
_refused = build_manifest.REFUSED


def main(argv: list[str]) -> int:
    """Run the job, report, and end through `os._exit` on every path: no `atexit` handler, no C++ static
    destructor and no Python finaliser of candidate code runs after the report (they once rewrote the result
    files), and nothing the candidate raises (an exception whose `__str__` raises too) lets the child fall
    through to the interpreter's normal exit, which would run them."""
    end, flush_out, flush_err = _exit, _flush_out, _flush_err  # locals: the candidate may rebind the globals
    code = 3
    try:
        code = _main(argv)
    finally:
        try:
            flush_out()
            flush_err()
        except BaseException:
            pass
        end(code)
    return code  # not reached


def _main(argv: list[str]) -> int:
    from kernelbench.harness.child import report

    # before anything of the job: keyrings are the host kernel's, shared by every sandbox (`spawn_guard`)
    if not spawn_guard.refuse_keyrings() and spawn_guard.KEYRING_FILTER_EXPECTED:
        raise RuntimeError("the sandbox's seccomp filter (no kernel keyrings) could not be installed")
    scratch = argv[1]
    job_path = os.path.join(scratch, "job.json")
    with open(job_path) as f:
        raw = json.load(f)
    os.unlink(job_path)
    job = protocol.job_from_dict(raw)  # not exactly a job: the child ends here, before any candidate code
    trusted = _isinstance(job, protocol.ReferenceJob)
    progress(STARTED, close=trusted)  # the reference runs only trusted code
    # the compile and run children's verdicts travel over the parent's pipe (kernelbench.harness.child.report); opened
    # (and its write function captured) before any candidate code runs
    reporter = None if trusted else report.Reporter(job.report_fd)
    refused = _refused  # the run child's refused builds (`build_manifest`), held before candidate code runs
    outcome, after, fault = None, None, None
    try:
        outcome, after = MODES[job.mode](job, scratch, reporter)
    except BaseException as e:  # SystemExit / KeyboardInterrupt from candidate code are its faults, reported
        try:
            fault = protocol.Fault(phase=_phase_of(e), **_describe(e))
        except BaseException:
            fault = protocol.Fault(phase="unknown", error="an error whose description failed", error_type="",
                                   oom=False, traceback="")
    try:
        message = _report(job, outcome, fault, refused).to_dict()
        if reporter is not None:
            reporter.send_result(message)
        else:  # the reference child (trusted code only): a file in its scratch folder (`result_files.read_result`)
            tmp = os.path.join(scratch, RESULT_FILE + ".tmp")
            with open(tmp, "w") as f:
                json.dump(message, f, default=str)
            os.replace(tmp, os.path.join(scratch, RESULT_FILE))
    except BaseException:
        return 3
    if callable(after):  # the profiled call (run child): nothing it does can reach the report
        try:
            after()
        except BaseException:
            pass
    return 0


def _report(job: protocol.Job, outcome: Any, fault: protocol.Fault | None, refused: list[str]) -> Any:
    """The mode's report: a fault, or the outcome the mode returned (refusals are reported even when the
    candidate caught the error)."""
    if job.mode == "compile":
        return protocol.CompileReport(nonce=job.nonce, fault=fault or outcome)
    if job.mode == "reference":
        return protocol.ReferenceReport(nonce=job.nonce, fault=fault, result=None if fault else outcome)
    return protocol.RunReport(nonce=job.nonce, build_refused=tuple(str(r) for r in refused), fault=fault,
                              result=None if fault else outcome)


def _phase_of(e: BaseException) -> str:
    """The phase the run child was in when `e` escaped (read from the traceback's worker frames)."""
    tb = e.__traceback__
    phase = "unknown"
    while tb is not None:
        state = tb.tb_frame.f_locals.get("state")
        if tb.tb_frame.f_code.co_name == "run_candidate" and _isinstance(state, candidate_run.RunState):
            phase = state.phase
        tb = tb.tb_next
    return phase


if __name__ == "__main__":
    sys.exit(main(sys.argv))
