"""The CUDA path of the harness (run on a GPU machine: `pytest -m gpu tests/test_evaluate_cuda.py`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kernelbench.harness.config import EvalConfig
from kernelbench.harness.evaluate import evaluate
from kernelbench.tasks.task import Task

pytestmark = pytest.mark.gpu
FIXTURES = Path(__file__).parent / "fixtures" / "core"
RELU = Task(id="test/relu", level=1, name="relu", origin="test", source=(FIXTURES / "relu_task.py").read_text())
ILLEGAL = Task(id="test/illegal", level=1, name="illegal", origin="test",
               source=(FIXTURES / "relu_task.py").read_text().replace("return []", "return [1]")
               .replace("def __init__(self):", "def __init__(self, mode=0):"))
MATMUL = Task(id="test/matmul", level=1, name="matmul", origin="test", source='''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


N = 4096


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
''')

NVRTC_RELU = '''
import cupy
import torch
import torch.nn as nn

CODE = r"""
extern "C" __global__ void relu(const float* x, float* y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = v > 0.f ? v : 0.f; }
}
"""
kernel = cupy.RawModule(code=CODE).get_function("relu")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
        with stream:
            kernel(((n + 255) // 256,), (256,), (cupy.asarray(x), cupy.asarray(y), cupy.int64(n)))
        return y
'''

SIDE_STREAM = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, a, b):
        if self.side is None:
            self.side = torch.cuda.Stream()
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            out = a @ b  # never joined back to the current stream: only a device-wide sync sees it finish
        return out
'''


@pytest.fixture(scope="module")
def cfg(build_cache_dir) -> EvalConfig:
    return EvalConfig(device="cuda", size="gpu", build_cache_dir=build_cache_dir, timing_trials=50, static_checks=False)


def test_cuda_relu_load_inline_is_correct_with_telemetry(cfg):
    r = evaluate(RELU, (FIXTURES / "cuda_relu.py").read_text(), cfg)
    assert r.status == "correct", r.feedback
    assert r.speedup > 0 and r.runtime_ms > 0
    c = r.conditions
    assert c.device_name and c.driver_version and c.sm_clock_mhz > 0 and c.cuda_version


def test_nvrtc_cupy_candidate_is_correct(cfg):
    pytest.importorskip("cupy")
    r = evaluate(RELU, NVRTC_RELU, cfg)
    assert r.status == "correct", r.feedback
    assert r.compile_s < 30


def test_side_stream_work_is_timed(cfg):
    r = evaluate(MATMUL, SIDE_STREAM, replace(cfg, op_checks=False))
    assert r.status == "correct", r.feedback
    assert r.runtime_ms > 0.5 * r.ref_runtime_ms  # the side-stream matmul is counted, not hidden


def test_illegal_memory_access_is_a_result_and_the_next_evaluation_is_fine(cfg):
    r = evaluate(ILLEGAL, (FIXTURES / "cuda_relu.py").read_text(), cfg)
    assert r.status == "runtime_error", r.feedback
    assert "illegal" in r.feedback.lower() or "cuda" in r.feedback.lower()
    after = evaluate(RELU, (FIXTURES / "cuda_relu.py").read_text(), cfg)
    assert after.status == "correct", after.feedback
