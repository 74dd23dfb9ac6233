"""`evaluate` end to end on CPU: real compiles, real sandboxed children, adversarial candidates.

C++ candidates live in tests/fixtures/core/ and build once per session (`build_cache_dir`); the
Python-level adversarial candidates below build nothing, so they cost only the two child processes.
Static checks are off in those: they prove the sandbox and the dynamic checks hold by themselves.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from kernelbench.harness import compare
from kernelbench.harness.isolation import cgroups
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.evaluate import evaluate
from kernelbench.executors.evaluator import Evaluator
from kernelbench.harness.result import EvalResult
from kernelbench.tasks.task import Task
from rewards import kernel_score

FIXTURES = Path(__file__).parent / "fixtures" / "core"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


RELU = Task(id="test/relu", level=1, name="relu", origin="test", source=fixture("relu_task.py"))


def fault_task(mode: int) -> Task:
    return Task(id=f"test/fault{mode}", level=1, name="fault", origin="test",
                source=fixture("fault_task.py").replace("MODE = 1", f"MODE = {mode}"))


@pytest.fixture(scope="module")
def cfg(build_cache_dir) -> EvalConfig:
    return EvalConfig(build_cache_dir=build_cache_dir, timing_trials=30, run_timeout_s=90, static_checks=False)


@pytest.fixture(scope="module")
def pycfg(cfg) -> EvalConfig:
    """For candidates that are plain PyTorch on purpose: the op policy would reject them before anything else."""
    return replace(cfg, op_checks=False)


def test_correct_relu_is_correct_timed_and_recorded(cfg):
    r = evaluate(RELU, fixture("relu_ok.py"), cfg)
    assert r.status == "correct", r.feedback
    assert r.correct and r.compiled and r.max_abs_error == 0.0
    # paired timing (CPU default): the speedup is the median of per-round ratios, near the ratio of the medians
    assert r.runtime_ms > 0 and r.ref_runtime_ms > 0 and r.conditions.timing_rounds == cfg.timing_rounds
    assert 0.5 < r.speedup / (r.ref_runtime_ms / r.runtime_ms) < 2
    assert kernel_score(r) == pytest.approx(0.3 + r.speedup)  # the score is rewards/' alone
    assert "score" not in r.to_dict()
    c = r.conditions
    assert c.device == "cpu" and c.cpu_threads == 1 and c.device_name and c.torch_version == torch.__version__
    assert c.correctness_trials == cfg.correctness_trials + cfg.extra_distribution_trials == len(c.input_seeds)
    assert c.timing_trials >= 5 and c.sandbox in ("bwrap", "rlimits") and c.op_policy == "strict"
    assert "speedup" in r.feedback
    # speed of light: a memory-bound task; an honest kernel cannot beat the machine's measured ceilings
    assert 0 < r.sol_fraction <= 1.05 and r.sol_bound == "memory" and r.roofline_ms > 0, r.feedback
    assert r.sol_fraction == pytest.approx(r.roofline_ms / r.runtime_ms) and "speed of light: at" in r.feedback
    assert EvalResult.from_dict(json.loads(r.to_json())) == r
    # the run child's cgroup held every required limit, and the record says so (strictly: unknown names fail)
    assert set(cgroups.REQUIRED) <= set(r.limits_held) and cgroups.TMPFS in r.limits_held, r.limits_held
    with pytest.raises(ValueError, match="limits_held"):
        EvalResult.from_dict({**r.to_dict(), "limits_held": ["memory", "unbounded"]})
    assert EvalResult.from_dict({k: v for k, v in r.to_dict().items() if k != "limits_held"}).limits_held == ()
    again = evaluate(RELU, fixture("relu_ok.py"), cfg)
    assert again.status == "correct" and again.cached_build
    assert again.conditions.init_seed != c.init_seed  # fresh seeds each evaluation


def test_a_reduced_precision_type_is_noted_in_a_correct_results_feedback(cfg):
    """`static_checks.source_warnings` rejects nothing; the model reads what was seen."""
    src = fixture("relu_ok.py").replace("auto xc = x.contiguous();", "auto xc = x.contiguous(); (void)at::kHalf;")
    r = evaluate(RELU, src.replace("core_relu_ok", "core_relu_noted"), cfg)
    assert r.status == "correct", r.feedback
    assert "note: reduced-precision type in kernel: 'at::kHalf'" in r.feedback
    assert "note:" not in evaluate(RELU, fixture("relu_ok.py"), cfg).feedback


def test_wrong_kernel_is_incorrect_with_the_mismatch(cfg):
    r = evaluate(RELU, fixture("relu_off_by_one.py"), cfg)
    assert r.status == "incorrect" and not r.correct and kernel_score(r) == 0.0
    assert r.max_abs_error == pytest.approx(1.0)
    assert "outside atol" in r.feedback and "expected" in r.feedback


def test_compile_error_reports_compiler_lines(cfg):
    r = evaluate(RELU, fixture("relu_compile_error.py"), cfg)
    assert r.status == "compile_error" and not r.compiled
    assert "error:" in r.feedback and "main.cpp" in r.feedback
    cached = evaluate(RELU, fixture("relu_compile_error.py"), cfg)
    assert cached.status == "compile_error" and cached.cached_build


def test_crashes_hangs_and_exits_are_results(cfg):
    src = fixture("faults.py")
    seg = evaluate(fault_task(1), src, cfg)
    assert seg.status == "runtime_error" and "SIGSEGV" in seg.feedback, seg.feedback
    ex = evaluate(fault_task(3), src, cfg)
    assert ex.status == "runtime_error" and "without reporting" in ex.feedback, ex.feedback
    hang = evaluate(fault_task(2), src, replace(cfg, run_timeout_s=20))
    assert hang.status == "timeout" and kernel_score(hang) == 0.0
    after = evaluate(RELU, fixture("relu_ok.py"), cfg)  # the harness goes on
    assert after.status == "correct"


def test_evaluator_runs_candidates_concurrently(cfg):
    items = [(RELU, fixture("relu_ok.py")), (RELU, fixture("relu_off_by_one.py")), (RELU, "class Nope: pass\n")]
    with Evaluator(cfg, compile_workers=2, run_workers=1) as ev:
        results = ev.evaluate_many(items)
    assert [r.status for r in results] == ["correct", "incorrect", "format_error"]


# Python-level candidates: no extension to build.
PRELUDE = "import torch\nimport torch.nn as nn\n"


def py_candidate(forward: str, top: str = "") -> str:
    return PRELUDE + top + ("\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                            "    def forward(self, x):\n" + "".join(f"        {ln}\n" for ln in forward.splitlines()))


@pytest.mark.parametrize("src,needle", [
    ("def broken(:\n", "syntax error"),
    (PRELUDE + "class Model(nn.Module):\n    pass\n", "ModelNew"),
])
def test_format_errors(cfg, src, needle):
    r = evaluate(RELU, src, cfg)
    assert r.status == "format_error" and needle in r.feedback


def test_input_mutation_is_caught(pycfg):
    r = evaluate(RELU, py_candidate("return x.relu_()"), pycfg)
    assert r.status == "incorrect" and "modified in place" in r.feedback, r.feedback


def test_timer_patching_is_rejected(pycfg):
    src = py_candidate("return torch.relu(x)", top="import time\ntime.perf_counter = lambda: 0.0\n")
    r = evaluate(RELU, src, pycfg)
    assert r.status == "rejected" and "dynamic:timer_patched" in r.flags and kernel_score(r) == 0.0


def test_thread_started_in_forward_cannot_start(pycfg):
    """After `__init__` the run child can start no thread (`spawn_guard.refuse_new_tasks`): the start fails inside
    forward, a fault of the candidate's, score 0."""
    forward = "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\nreturn torch.relu(x)"
    r = evaluate(RELU, py_candidate(forward), pycfg)
    assert r.status == "runtime_error" and "thread" in r.feedback and kernel_score(r) == 0.0, r.feedback


def test_sys_exit_in_forward_is_runtime_error(pycfg):
    r = evaluate(RELU, py_candidate("import sys\nsys.exit(0)"), pycfg)
    assert r.status == "runtime_error" and "SystemExit" in r.feedback


def test_result_cache_keyed_by_pointer_fails(pycfg):
    forward = ("key = x.data_ptr()\n"
               "if key not in CACHE:\n    CACHE[key] = torch.relu(x)\n"
               "return CACHE[key].clone()")
    r = evaluate(RELU, py_candidate(forward, top="CACHE = {}\n"), pycfg)
    assert r.status == "incorrect"


def test_tensor_subclass_output_is_incorrect(pycfg):
    top = "class Lazy(torch.Tensor):\n    pass\n"
    r = evaluate(RELU, py_candidate("return torch.relu(x).as_subclass(Lazy)", top=top), pycfg)
    assert r.status == "incorrect" and "subclass" in r.feedback


def test_identity_on_nonnegative_inputs_fails_other_distributions(pycfg):
    task = replace(RELU, id="test/relu_rand", source=RELU.source.replace("torch.randn(batch_size, dim)",
                                                                         "torch.rand(batch_size, dim)"))
    r = evaluate(task, py_candidate("return x.clone()"), pycfg)
    assert r.status == "incorrect" and "input set" in r.feedback


def test_compare_nan_positions_dtype_and_strides():
    atol = rtol = {"float32": 1e-4}
    a = torch.tensor([1.0, float("nan"), 3.0])
    assert compare.compare_tensor(a, a.clone(), atol, rtol).ok
    assert not compare.compare_tensor(torch.tensor([1.0, 2.0, 3.0]), a, atol, rtol).ok
    assert "dtype" in compare.compare_tensor(a.double(), a, atol, rtol).reason
    assert "shape" in compare.compare_tensor(a[:2], a, atol, rtol).reason
    inf = torch.tensor([float("inf")])
    assert compare.compare_tensor(inf, inf.clone(), atol, rtol).ok
    assert not compare.compare_tensor(inf, torch.tensor([1e30]), atol, rtol).ok
    meta = [{"exact_tensor": True, "device": "cpu", "dense": False, "layout": "torch.strided"}]
    assert "strides" in compare.compare_outputs([a], [a], meta, "cpu", atol, rtol).reason
    assert "modified" in compare.inputs_unchanged([a], [a + 1])
    assert compare.inputs_unchanged([a, 3], [a.clone(), 3]) == ""


def test_report_frames_keep_order_and_refuse_anything_else():
    """`kernelbench.harness.child.report`: frames over a real pipe; a repeated or unexpected label, a frame out of sequence
    or bytes after the final report void the report; a frame cut short is only truncated."""
    import os
    import threading

    from kernelbench.harness.child import report

    def sent(write) -> bytes:
        read_fd, write_fd = os.pipe()
        chunks: list[bytes] = []
        reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(read_fd, 1 << 16), b"")))
        reader.start()
        write(report.Reporter(write_fd))
        os.close(write_fd)
        reader.join()
        os.close(read_fd)
        return b"".join(chunks)

    def honest(r):
        r.send_tensors("forward/0", {"outputs": [torch.arange(70000.0)], "inputs_after": [None]})
        r.send_tensors("check/0", {"outputs": [torch.ones(2)], "inputs_after": [torch.zeros(2)]})
        r.send_result({"ok": True, "nonce": "n"})

    data = sent(honest)
    frames = report.parse(data)
    assert not frames.problem and not frames.truncated and frames.result() == {"ok": True, "nonce": "n"}
    assert torch.equal(frames.tensors("forward/0")["outputs"][0], torch.arange(70000.0))
    assert frames.tensors("check/0")["inputs_after"][0].shape == (2,)
    assert "after the final report" in report.parse(data + data[:40]).problem
    assert report.parse(data[:-5]).truncated and report.parse(data[:-5]).result() == {}
    repeated = sent(lambda r: (r.send_bytes("verify/0", b"a"), r.send_bytes("verify/0", b"b")))
    assert "repeated" in report.parse(repeated).problem
    assert "unexpected" in report.parse(sent(lambda r: r.send_bytes("outputs", b"x"))).problem
    forged = report.HEADER.pack(report.MAGIC, 5, 6, 2) + b"result{}"  # a sequence number out of turn
    assert "bad header" in report.parse(forged).problem


def test_check_calls_keep_only_argument_digests_and_a_sent_string_is_no_digest():
    """The parent keeps a check call's arguments as their digests (memory: `verdict._candidate_calls`); a frame
    that sends the expected digest itself, as a string, in place of the tensor is unreadable (`call_frames`
    decodes tensors and None only), and a plain string is never a `Digest`."""
    import json
    from types import SimpleNamespace

    from kernelbench.harness import verdict
    from kernelbench.harness.child import call_frames, report
    from kernelbench.harness.child.outputs import tensor_digest

    x = torch.arange(6.0)

    def frames_with(parts):
        return report.Frames(payloads={"check/0": memoryview(b"".join(bytes(memoryview(p)) for p in parts))})

    ref = SimpleNamespace(outputs=[], timing_outputs=[], check_outputs=[[x * 2]])
    honest = verdict._candidate_calls(frames_with(call_frames.encode({"outputs": [x * 2], "inputs_after": [x.clone()]})), ref, 1)
    assert honest["checks"][0].inputs_after == [tensor_digest(x)]
    assert compare.inputs_match([tensor_digest(x)], honest["checks"][0].inputs_after) == ""
    parts = call_frames.encode({"outputs": [x * 2], "inputs_after": [None]})
    head = json.dumps({"outputs": [["float32", [6]]], "inputs_after": [tensor_digest(x)]}).encode()
    body = call_frames.PREFIX.size + len(head)
    body += -body % call_frames.ALIGN
    forged = [(call_frames.PREFIX.pack(call_frames.MAGIC, len(head), body) + head).ljust(body, b"\0")] + parts[1:]
    with pytest.raises(ValueError, match="bad tensor spec in inputs_after"):
        verdict._candidate_calls(frames_with(forged), ref, 1)
    assert "input 0" in compare.inputs_match([tensor_digest(x)], [tensor_digest(x)])  # a plain string is no Digest


def test_call_frames_read_back_exactly_and_refuse_anything_else():
    """`call_frames.decode` gives back what `encode` wrote (every dtype a kernel returns, empty and 0-d
    tensors, None arguments) and refuses a payload cut short, padded, with an unknown dtype, or with a shape
    larger than its bytes (checked before anything is allocated)."""
    import json

    from kernelbench.harness.child import call_frames

    rec = {"outputs": [torch.randn(3, 5), torch.tensor(2.0), torch.zeros(0, 4), torch.ones(7, dtype=torch.bool),
                       torch.randn(3, dtype=torch.complex64), torch.randn(5).half(), torch.randn(4).bfloat16()],
           "inputs_after": [None, torch.arange(9)]}
    for start in (0, 3):  # the payload's place in the stream: the tensors in place when aligned, else copied
        payload = b"".join(bytes(memoryview(p)) for p in call_frames.encode(rec, start))
        data = bytearray(bytes(64 + start) + payload)
        back = call_frames.decode(memoryview(data)[64 + start:])
        assert back["inputs_after"][0] is None
        for a, b in zip(rec["outputs"] + rec["inputs_after"][1:], back["outputs"] + back["inputs_after"][1:]):
            assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
            assert b.data_ptr() % b.element_size() == 0
    huge = json.dumps({"outputs": [["float32", [10 ** 12]]], "inputs_after": []}).encode()
    for bad in (payload[:-1], payload + bytes(64), payload.replace(b'"float32"', b'"object!"'), b"KAT1\xff\xff\xff\xff",
                b"", call_frames.PREFIX.pack(call_frames.MAGIC, len(huge), 12 + len(huge)) + huge,
                payload[:8] + bytes(4) + payload[12:]):  # a body offset before the header's end
        with pytest.raises(ValueError):
            call_frames.decode(bad)


def test_frames_written_by_the_candidate_void_its_report(pycfg):
    """A candidate that writes a forged report into every pipe it can find, at import, before the harness's
    own frames: the parent sees frames out of sequence and rejects it."""
    top = ("import json, os, stat, struct\n"
           "payload = json.dumps({'ok': True, 'phase': 'done'}).encode()\n"
           "frame = struct.pack('>4sIHQ', b'KAR1', 0, 6, len(payload)) + b'result' + payload\n"
           "for fd in range(3, 256):\n"
           "    try:\n"
           "        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
           "            os.write(fd, frame)\n"
           "    except OSError:\n"
           "        pass\n")
    r = evaluate(RELU, py_candidate("return torch.relu(x)", top=top), pycfg)
    assert r.status == "rejected" and kernel_score(r) == 0.0, r.feedback
    assert "dynamic:harness_tampered" in r.flags or "timing_inconsistent" in r.flags, r.flags


def test_no_cgroups_is_a_harness_error_unless_allowed(cfg, monkeypatch):
    """A machine where a child's cgroup cannot hold its limits: the harness refuses to judge (a harness_error
    that says why and how to allow it), never a verdict under weaker limits than the config asked for."""
    monkeypatch.setattr(cgroups, "_mounts", lambda: ({}, ""))
    monkeypatch.delenv(cgroups.ALLOW_MISSING_ENV, raising=False)
    r = evaluate(RELU, fixture("relu_ok.py"), replace(cfg, build_cache_dir=cfg.build_cache_dir + "-nocg"))
    assert r.status == "harness_error" and "cgroup" in r.feedback and "allow_missing_cgroups" in r.feedback, r.feedback
