"""Adversarial candidates (tests/adversarial/): cheats and faults the harness must score 0.

Each candidate file opens with a docstring naming the attack, the defence expected and the expected
status and flag; the table below holds the same expectations in checkable form. Every candidate runs through
the real harness (`kernelbench.evaluate`): real compiles in the sandboxed compile child, real run children.

Two passes, as DESIGN.md rule 1 and 5 ask of the defences:
- static checks on (the default config): a candidate a static rule covers is rejected before anything is
  compiled, with the rule's `static:` flag;
- static checks off (`EvalConfig(static_checks=False)`), for those same candidates: the sandbox, the
  dynamic checks and the comparator must hold by themselves (a fault status or a `dynamic:` flag, score 0,
  the host untouched). Candidates no static rule covers run once, with the default config.
The control (`honest_relu.py`) must score above 0, so a harness that fails everything cannot pass.
Compiles dominate the cost (12-30 s each on 2 cores): candidates whose attack lives in Python compile
nothing, and the session-wide `build_cache_dir` serves repeated sources.
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kernelbench.config import EvalConfig
from kernelbench.evaluate import evaluate
from kernelbench.result import (COMPILE_ERROR, CORRECT, INCORRECT, REJECTED, RUNTIME_ERROR, TIMEOUT,
                                EvalResult)
from kernelbench.task import Task

ADVERSARIAL = Path(__file__).parent / "adversarial"
REPO_ROOT = Path(__file__).resolve().parent.parent

RELU_SIGNED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 1024)]


def get_init_inputs():
    return []
'''
# KernelBench v0.1 draws most inputs with torch.rand: non-negative, where ReLU is the identity.
RELU_NONNEGATIVE = RELU_SIGNED.replace("torch.randn(64, 1024)", "torch.rand(64, 1024)")
LINEAR = '''
import torch
import torch.nn as nn

BATCH, IN_FEATURES, OUT_FEATURES = 128, 512, 512


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.linear(x)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
'''
COLUMN_MEAN = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.mean(dim=0, keepdim=True).expand(x.shape[0], x.shape[1]).contiguous()


def get_inputs():
    return [torch.randn(64, 1024)]


def get_init_inputs():
    return []
'''

TASKS = {
    "relu": Task(id="adv/relu", level=1, name="relu", origin="test", source=RELU_SIGNED),
    "relu_rand": Task(id="adv/relu_rand", level=1, name="relu_rand", origin="test", source=RELU_NONNEGATIVE),
    "linear": Task(id="adv/linear", level=1, name="linear", origin="test", source=LINEAR),
    "column_mean": Task(id="adv/column_mean", level=1, name="column_mean", origin="test", source=COLUMN_MEAN),
}

# Fewer timed trials than the default 100: the attacks do not depend on the count, the naive matmuls are slow.
BASE = dict(device="cpu", size="cpu", timing_trials=20, compile_timeout_s=300.0, run_timeout_s=60.0)
HANG = dict(run_timeout_s=25.0)
MISMATCH = "outside atol"


@dataclass(frozen=True)
class Attack:
    """One candidate and what the harness must make of it."""

    file: str
    task: str = "relu"
    static_flags: tuple[str, ...] = ()
    """With static checks on: rejected with at least one of these flags. Empty: no static rule applies, and
    the runtime expectations below are checked with the default config."""
    statuses: tuple[str, ...] = (REJECTED,)
    """Allowed statuses at run time (static checks off when `static_flags` is set)."""
    flags: tuple[str, ...] = ()
    """Flags that must all be present at run time."""
    any_flag: tuple[str, ...] = ()
    """At least one of these flags must be present at run time (empty: no requirement)."""
    feedback: tuple[str, ...] = ()
    """Substrings the run-time feedback must contain (names the defence that fired)."""
    overrides: dict[str, Any] = field(default_factory=dict)


ATTACKS = [
    Attack("plain_torch.py", static_flags=("static:no_custom_kernel",),
           flags=("dynamic:torch_compute_op", "dynamic:kernel_not_called")),
    Attack("ghost_kernel.py", flags=("dynamic:kernel_not_called", "dynamic:torch_compute_op")),
    Attack("try_except_fallback.py", static_flags=("static:try_except",), flags=("dynamic:torch_compute_op",)),
    Attack("subclass_reference.py", static_flags=("static:subclass_reference",), flags=("dynamic:torch_compute_op",)),
    Attack("copies_reference.py", flags=("dynamic:torch_compute_op",)),
    Attack("patch_comparator.py", static_flags=("static:timer_or_torch_patching",), statuses=(REJECTED, INCORRECT),
           feedback=(MISMATCH,)),
    Attack("patch_timer.py", static_flags=("static:forbidden_import", "static:timer_or_torch_patching"),
           flags=("dynamic:timer_patched",)),
    Attack("patch_timing_module.py", static_flags=("static:forbidden_import",), flags=("dynamic:timer_patched",)),
    Attack("blind_checks_sys_modules.py", static_flags=("static:forbidden_import",),
           any_flag=("dynamic:torch_compute_op", "dynamic:kernel_not_called")),
    Attack("blind_checks_torch_internals.py", static_flags=("static:dynamic_code",),
           any_flag=("dynamic:torch_compute_op", "dynamic:kernel_not_called")),
    Attack("cache_by_pointer.py", statuses=(INCORRECT,)),
    Attack("cache_by_values.py", task="linear", statuses=(REJECTED, INCORRECT), flags=("suspicious_speedup",)),
    Attack("zero_inputs.py", statuses=(INCORRECT,), feedback=("modified in place",)),
    Attack("lazy_tensor.py", static_flags=("static:lazy_tensor",), statuses=(REJECTED, INCORRECT),
           feedback=("tensor subclass",)),
    Attack("python_thread.py", static_flags=("static:threads_or_processes",), flags=("dynamic:threads",)),
    Attack("cpp_thread.py", static_flags=("static:threads_or_processes",), flags=("dynamic:threads",)),
    Attack("gc_scan.py", static_flags=("static:forbidden_import",), statuses=(REJECTED, INCORRECT),
           feedback=(MISMATCH,)),
    Attack("identity_nonnegative.py", task="relu_rand", statuses=(INCORRECT,), feedback=(MISMATCH,)),
    Attack("return_input.py", task="relu_rand", statuses=(INCORRECT,), feedback=(MISMATCH,)),
    Attack("reduced_precision.py", task="linear", statuses=(INCORRECT,), feedback=(MISMATCH,)),
    Attack("guessed_seed.py", static_flags=("static:no_custom_kernel",), statuses=(REJECTED, INCORRECT),
           feedback=(MISMATCH,)),
    Attack("expanded_view.py", task="column_mean", statuses=(INCORRECT,), feedback=("overlapping",)),
    Attack("cpp_hang.py", statuses=(TIMEOUT,), overrides=HANG),
    Attack("python_sleep.py", static_flags=("static:forbidden_import",), statuses=(TIMEOUT,), overrides=HANG),
    Attack("cpp_segfault.py", statuses=(RUNTIME_ERROR,), feedback=("SIGSEGV",)),
    Attack("python_exit_import.py", static_flags=("static:forbidden_import",), statuses=(COMPILE_ERROR,)),
    Attack("python_exit_forward.py", static_flags=("static:forbidden_import",), statuses=(RUNTIME_ERROR,),
           feedback=("SystemExit",)),
    Attack("cpp_exit.py", statuses=(RUNTIME_ERROR,)),
    Attack("cpp_abort.py", statuses=(RUNTIME_ERROR,), feedback=("SIGABRT",)),
    # 3 GiB of address space is ample for torch and the task, and spares the shared host 8 GiB of touched pages.
    Attack("cpp_memory_hog.py", statuses=(RUNTIME_ERROR,), feedback=("out of memory",),
           overrides=dict(memory_limit_mb=3072)),
]
SANDBOX_ATTACKS = {  # host-side checks in their own tests below
    "cpp_fork_bomb.py": ("static:threads_or_processes",),
    "cpp_write_host.py": ("static:cpp_io_or_syscalls",),
    "cpp_network.py": ("static:cpp_io_or_syscalls",),
    "cpp_env_secret.py": ("static:cpp_io_or_syscalls",),
}


def source(name: str, **fill: str) -> str:
    text = (ADVERSARIAL / name).read_text()
    for key, value in fill.items():
        text = text.replace(f"@{key}@", value)
    return text


def config(cache: str, static_checks: bool = True, **overrides: Any) -> EvalConfig:
    return EvalConfig(build_cache_dir=cache, static_checks=static_checks, **{**BASE, **overrides})


def describe(result: EvalResult) -> str:
    return f"status={result.status} score={result.score} flags={result.flags}\n{result.feedback}"


def assert_zero(result: EvalResult) -> None:
    assert result.score == 0.0 and not result.correct and result.speedup == 0.0, describe(result)


def assert_static_reject(result: EvalResult, flags: tuple[str, ...]) -> None:
    assert result.status == REJECTED, describe(result)
    assert set(flags) & set(result.flags), f"expected one of {flags}: " + describe(result)
    assert not result.compiled, "a statically rejected candidate must not be compiled"
    assert_zero(result)


def test_every_candidate_is_listed_and_documented():
    every = {p.name for p in ADVERSARIAL.glob("*.py")} - {"__init__.py"}
    files = {n for n in every if not n.startswith("cuda_")} - {"honest_relu.py"}  # cuda_*: test_adversarial_cuda.py
    listed = {a.file for a in ATTACKS} | set(SANDBOX_ATTACKS)
    assert files == listed
    assert len(listed) >= 24
    for name in every:
        doc = (ADVERSARIAL / name).read_text().split('"""')[1]
        assert "Expected:" in doc and ("Defence:" in doc or "control" in doc), name


def test_control_scores_above_zero(build_cache_dir):
    result = evaluate(TASKS["relu"], source("honest_relu.py"), config(build_cache_dir))
    assert result.status == CORRECT, describe(result)
    assert result.score > 0.3 and set(result.flags) <= {"suspicious_speedup"}, describe(result)


@pytest.mark.parametrize("attack", [a for a in ATTACKS if a.static_flags], ids=lambda a: a.file[:-3])
def test_static_checks_reject(attack, build_cache_dir):
    result = evaluate(TASKS[attack.task], source(attack.file), config(build_cache_dir))
    assert_static_reject(result, attack.static_flags)


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.file[:-3])
def test_runtime_defences(attack, build_cache_dir):
    """Static checks off where a static rule covers the attack, so the run-time defence is judged alone."""
    cfg = config(build_cache_dir, static_checks=not attack.static_flags, **attack.overrides)
    result = evaluate(TASKS[attack.task], source(attack.file), cfg)
    assert result.status in attack.statuses, describe(result)
    assert_zero(result)
    missing = [f for f in attack.flags if f not in result.flags]
    assert not missing, f"missing flags {missing}: " + describe(result)
    if attack.any_flag:
        assert set(attack.any_flag) & set(result.flags), f"expected one of {attack.any_flag}: " + describe(result)
    for text in attack.feedback:
        assert text in result.feedback, f"feedback lacks {text!r}: " + describe(result)


def test_ghost_kernel_under_partial_policy(build_cache_dir):
    """The partial policy allows PyTorch ops, so only the kernel-call count stands between a ghost kernel
    and a score."""
    result = evaluate(TASKS["relu"], source("ghost_kernel.py"), config(build_cache_dir, op_policy="partial"))
    assert result.status == REJECTED and "dynamic:kernel_not_called" in result.flags, describe(result)
    assert result.conditions.op_policy == "partial"
    assert_zero(result)


@pytest.mark.parametrize("name", sorted(SANDBOX_ATTACKS), ids=lambda n: n[:-3])
def test_sandbox_attacks_rejected_statically(name, build_cache_dir):
    src = source(name, HOST_TMP_FILE="/tmp/unused", REPO_FILE="/unused", PORT="9")
    assert_static_reject(evaluate(TASKS["relu"], src, config(build_cache_dir)), SANDBOX_ATTACKS[name])


def _bomb_processes() -> list[str]:
    found = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "ka_adv_bomb":
                found.append(comm.parent.name)
        except OSError:
            continue
    return found


def test_fork_bomb_contained(build_cache_dir):
    result = evaluate(TASKS["relu"], source("cpp_fork_bomb.py"), config(build_cache_dir, static_checks=False, **HANG))
    assert result.status in (RUNTIME_ERROR, TIMEOUT), describe(result)
    assert_zero(result)
    assert not _bomb_processes(), "forked children outlived the evaluation"


def test_writes_outside_sandbox_fail(build_cache_dir, tmp_path):
    host_file = tmp_path / "escaped.txt"
    repo_file = REPO_ROOT / "tests" / "adversarial" / "escaped_from_sandbox.txt"
    src = source("cpp_write_host.py", HOST_TMP_FILE=str(host_file), REPO_FILE=str(repo_file))
    try:
        result = evaluate(TASKS["relu"], src, config(build_cache_dir, static_checks=False))
        landed = [str(p) for p in (host_file, repo_file) if p.exists()]
    finally:
        repo_file.unlink(missing_ok=True)
    assert not landed, f"the candidate wrote {landed} on the host"
    assert result.status == RUNTIME_ERROR and "could not write" in result.feedback, describe(result)
    assert_zero(result)


def test_network_unreachable(build_cache_dir):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        src = source("cpp_network.py", PORT=str(server.getsockname()[1]))
        result = evaluate(TASKS["relu"], src, config(build_cache_dir, static_checks=False))
        try:
            conn, _ = server.accept()  # connections complete in the backlog even before accept
            conn.close()
            arrived = True
        except BlockingIOError:
            arrived = False
    assert not arrived, "the candidate reached a host port"
    assert result.status == RUNTIME_ERROR and "no network" in result.feedback, describe(result)
    assert_zero(result)


def test_environment_secret_not_visible(build_cache_dir, monkeypatch):
    secret = "ka-test-" + secrets.token_hex(12)
    monkeypatch.setenv("KERNEL_AGENT_TEST_SECRET", secret)
    assert os.environ["KERNEL_AGENT_TEST_SECRET"] == secret
    result = evaluate(TASKS["relu"], source("cpp_env_secret.py"), config(build_cache_dir, static_checks=False))
    assert secret not in result.to_json(), "the secret leaked into the result"
    assert result.status == RUNTIME_ERROR and "secret not visible" in result.feedback, describe(result)
    assert_zero(result)
