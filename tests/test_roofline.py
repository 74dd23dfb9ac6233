"""Speed of light: bytes and FLOPs counted from the reference's aten ops, the roofline against hand-computed
figures, the measured CPU peaks, `sol_fraction` in results and in bench metrics."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest
import torch
import torch.nn as nn

from evals import metrics as m
from evals.report import write_report
from evals.results_log import ResultsLog
from kernelbench.harness.insight import cpu_peaks, roofline
from kernelbench.harness.insight.peaks import TERA, Peaks, gpu_peaks
from kernelbench.harness.result import EvalResult
from kernelbench.harness.child.work import count_work
from kernelbench.harness.protocol import Work
from tests.bench_records import bench_record

# A made-up device with round numbers, so every time below is exact by hand:
# 100 GB/s at any working set, 100 GFLOP/s for fp32 matrix products and element-wise work alike.
FLAT = Peaks(name="flat", bandwidth=((0, 100e9),), matmul_flops={"float32": 100e9, "tf32": 800e9},
             vector_flops={"float32": 100e9}, source="test")


class MatMul(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


class ReLU(nn.Module):
    def forward(self, x):
        return torch.relu(x)


class Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def test_matmul_bytes_flops_and_roofline_by_hand():
    w = count_work(MatMul(), [torch.randn(64, 32), torch.randn(32, 16)])
    # inputs (64*32 + 32*16) floats * 4 B = (2048 + 512) * 4 = 10240 B; output 64*16*4 = 4096 B
    assert (w.input_bytes, w.output_bytes) == (10240, 4096)
    # FlopCounterMode: 2*M*N*K = 2*64*16*32 = 65536; no other op
    assert (w.matmul_flops, w.other_flops, w.matmul_dtype, w.tf32) == (65536, 0, "float32", False)
    r = roofline.roofline(w, FLAT)
    # memory 14336 B / 100e9 B/s = 1.4336e-4 ms; compute 65536 / 100e9 FLOP/s = 6.5536e-4 ms: compute-bound
    assert r.memory_ms == pytest.approx(1.4336e-4) and r.compute_ms == pytest.approx(6.5536e-4)
    assert r.time_ms == pytest.approx(6.5536e-4) and r.bound == "compute"
    # TF32 allowed: the tensor-core peak applies, 65536 / 800e9 = 8.192e-5 ms, and memory becomes the bound
    tf32 = roofline.roofline(replace(w, tf32=True), FLAT)
    assert tf32.compute_ms == pytest.approx(8.192e-5) and tf32.bound == "memory"


def test_relu_bytes_flops_and_roofline_by_hand():
    w = count_work(ReLU(), [torch.randn(256, 1024)])
    # 256*1024 = 262144 floats: 1048576 B in, 1048576 B out; 1 FLOP per output element = 262144
    assert (w.input_bytes, w.output_bytes, w.matmul_flops, w.other_flops) == (1048576, 1048576, 0, 262144)
    r = roofline.roofline(w, FLAT)
    # memory 2097152 / 100e9 = 0.02097152 ms; compute 262144 / 100e9 = 0.00262144 ms: memory-bound
    assert r.memory_ms == pytest.approx(0.02097152) and r.compute_ms == pytest.approx(0.00262144)
    assert r.bound == "memory" and r.time_ms == pytest.approx(0.02097152)
    assert roofline.sol_fraction(r.time_ms, 0.04194304) == pytest.approx(0.5)
    assert roofline.describe(0.5, r.bound) == "at 50 % of memory bandwidth"


def test_softmax_bytes_flops_and_roofline_by_hand():
    w = count_work(Softmax(), [torch.randn(256, 4096)])
    # 256*4096 = 1048576 floats: 4194304 B in and out; aten._softmax at 5 FLOPs per element (max, subtract,
    # exp, sum, divide) = 5242880
    assert (w.input_bytes, w.output_bytes, w.other_flops, w.estimated_ops) == (4194304, 4194304, 5242880, ())
    r = roofline.roofline(w, FLAT)
    # memory 8388608 / 100e9 = 0.08388608 ms; compute 5242880 / 100e9 = 0.0524288 ms: memory-bound
    assert r.memory_ms == pytest.approx(0.08388608) and r.compute_ms == pytest.approx(0.0524288)
    assert r.bound == "memory"


def test_parameters_count_once_and_unknown_ops_are_marked_estimated():
    lin = nn.Linear(32, 16)
    w = count_work(lin, [torch.randn(8, 32)])
    # x 8*32*4 = 1024 B, weight 16*32*4 = 2048 B, bias 64 B; out 8*16*4 = 512 B; addmm 2*8*16*32 = 8192
    assert (w.input_bytes, w.output_bytes, w.matmul_flops, w.other_flops) == (3136, 512, 8192, 0)

    class Cumsum(nn.Module):
        def forward(self, x):
            return torch.cumsum(x, 0)

    c = count_work(Cumsum(), [torch.randn(10, 10)])
    assert c.other_flops == 100 and c.estimated_ops == ("aten.cumsum.default",)
    assert Work.from_dict(json.loads(json.dumps(c.to_dict()))) == c


def test_h200_datasheet_peaks():
    h200 = gpu_peaks("NVIDIA H200")
    assert h200 is not None and gpu_peaks("NVIDIA A100-SXM4-80GB") is None
    assert gpu_peaks("NVIDIA H200 NVL").name == "NVIDIA H200 NVL"
    # KernelBench L1 ReLU at GPU size: 16384*32768 floats in and out = 2 * 2^31 B = 4294967296 B at 4.8 TB/s
    relu = Work(input_bytes=2 ** 31, output_bytes=2 ** 31, other_flops=2 ** 29, dtype="float32")
    assert roofline.roofline(relu, h200).time_ms == pytest.approx(4294967296 / 4.8e12 * 1e3)  # 0.894784 ms
    # 4096^3 fp32 matmul: 2*4096^3 = 137438953472 FLOP; TF32 off -> FP32 67 TFLOP/s = 2.0513 ms,
    # TF32 on -> dense TF32 989/2 TFLOP/s = 0.27793 ms; BF16 -> 1979/2 TFLOP/s
    mm = Work(input_bytes=2 * 4096 * 4096 * 4, output_bytes=4096 * 4096 * 4, matmul_flops=2 * 4096 ** 3,
              matmul_dtype="float32", dtype="float32")
    assert roofline.roofline(mm, h200).time_ms == pytest.approx(137438953472 / 67e12 * 1e3)
    assert roofline.roofline(Work(**{**mm.__dict__, "tf32": True}), h200).time_ms == \
        pytest.approx(137438953472 / 494.5e12 * 1e3)
    assert h200.matmul_rate("bfloat16", False) == 989.5 * TERA and h200.bandwidth_for(10 ** 12) == 4.8 * TERA


def test_bandwidth_curve_takes_the_largest_measured_set_not_above_the_task():
    p = Peaks(name="c", bandwidth=((16384, 300e9), (1 << 20, 100e9), (1 << 26, 10e9)),
              matmul_flops={"float32": 1e11}, vector_flops={"float32": 1e11}, source="test")
    assert p.bandwidth_for(100) == 300e9 and p.bandwidth_for(16384) == 300e9
    assert p.bandwidth_for((1 << 20) + 1) == 100e9 and p.bandwidth_for(1 << 30) == 10e9


def test_assess_never_caps_and_gives_interpreted_runs_no_fraction(monkeypatch):
    monkeypatch.setattr(roofline, "device_peaks", lambda *a: FLAT)
    relu = Work(input_bytes=1048576, output_bytes=1048576, other_flops=262144, dtype="float32")
    fast = roofline.assess(relu, "cpu", "x", 1, 0.01048576)  # twice as fast as the roofline's 0.02097152 ms
    assert fast.sol_fraction == pytest.approx(2.0) and fast.bound == "memory"
    assert "2.00x its roofline" in roofline.above_reason(fast)
    assert roofline.assess(relu, "cpu", "x", 1, 0.01, ("interpreted",)).sol_fraction == 0.0
    assert roofline.assess(relu, "cpu", "x", 1, 0.0).roofline_ms == pytest.approx(0.02097152)
    assert roofline.assess(None, "cpu", "x", 1, 1.0) == roofline.SpeedOfLight()


def test_old_records_load_with_no_fraction():
    old = EvalResult(status="correct", correct=True, runtime_ms=1.0, speedup=2.0).to_dict()
    for key in ("sol_fraction", "roofline_ms", "sol_bound"):
        old.pop(key)
    r = EvalResult.from_dict(old)
    assert (r.sol_fraction, r.roofline_ms, r.sol_bound) == (0.0, 0.0, "")


def test_cpu_peaks_are_measured_once_and_cached():
    """This machine's ceilings (measured now if the user's cache has none: seconds on an idle machine)."""
    peaks = cpu_peaks.cpu_peaks(1)
    path = cpu_peaks.cache_path(1)
    assert path.exists() and cpu_peaks.cache_path(2) != path and os.path.dirname(path).endswith("peaks")
    assert Peaks.from_dict(json.loads(path.read_text())) == peaks
    sizes = [s for s, _ in peaks.bandwidth]
    assert sizes == sorted(sizes) and sizes[0] == 16384 and sizes[-1] == cpu_peaks.MAX_FOOTPRINT
    assert all(rate > 1e8 for _, rate in peaks.bandwidth)  # above 0.1 GB/s even on a crowded machine
    assert peaks.matmul_flops["float32"] > 1e9 and peaks.matmul_flops["float64"] > 1e8
    assert cpu_peaks.cpu_model() in peaks.name and "measured" in peaks.source


def _rec(task, level, traj, status, speedup=0.0, sol=0.0):
    return bench_record(task, traj, 0, EvalResult(status=status, correct=status == "correct", speedup=speedup,
                                                  speedup_vs_compile=0.0, sol_fraction=sol), level=level)


def test_bench_metrics_carry_the_mean_fraction_per_level(tmp_path):
    log = ResultsLog(str(tmp_path / "results.jsonl"))
    for rec in [_rec("A", 1, 0, "correct", 2.0, 0.4), _rec("A", 1, 1, "correct", 1.0, 0.2),
                _rec("B", 1, 0, "incorrect"), _rec("C", 2, 0, "correct", 3.0, 0.9),
                _rec("C", 2, 1, "correct", 1.5)]:
        log.append(rec)
    lines = open(log.path).read().splitlines()
    old = json.loads(lines[-1])
    old["result"].pop("sol_fraction")  # no roofline (an old record): left out
    with open(log.path, "w") as f:
        f.write("\n".join(lines[:-1] + [json.dumps(old)]) + "\n")
    records = log.load()
    metrics = m.compute_metrics(records)
    # level 1: trajectories A/0 (0.4) and A/1 (0.2); B has no correct kernel -> mean 0.3 over 2
    assert metrics["by_level"]["1"]["sol_fraction_mean"] == pytest.approx(0.3)
    assert metrics["by_level"]["1"]["sol_fraction_trajectories"] == 2
    assert metrics["by_level"]["2"]["sol_fraction_mean"] == pytest.approx(0.9)
    assert metrics["overall"]["sol_fraction_mean"] == pytest.approx((0.4 + 0.2 + 0.9) / 3)
    report = open(write_report(str(tmp_path), metrics, records)).read()
    assert "## Speed of light" in report and "speedup_vs_sol.png" in report
    data = (tmp_path / "speedup_vs_sol.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
