"""CUDA-only adversarial candidates (tests/adversarial/cuda_*.py); run on a GPU machine (`gpu` mark).

Same two passes as tests/test_adversarial.py: static checks on (rejected with the rule's flag, nothing
compiled) and, where a static rule covers the attack, static checks off so the run-time defence is judged
alone. CUDA `load_inline` builds take 30-90 s each cold, so there are three compiled candidates.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelbench.harness.config import EvalConfig
from kernelbench.harness.evaluate import evaluate
from kernelbench.harness.result import CORRECT, INCORRECT, REJECTED, RUNTIME_ERROR, EvalResult
from kernelbench.tasks.task import Task
from rewards import kernel_score

pytestmark = pytest.mark.gpu

ADVERSARIAL = Path(__file__).parent / "adversarial"
RELU = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
'''
TASK = Task(id="adv/relu_cuda", level=1, name="relu_cuda", origin="test", source=RELU)


def config(cache: str, static_checks: bool = True) -> EvalConfig:
    return EvalConfig(device="cuda", size="gpu", build_cache_dir=cache, static_checks=static_checks,
                      timing_trials=30, compile_timeout_s=400.0, run_timeout_s=120.0)


def run(cache: str, name: str, static_checks: bool = True) -> EvalResult:
    return evaluate(TASK, (ADVERSARIAL / name).read_text(), config(cache, static_checks))


def describe(result: EvalResult) -> str:
    return f"status={result.status} score={kernel_score(result)} flags={result.flags}\n{result.feedback}"


def assert_zero(result: EvalResult) -> None:
    assert kernel_score(result) == 0.0 and not result.correct, describe(result)


@pytest.mark.parametrize("name, flag", [("cuda_side_stream.py", "static:side_streams"),
                                        ("cuda_patch_event.py", "static:timer_or_torch_patching"),
                                        ("cuda_thread_forward.py", "static:threads_or_processes")])
def test_static_checks_reject(name, flag, build_cache_dir):
    result = run(build_cache_dir, name)
    assert result.status == REJECTED and flag in result.flags and not result.compiled, describe(result)
    assert_zero(result)


def test_side_stream_work_is_timed(build_cache_dir):
    """With static checks off the candidate is correct (outputs are read after a device-wide sync); what
    matters is that its ~0.1 ms-per-thread spin on the side stream shows up in the time."""
    result = run(build_cache_dir, "cuda_side_stream.py", static_checks=False)
    assert result.status in (REJECTED, INCORRECT) or result.speedup < 1.0, describe(result)
    assert "suspicious_speedup" not in result.flags, describe(result)
    if result.runtime_ms:
        assert result.runtime_ms > result.ref_runtime_ms, describe(result)


def test_patched_event_detected(build_cache_dir):
    result = run(build_cache_dir, "cuda_patch_event.py", static_checks=False)
    assert result.status == REJECTED and "dynamic:timer_patched" in result.flags, describe(result)
    assert_zero(result)


def test_reused_output_memory_is_not_the_answer(build_cache_dir):
    result = run(build_cache_dir, "cuda_reuse_output_memory.py")
    assert result.status == INCORRECT, describe(result)
    assert_zero(result)


def test_zeroed_inputs_detected(build_cache_dir):
    result = run(build_cache_dir, "cuda_zero_inputs.py")
    assert result.status == INCORRECT and "modified in place" in result.feedback, describe(result)
    assert_zero(result)


def test_new_threads_refused_on_cuda_while_an_honest_kernel_stays_correct(build_cache_dir):
    """The run child refuses every new thread and process after `__init__` on CUDA too. The CUDA context, the
    driver's threads, a cuBLAS handle and a first launch exist before the refusal (`candidate_run.warm_up`), so an
    honest load_inline kernel is still correct; a kernel that launches from a `std::thread` in forward is not
    allowed to start it (a `runtime_error`, not a hidden thread)."""
    honest = evaluate(TASK, (Path(__file__).parent / "fixtures" / "core" / "cuda_relu.py").read_text(),
                      config(build_cache_dir, static_checks=False))
    assert honest.status == CORRECT and kernel_score(honest) > 0, describe(honest)
    result = run(build_cache_dir, "cuda_thread_forward.py", static_checks=False)
    assert result.status == RUNTIME_ERROR, describe(result)
    assert "Resource temporarily unavailable" in result.feedback, describe(result)
    assert_zero(result)
