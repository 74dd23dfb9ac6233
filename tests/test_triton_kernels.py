"""Triton candidates (kernelbench.harness.build.triton_kernels): detection, the interpreted judging config, the static rules
that keep kernel bodies Triton, launch counting under the interpreter, and the prompts' `language` setting.
Fast: parsing and in-process launches only (the sandboxed evaluations are in test_adversarial.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.prompts import EXAMPLE_SOLUTION, PromptSettings, build_messages, language_of
from kernelbench.harness.child import kernel_calls
from kernelbench.harness.build import triton_kernels
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.child.op_policy import classify_op
from kernelbench.harness.static_checks import check_source
from kernel_calls_restore import uninstall

RELU = (Path(__file__).parent / "adversarial" / "triton_honest_relu.py").read_text()
KERNEL = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

SCALE = 2.0
{prelude}

@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
{body}
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
'''


def kernel(body: str = "    y = x * SCALE", prelude: str = "") -> str:
    return KERNEL.format(body=body, prelude=prelude)


def flags(src: str, device: str = "cpu") -> set[str]:
    return {v.flag for v in check_source(src, device)}


def test_detection_and_the_interpreted_config():
    assert triton_kernels.uses_triton(RELU) and not triton_kernels.uses_triton("import torch\n")
    assert triton_kernels.uses_triton("from triton import language as tl\n")
    assert not triton_kernels.uses_triton("this is not python(")
    assert triton_kernels.interpreted(RELU, "cpu") and not triton_kernels.interpreted(RELU, "cuda")
    config = EvalConfig(device="cpu", run_timeout_s=100.0, time_compile_baseline=True)
    judged = triton_kernels.judged_config(RELU, config)
    # correctness as configured; no timing (never reported); a longer run stage for the slow interpreter
    assert (judged.correctness_trials, judged.extra_distribution_trials, judged.atol, judged.op_checks) == \
        (config.correctness_trials, config.extra_distribution_trials, config.atol, config.op_checks)
    assert judged.timing_trials == 0 and judged.timing_rounds == 0 and not judged.time_compile_baseline
    assert judged.run_timeout_s == 100.0 * triton_kernels.INTERPRETED_RUN_TIMEOUT_FACTOR
    assert triton_kernels.judged_config(RELU, judged) is judged  # a retry does not stretch the limit again
    assert triton_kernels.judged_config(RELU, EvalConfig(device="cuda")) == EvalConfig(device="cuda")
    assert triton_kernels.judged_config("import torch\n", config) is config


def test_child_env_sets_the_interpreter_on_cpu_only():
    assert ("TRITON_INTERPRET", "1") in triton_kernels.child_env("cpu", "/x")
    assert all(k != "TRITON_INTERPRET" for k, _ in triton_kernels.child_env("cuda", "/x"))
    from kernelbench.harness.isolation.sandbox import ENV_ALLOWED

    assert {"TRITON_INTERPRET", "TRITON_CACHE_DIR"} <= set(ENV_ALLOWED)


def test_honest_kernels_and_examples_pass_on_both_devices():
    for src in (RELU, kernel(), EXAMPLE_SOLUTION["triton"],
                kernel("    y = tl.where(x > 0.0, x, x * SCALE)", "HALF = SCALE / 2\nBIG: tl.constexpr = tl.constexpr(4)")):
        assert flags(src, "cpu") == set() and flags(src, "cuda") == set()


@pytest.mark.parametrize("src, flag", [
    (kernel("    y = torch.relu(x)"), "static:triton_python_in_kernel"),
    (kernel("    y = helper(x)", "def helper(v):\n    return v"), "static:triton_python_in_kernel"),
    (kernel("    y = helper(x)", "helper = lambda v: v"), "static:triton_python_in_kernel"),
    (kernel("    y = x * STATE", "STATE = 1.0\nSTATE += 1.0"), "static:triton_python_in_kernel"),
    (kernel("    y = (lambda v: v)(x)"), "static:triton_python_in_kernel"),
    (kernel("    y = x * undefined_name"), "static:triton_python_in_kernel"),
    (kernel(prelude="from triton.runtime import driver"), "static:forbidden_import"),
    (kernel(prelude="import triton.compiler"), "static:forbidden_import"),
    (kernel(prelude="X = triton.runtime.driver"), "static:forbidden_import"),
    (kernel(prelude="X = triton.knobs"), "static:forbidden_import"),
    (kernel("    y = tl.inline_asm_elementwise('mov.b32 $0, $1;', '=r,r', [x], dtype=tl.float32, "
            "is_pure=True, pack=1)"), "static:triton_escape"),
])
def test_rules_that_keep_a_kernel_body_triton(src, flag):
    assert flag in flags(src, "cpu"), flags(src, "cpu")


def test_inline_asm_is_inline_ptx_on_cuda():
    src = kernel("    y = tl.inline_asm_elementwise('mov.b32 $0, $1;', '=r,r', [x], dtype=tl.float32, "
                 "is_pure=True, pack=1)")
    assert flags(src, "cuda") == set()


def test_a_jit_function_that_stores_nothing_is_no_kernel():
    no_store = kernel().replace("    tl.store(y_ptr + offs, y, mask=mask)\n", "")
    assert "static:no_custom_kernel" in flags(no_store)


def test_the_interpreters_argument_aliasing_is_not_compute():
    for op in ("aten.set_.source_Storage", "aten.set_.source_Storage_storage_offset"):
        assert classify_op(op) == "view"
    assert classify_op("aten.set_.source_Tensor") == "compute"


def test_launches_are_counted_under_the_interpreter(monkeypatch):
    """In-process, as the run child does: counting installed, a kernel declared under the interpreter, two
    launches counted; a rebound `run` is reported by `wrappers_intact`."""
    import torch

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    kernel_calls.install(triton=True)
    try:
        namespace: dict = {}
        exec(compile(RELU, "candidate.py", "exec"), namespace)
        model, x = namespace["ModelNew"](), torch.randn(300)
        kernel_calls.reset()
        y = model(x)
        model(x)
        assert kernel_calls.count() == 2
        assert torch.equal(y, torch.relu(x))
        assert kernel_calls.wrappers_intact() == []
        cls = type(namespace["relu_kernel"])
        wrapper = vars(cls)["run"]
        monkeypatch.setattr(cls, "run", lambda self, *a, **k: None)
        assert any("run" in bad for bad in kernel_calls.wrappers_intact())
        monkeypatch.setattr(cls, "run", wrapper)
    finally:
        uninstall()
    assert not getattr(vars(cls)["run"], "_kernel_agent_counting", False)


def test_language_setting_of_the_prompts():
    assert language_of("cpu") == "cpp" and language_of("cuda") == "cuda"
    assert language_of("cpu", "triton") == "triton" == language_of("cuda", "triton")
    for device, language in (("cpu", "cuda"), ("cuda", "cpp"), ("cpu", "fortran")):
        with pytest.raises(ValueError):
            language_of(device, language)
    cpu = build_messages("TASK", [], PromptSettings(device="cpu", language="triton"))[1]["content"]
    assert "@triton.jit" in cpu and EXAMPLE_SOLUTION["triton"] in cpu and "interpreter" in cpu
    assert "load_inline" not in cpu.split("Here is the PyTorch module")[0]
    cuda = build_messages("TASK", [], PromptSettings(device="cuda", language="triton"))[1]["content"]
    assert "num_warps" in cuda and "interpreter" not in cuda
    compact = build_messages("TASK", [], PromptSettings(device="cpu", language="triton", style="compact"))
    assert "@triton.jit" in compact[0]["content"]
    default = build_messages("TASK", [], PromptSettings(device="cpu"))[1]["content"]
    assert EXAMPLE_SOLUTION["cpu"] in default and "@triton.jit" not in default


def test_cli_refuses_a_language_the_device_cannot_run():
    from cli import checks
    from cli.main import UsageError

    checks.language("cpu", "triton")
    checks.language("cpu", None)
    with pytest.raises(UsageError, match="--language"):
        checks.language("cpu", "cuda")


def test_language_flag_reaches_the_run_configs():
    from cli.bench_cmd import config_from
    from cli.main import build_parser

    parser, _ = build_parser(["bench"])
    args = parser.parse_args(["bench", "--backend", "replay", "--from", "x", "--language", "triton"])
    assert config_from(args).prompt.language == "triton"
    parser, _ = build_parser(["train"])
    assert parser.parse_args(["train", "--preset", "cpu-tiny"]).language is None  # the preset's value stays
    from train.config import TrainConfig
    from train.presets import load_config

    assert load_config(TrainConfig, "cpu-tiny", "train", {"prompt": {"language": "triton"}}).prompt.language == "triton"
    from agent.optimize import OptimizeConfig
    from agent.prompts import PromptSettings

    assert OptimizeConfig(file="f.py", prompt=PromptSettings(language="triton")).prompt.language == "triton"
