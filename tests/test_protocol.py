"""The parent-child protocol (`kernelbench.harness.protocol`): every message round-trips through JSON, and a
missing, unknown or mistyped field is an error, never a default."""

import json

import pytest

from kernelbench.harness import protocol
from kernelbench.harness.protocol import ProtocolError

SETUP = protocol.Setup(device="cpu", threads=1, init_seed=7, input_seeds=(1, 2), extra_seeds=(3,), warmup_trials=2,
                       timing_trials=20, timing_input_sets=2, timing_budget_s=15.0, min_trials=5,
                       timing_checks=((0, 11), (1, 12)), profile="torch", profile_timeout_s=30.0)
TIMING = protocol.Timing(median_ms=1.5, mean_ms=1.6, std_ms=0.1, min_ms=1.4, total_ms=32.0, trials=20, warmup=2)
JOBS = [
    protocol.CompileJob(nonce="ab", device="cpu", candidate="candidate.py", pch_dir="/pch", report_fd=5),
    protocol.ReferenceJob(nonce="cd", setup=SETUP, task=protocol.TaskFields(
        id="L1/03_gelu", level=1, name="03_gelu", origin="builtin", source="class Model: ...", path="", op_policy="strict"),
        size="cpu", time_compile=True, timing_seeds=(4, 5), paired=protocol.PipeFds(read_fd=3, write_fd=4)),
    protocol.RunJob(nonce="ef", setup=SETUP, candidate="candidate.py", pch_dir="", triton=False, trace_ops=True,
                    build_manifest={"ext/k.so": {"sha256": "00", "kind": "file"}}, refuse_exec_memory=True, report_fd=6,
                    paired=None),
]
FAULT = protocol.Fault(phase="forward", error="RuntimeError: boom", error_type="RuntimeError", oom=False, traceback="tb")
RUN_RESULT = protocol.RunResult(
    structures=("T",), output_meta=[[{"dtype": "float32", "shape": [4, 4], "dense": True}]], ops=("aten::empty",),
    kernel_calls=1, timer_patched=(), harness_tampered=("x.y (by the end of import)",), threads_before=3,
    threads_after=3, os_threads_before=5, os_threads_after=5,
    new_tasks_refused=protocol.TaskRefusal(rlimit=True, seccomp=True, refused=True, exec_memory=True), checks_installed=("kernel_calls",),
    timing=TIMING, timing_blocks=[[1.0, 2.0], [1.5]], call_windows_ns=((1, 2), (3, 5)))
REPORTS = [
    protocol.CompileReport(nonce="ab", fault=None),
    protocol.CompileReport(nonce="ab", fault=FAULT),
    protocol.ReferenceReport(nonce="cd", fault=None, result=protocol.ReferenceResult(
        structures=("T", "T"), work=protocol.Work(input_bytes=4096, estimated_ops=("cumsum",)), work_error="", set_configs=(0, 1), config_labels=("a", "b"),
        timing=TIMING, timing_blocks=None, profile={"ok": True, "rows": []}, compile_timing=None)),
    protocol.RunReport(nonce="ef", build_refused=("late.so",), fault=None, result=RUN_RESULT),
    protocol.RunReport(nonce="ef", build_refused=(), fault=FAULT, result=None),
]


def wire(data: dict) -> dict:
    """What the other end reads: the JSON text, parsed again."""
    return json.loads(json.dumps(data))


@pytest.mark.parametrize("job", JOBS, ids=lambda j: j.mode)
def test_every_job_round_trips(job):
    data = wire(protocol.job_to_dict(job))
    assert data["mode"] == job.mode
    assert protocol.job_from_dict(data) == job


@pytest.mark.parametrize("report", REPORTS, ids=lambda r: type(r).__name__)
def test_every_report_round_trips(report):
    assert type(report).from_dict(wire(report.to_dict())) == report
    assert protocol.decode_untrusted(type(report), wire(report.to_dict()), report.nonce) == report


def test_a_missing_field_is_an_error_not_a_default():
    data = wire(protocol.job_to_dict(JOBS[2]))
    del data["setup"]["min_trials"]
    with pytest.raises(ProtocolError, match=r"RunJob.setup: missing fields \['min_trials'\]"):
        protocol.job_from_dict(data)
    data = wire(REPORTS[3].to_dict())
    del data["result"]["kernel_calls"]
    with pytest.raises(ProtocolError, match="kernel_calls"):
        protocol.RunReport.from_dict(data)


def test_an_unknown_field_is_an_error():
    data = wire(protocol.job_to_dict(JOBS[0]))
    data["timing_budget_s"] = 1.0
    with pytest.raises(ProtocolError, match=r"unknown fields \['timing_budget_s'\]"):
        protocol.job_from_dict(data)
    data = wire(REPORTS[2].to_dict())
    data["result"]["timing"]["p99_ms"] = 3.0
    with pytest.raises(ProtocolError, match="p99_ms"):
        protocol.ReferenceReport.from_dict(data)
    with pytest.raises(ProtocolError, match="no job of mode"):
        protocol.job_from_dict({**protocol.job_to_dict(JOBS[0]), "mode": "probe"})


@pytest.mark.parametrize("path,value", [
    (("result", "kernel_calls"), "1"),  # a string where an int belongs
    (("result", "threads_after"), True),  # bool is not an int here
    (("result", "ops"), "aten::empty"),  # a string is not a list of strings
    (("result", "timing", "trials"), 2.5),
    (("result", "new_tasks_refused"), {"rlimit": True}),
    (("build_refused",), None),
])
def test_a_mistyped_field_is_an_error(path, value):
    data = wire(REPORTS[3].to_dict())
    holder = data
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    with pytest.raises(ProtocolError):
        protocol.RunReport.from_dict(data)


def test_an_untrusted_report_that_is_not_exactly_this_jobs_reads_as_none():
    good = wire(REPORTS[3].to_dict())
    assert protocol.decode_untrusted(protocol.RunReport, good, "ef") == REPORTS[3]
    assert protocol.decode_untrusted(protocol.RunReport, good, "another nonce") is None
    assert protocol.decode_untrusted(protocol.RunReport, {**good, "ok": True}, "ef") is None
    assert protocol.decode_untrusted(protocol.RunReport, {}, "ef") is None
    both = {**good, "fault": FAULT.to_dict()}  # a fault and a result: no report of any child
    assert protocol.decode_untrusted(protocol.RunReport, both, "ef") is None
    neither = {**good, "result": None}
    assert protocol.decode_untrusted(protocol.RunReport, neither, "ef") is None


def test_the_child_ends_on_a_job_with_a_field_missing(tmp_path):
    """A job the worker cannot read exactly ends it before it runs anything (exit 3 through `os._exit`, no
    report), which the parent reports as the harness's failure (`children.not_started`)."""
    import subprocess

    from kernelbench.harness.child import launch, result_files, worker

    data = protocol.job_to_dict(JOBS[1])
    del data["setup"]["timing_checks"]
    (tmp_path / "job.json").write_text(json.dumps(data))
    done = subprocess.run(launch.child_argv(str(tmp_path)), capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert not (tmp_path / result_files.RESULT_FILE).exists() and not (tmp_path / "job.json").exists()


def test_a_call_frame_is_read_as_exactly_a_call_record():
    """The tensor frames' payloads (`torch.load(weights_only=True)` of the child's dict) decode strictly too."""
    import io

    import torch

    buf = io.BytesIO()
    torch.save({"outputs": [torch.ones(2)], "inputs_after": [None]}, buf)
    call = protocol.CallRecord.from_dict(torch.load(io.BytesIO(buf.getvalue()), weights_only=True))
    assert torch.equal(call.outputs[0], torch.ones(2)) and call.inputs_after == [None]
    with pytest.raises(ProtocolError, match="unknown fields"):
        protocol.CallRecord.from_dict({"outputs": [], "inputs_after": [], "cached": True})
    with pytest.raises(ProtocolError, match="expected a list"):
        protocol.CallRecord.from_dict({"outputs": torch.ones(2), "inputs_after": []})
