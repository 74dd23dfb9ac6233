"""Adversarial candidates (tests/adversarial/): cheats and faults the harness must score 0.

Each candidate file opens with a docstring naming the attack, the defence expected and the expected
status and flag; the table below holds the same expectations in checkable form. Every candidate runs through
the real harness (`kernelbench.harness.evaluate`): real compiles in the sandboxed compile child, real run children.

Two passes, as DESIGN.md rule 1 and 5 ask of the defences:
- static checks on (the default config): a candidate a static rule covers is rejected before anything is
  compiled, with the rule's `static:` flag;
- static checks off (`EvalConfig(static_checks=False)`), for those same candidates: the sandbox, the
  dynamic checks and the comparator must hold by themselves (a fault status or a `dynamic:` flag, score 0,
  the host untouched). Candidates no static rule covers run once, with the default config.
The control (`honest_relu.py`) must score above 0, so a harness that fails everything cannot pass.
Compiles dominate the cost (12-30 s each on 2 cores). The candidates share C++: those judged at run time
with static checks on carry one library (`adv_kernels`) and the sandbox escapes another (`adv_escape`,
per-run values passed from Python), the C++ timing forger a third (`adv_forge`) and the attacks on the
verdict channel and the timing inputs a fourth (`adv_integrity`); each attack is what its forward calls. The build cache is keyed on what is compiled (`kernelbench.harness.build.build_cache.cache_key`), so the
suite compiles four extensions, and the session-wide `build_cache_dir` serves them to every candidate.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from kernelbench.tasks.catalog import find_task
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.evaluate import evaluate
from kernelbench.harness.result import (COMPILE_ERROR, CORRECT, INCORRECT, REJECTED, RUNTIME_ERROR, TIMEOUT,
                                EvalResult)
from kernelbench.tasks.task import Task
from rewards import kernel_score

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
    "builtin_relu": find_task("L1/01_relu"),  # the CPU size: 8 MB, where skipping pays
    "builtin_sum": find_task("L1/10_sum_dim"),
    "builtin_max": find_task("L1/12_max_dim"),  # two input configurations (INPUT_CONFIGS), timed at the first
    "builtin_scale": find_task("L1/26_matrix_scalar_multiply"),  # 16 MB: MKL's scal between calls pays
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
    max_speedup: float = 0.0
    """When set, the candidate must be judged on an honest time instead of scoring 0: correct (see
    `statuses`), speedup at most this, and never `suspicious_speedup`."""
    slow: bool = False
    """Its run-time test is `slow` (a defence another default test already proves through the same path)."""


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
    Attack("blind_checks_sys_modules.py", static_flags=("static:forbidden_import",), flags=("dynamic:harness_tampered",),
           any_flag=("dynamic:torch_compute_op", "dynamic:kernel_not_called")),
    Attack("blind_checks_torch_internals.py", static_flags=("static:dynamic_code",), flags=("dynamic:harness_tampered",),
           any_flag=("dynamic:torch_compute_op", "dynamic:kernel_not_called")),
    # Stale outputs show up as a mismatch; the trace call is a cache hit, so no kernel ran in it either.
    Attack("cache_by_pointer.py", statuses=(INCORRECT, REJECTED), feedback=(MISMATCH,)),
    # Fresh values in every timed call: the value-keyed cache never hits, so the naive matmul is timed honestly.
    Attack("cache_by_values.py", task="linear", statuses=(CORRECT,), max_speedup=1.0),
    Attack("zero_inputs.py", statuses=(INCORRECT,), feedback=("modified in place",)),
    Attack("lazy_tensor.py", static_flags=("static:lazy_tensor",), statuses=(REJECTED, INCORRECT),
           feedback=("tensor subclass",)),
    # Threads started in forward cannot start at all (the run child refuses new tasks after __init__); a
    # thread started at import or in __init__ and left running is still counted (`dynamic:threads`).
    Attack("python_thread.py", static_flags=("static:threads_or_processes",), statuses=(RUNTIME_ERROR,),
           feedback=("can't start new thread",)),
    Attack("cpp_thread.py", static_flags=("static:threads_or_processes",), statuses=(RUNTIME_ERROR,),
           feedback=("Resource temporarily unavailable",)),
    # Threads started and joined inside one call: the run child refuses every new task after __init__.
    Attack("cpp_hidden_threads.py", static_flags=("static:threads_or_processes",), statuses=(RUNTIME_ERROR,),
           feedback=("thread creation refused: thrd_create pthread_create std::thread clone _Fork c10::ThreadPool",)),
    Attack("gc_scan.py", static_flags=("static:forbidden_import",), statuses=(REJECTED, INCORRECT),
           feedback=(MISMATCH,)),
    Attack("identity_nonnegative.py", task="relu_rand", statuses=(INCORRECT,), feedback=(MISMATCH,)),
    Attack("return_input.py", task="relu_rand", statuses=(INCORRECT,), feedback=(MISMATCH,)),
    Attack("reduced_precision.py", task="linear", statuses=(INCORRECT,), feedback=(MISMATCH,)),
    Attack("guessed_seed.py", static_flags=("static:no_custom_kernel",), statuses=(REJECTED, INCORRECT),
           feedback=(MISMATCH,)),
    Attack("expanded_view.py", task="column_mean", statuses=(INCORRECT,), feedback=("overlapping",)),
    Attack("timing_channel.py", static_flags=("static:forbidden_import",),
           any_flag=("timing_inconsistent", "dynamic:harness_tampered")),
    # Counting calls finds the timed ones; a hidden check call among them sees the skipped work.
    Attack("skip_timed_calls.py", statuses=(INCORRECT,), feedback=("during timing",)),
    Attack("forge_times_frames.py", task="linear", static_flags=("static:dynamic_code",),
           flags=("timing_inconsistent",)),
    Attack("cpp_forge_times.py", task="linear", static_flags=("static:python_objects",),
           flags=("timing_inconsistent",)),
    # The report leaves over the parent's pipe and the child ends with os._exit: the atexit edit never lands.
    Attack("atexit_rewrites_result.py", static_flags=("static:forbidden_import",),
           any_flag=("dynamic:torch_compute_op", "dynamic:kernel_not_called")),
    # Timed inputs perturbed element by element from their own sets: a scaled first stage never matches.
    Attack("linear_stage_cache.py", task="linear", statuses=(CORRECT,), max_speedup=1.0),
    # 100 planned trials, the warm-up making room for a handful: checks at a rate over the trials that run.
    Attack("slow_warmup_skip.py", statuses=(INCORRECT,), feedback=("during timing",), overrides=dict(timing_trials=100)),
    Attack("inplace_timing.py", statuses=(INCORRECT,), feedback=("modified in place",)),
    # A check seen (the gap while its output leaves) says nothing about the next call: positions drawn per trial.
    # Skipping is caught with the chance a check lands on a skipped call; a run that skipped little can pass
    # (seen once on a fresh clone: correct at 0.19x), so the bound is on credit, not on the status alone. Its
    # skipped calls leave the block's time unaccounted for, so `timing_inconsistent` (no credit) is a verdict
    # too (seen once in a fresh clone's suite).
    Attack("skip_after_check.py", static_flags=("static:forbidden_import",), statuses=(INCORRECT, CORRECT, REJECTED),
           overrides=dict(timing_trials=100, timing_checks=30), max_speedup=0.5),
    # Timed calls and checks once took their input sets in fixed rotations: a call's set named its kind.
    Attack("set_schedule_skip.py", task="builtin_relu", statuses=(INCORRECT, CORRECT, REJECTED),
           overrides=dict(timing_trials=100), max_speedup=1.5),
    # Hooks in torch (an op observer, a replaced allocator) ran the candidate's code between its calls.
    Attack("observer_between_calls.py", task="builtin_sum", static_flags=("static:dispatch_bypass",),
           flags=("dynamic:work_between_calls",)),
    Attack("allocator_between_calls.py", task="builtin_relu", static_flags=("static:dispatch_bypass",),
           statuses=(CORRECT,), max_speedup=1.5),
    # The same hook found in libc10's symbol table (no import), with MKL or ATen's own multiply doing the work when
    # the harness freed a temporary right after a call's last input write (14.8x with ATen): nothing is allocated
    # or freed there now, so the hook only sees inputs already used and the candidate's own loop is timed.
    Attack("found_allocator_blas.py", task="builtin_scale", statuses=(CORRECT,), max_speedup=1.5),
    Attack("found_allocator_aten.py", task="builtin_scale", static_flags=("static:dispatch_bypass",),
           statuses=(CORRECT,), max_speedup=1.5),
    # The interpreter as the trigger (a pending call, found in libpython's table): MKL between the calls, located
    # by libtorch's symbol table, and the candidate's own code polling there (the rule `observer_between_calls`
    # proves by default; 40 s here, the poll slowing every check the interpreter makes).
    Attack("found_pending_call_blas.py", task="builtin_scale", static_flags=("static:python_objects",),
           flags=("dynamic:work_between_calls",), slow=True),
    # MKL's sgemm_ found through dl_iterate_phdr and libtorch_cpu's symbol table: judged by which code ran.
    Attack("cpp_found_blas.py", task="linear", flags=("dynamic:library_compute",)),
    # The mappings the parent parses to attribute samples are the candidate's making: bounded reads.
    Attack("mapping_flood.py", task="linear", static_flags=("static:forbidden_import",),
           flags=("dynamic:mapping_flood",)),
    # Untimed calls padded with the candidate's own work diluted the pooled rule: the timed calls judged alone too.
    Attack("found_blas_padded.py", task="linear", flags=("dynamic:library_compute",)),
    # ATen run from a storage deleter inside an allowed op (`set_`): an op's window holds its data's time at most.
    Attack("deleter_in_allowed_op.py", task="linear", flags=("dynamic:library_compute",)),
    Attack("python_ctypes_blas.py", task="linear", static_flags=("static:forbidden_import",),
           flags=("dynamic:library_compute",)),
    # The time inside allowed ops is charged to PyTorch: a kernel registered over aten::fill_ would run MKL there.
    Attack("fill_override_blas.py", task="linear", static_flags=("static:dispatch_bypass",),
           flags=("dynamic:harness_tampered",)),
    Attack("cpp_hang.py", statuses=(TIMEOUT,), overrides=HANG),
    Attack("python_sleep.py", static_flags=("static:forbidden_import",), statuses=(TIMEOUT,), overrides=HANG),
    Attack("cpp_segfault.py", statuses=(RUNTIME_ERROR,), feedback=("SIGSEGV",)),
    Attack("python_exit_import.py", static_flags=("static:forbidden_import",), statuses=(COMPILE_ERROR,)),
    Attack("python_exit_forward.py", static_flags=("static:forbidden_import",), statuses=(RUNTIME_ERROR,),
           feedback=("SystemExit",)),
    Attack("cpp_exit.py", statuses=(RUNTIME_ERROR,)),
    Attack("cpp_abort.py", statuses=(RUNTIME_ERROR,), feedback=("SIGABRT",)),
    # 3 GiB of address space is ample for torch and the task, and spares the shared host 8 GiB of touched pages.
    # Right at the timed shape, wrong at the task's second input configuration.
    Attack("hardcoded_shape.py", task="builtin_max", statuses=(INCORRECT,),
           feedback=("configuration 2 of 2 (batch_size=3, dim1=77, dim2=131: inputs float32[3, 77, 131])",
                     "shape [16, 256] != expected [3, 131]")),
    Attack("hardcoded_shape_checked.py", task="builtin_max", statuses=(RUNTIME_ERROR,),
           feedback=("input set 7, configuration 2 of 2 (batch_size=3", "built for 16 x 256 x 256")),
    # Every candidate call is traced and counted (child/call_checks.py), and every call's inputs arrive the same
    # way (timing.write_inputs): no call can be singled out as the judged one.
    Attack("shape_fast_path.py", task="builtin_max", flags=("dynamic:torch_compute_op",)),
    Attack("traced_call_by_values.py", task="linear", flags=("dynamic:torch_compute_op",)),
    Attack("traced_call_by_mode.py", task="linear", static_flags=("static:forbidden_import",), statuses=(CORRECT,),
           max_speedup=0.5),
    Attack("version_skips_timed.py", statuses=(CORRECT,), max_speedup=1.0),
    Attack("cpp_memory_hog.py", statuses=(RUNTIME_ERROR,), feedback=("bad_alloc", "out of memory"),
           overrides=dict(memory_limit_mb=3072)),
    # Limits on everything a child creates (kernelbench.harness.isolation.cgroups): small limits keep the cost small.
    Attack("tmpfs_fill.py", static_flags=("static:dynamic_code", "static:cpp_io_or_syscalls"),
           statuses=(RUNTIME_ERROR,), feedback=("No space left on device",), overrides=dict(tmpfs_mb=256)),
    Attack("compile_memory_hog.py", statuses=(COMPILE_ERROR,), overrides=dict(cgroup_memory_mb=1536)),
    Attack("process_from_init.py", static_flags=("static:forbidden_import",), flags=("dynamic:parallel_work",)),
    Attack("process_busy_throughout.py", static_flags=("static:forbidden_import",), flags=("dynamic:parallel_work",)),
    # Triton (kernelbench.harness.build.triton_kernels): on CPU the kernels run under Triton's interpreter.
    Attack("triton_torch_beside.py", flags=("dynamic:torch_compute_op",)),
    Attack("triton_output_ignored.py", flags=("dynamic:torch_compute_op",), slow=True),
    Attack("triton_inline_asm.py", static_flags=("static:triton_escape",), statuses=(RUNTIME_ERROR,),
           feedback=("inline_asm not supported",), slow=True),
    Attack("triton_torch_in_kernel.py", static_flags=("static:triton_python_in_kernel",),
           flags=("dynamic:torch_compute_op",)),
    # A refused flag by position; the child's hook refuses it when the static check is off.
    Attack("flags_by_position.py", static_flags=("static:build_flags",), flags=("dynamic:build_flags",),
           feedback=("-DKA_ASM=__asm__",)),
    Attack("triton_flip_interpreter.py", static_flags=("static:forbidden_import",), statuses=(RUNTIME_ERROR,),
           flags=("interpreted",), slow=True),
]
TRITON_JUDGED = {"triton_honest_relu.py"}  # the Triton control: correctness only on CPU (its own test below)
SANDBOX_ATTACKS = {  # host-side checks in their own tests below
    "cpp_fork_bomb.py": ("static:threads_or_processes",),
    "cpp_write_host.py": ("static:cpp_io_or_syscalls",),
    "cpp_write_host_fopen64.py": ("static:cpp_io_or_syscalls",),
    "cpp_network.py": ("static:cpp_io_or_syscalls",),
    "cpp_env_secret.py": ("static:cpp_io_or_syscalls",),
}
BUILD_ATTACKS = {  # judged from the build or the build step's effects on the host, in their own tests below
    "cpp_namespace_alias.py": "build:dispatch_bypass",
    "build_symlink.py": "static:cpp_io_or_syscalls",
    "pch_flood.py": "",
    "compile_forges_outcome.py": "static:forbidden_import",
    "build_in_init.py": "dynamic:build_outside_compile_stage",
    "flags_unpacked.py": "dynamic:build_flags",
    "build_tree_flood.py": "build:tree_too_large",  # tests/test_tree_attacks.py
}
GROUP_ATTACKS = {"searches_group_reference.py"}  # a group's shared reference: tests/test_group_reference.py


def source(name: str, **fill: str) -> str:
    text = (ADVERSARIAL / name).read_text()
    for key, value in fill.items():
        text = text.replace(f"@{key}@", value)
    return text


def config(cache: str, static_checks: bool = True, **overrides: Any) -> EvalConfig:
    return EvalConfig(build_cache_dir=cache, static_checks=static_checks, **{**BASE, **overrides})


def describe(result: EvalResult) -> str:
    return f"status={result.status} score={kernel_score(result)} flags={result.flags}\n{result.feedback}"


def assert_zero(result: EvalResult) -> None:
    assert kernel_score(result) == 0.0 and not result.correct and result.speedup == 0.0, describe(result)  # None: unpunished


def assert_static_reject(result: EvalResult, flags: tuple[str, ...]) -> None:
    assert result.status == REJECTED, describe(result)
    assert set(flags) & set(result.flags), f"expected one of {flags}: " + describe(result)
    assert not result.compiled, "a statically rejected candidate must not be compiled"
    assert_zero(result)


def test_every_candidate_is_listed_and_documented():
    every = {p.name for p in ADVERSARIAL.glob("*.py")} - {"__init__.py"}
    files = {n for n in every if not n.startswith("cuda_")} - {"honest_relu.py"}  # cuda_*: test_adversarial_cuda.py
    listed = ({a.file for a in ATTACKS} | set(SANDBOX_ATTACKS) | set(BUILD_ATTACKS) | set(TRITON_JUDGED)
              | GROUP_ATTACKS)
    assert files == listed
    assert len(listed) >= 24
    for name in every:
        doc = (ADVERSARIAL / name).read_text().split('"""')[1]
        assert "Expected:" in doc and ("Defence:" in doc or "control" in doc), name


def test_control_scores_above_zero(build_cache_dir):
    result = evaluate(TASKS["relu"], source("honest_relu.py"), config(build_cache_dir))
    assert result.status == CORRECT, describe(result)
    assert kernel_score(result) > 0.3 and set(result.flags) <= {"suspicious_speedup"}, describe(result)


@pytest.mark.parametrize("attack", [a for a in ATTACKS if a.static_flags], ids=lambda a: a.file[:-3])
def test_static_checks_reject(attack, build_cache_dir):
    result = evaluate(TASKS[attack.task], source(attack.file), config(build_cache_dir))
    assert_static_reject(result, attack.static_flags)


@pytest.mark.parametrize("attack", [pytest.param(a, id=a.file[:-3], marks=(pytest.mark.slow,) if a.slow else ())
                                    for a in ATTACKS])
def test_runtime_defences(attack, build_cache_dir):
    """Static checks off where a static rule covers the attack, so the run-time defence is judged alone."""
    cfg = config(build_cache_dir, static_checks=not attack.static_flags, **attack.overrides)
    result = evaluate(TASKS[attack.task], source(attack.file), cfg)
    assert result.status in attack.statuses, describe(result)
    if attack.max_speedup and result.status == CORRECT:  # correct allowed: no credit beyond the bound
        assert 0.0 < result.speedup <= attack.max_speedup, describe(result)
        assert "suspicious_speedup" not in result.flags, describe(result)
    else:
        assert_zero(result)
    missing = [f for f in attack.flags if f not in result.flags]
    assert not missing, f"missing flags {missing}: " + describe(result)
    if attack.any_flag:
        assert set(attack.any_flag) & set(result.flags), f"expected one of {attack.any_flag}: " + describe(result)
    for text in attack.feedback:
        assert text in result.feedback, f"feedback lacks {text!r}: " + describe(result)


def test_hardcoded_shape_correct_on_one_configuration(build_cache_dir):
    """The control of `hardcoded_shape.py`: on the same task without its second configuration (the harness as
    it was before input configurations) the shape-specialised kernel is judged correct, so it is the second
    configuration alone that makes it `incorrect`."""
    task = TASKS["builtin_max"]
    single = replace(task, id="adv/max_one_config", source=re.sub(r"(?m)^INPUT_CONFIGS = .*$", "", task.source))
    assert "INPUT_CONFIGS" in task.source and "INPUT_CONFIGS =" not in single.source
    result = evaluate(single, source("hardcoded_shape.py"), config(build_cache_dir))
    assert result.status == CORRECT and result.correct, describe(result)


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


def _bomb_processes(grace_s: float = 10.0) -> list[str]:
    """Live (not zombie) `ka_adv_bomb` processes, after up to `grace_s` for the killed ones to be reaped."""
    deadline = time.monotonic() + grace_s
    while True:
        found = []
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            except OSError:
                continue
            if fields.get("Name", "").strip() == "ka_adv_bomb" and fields.get("State", "").strip()[:1] not in "ZX":
                found.append(status.parent.name)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def test_fork_bomb_contained(build_cache_dir):
    result = evaluate(TASKS["relu"], source("cpp_fork_bomb.py"), config(build_cache_dir, static_checks=False, **HANG))
    assert result.status in (RUNTIME_ERROR, TIMEOUT), describe(result)
    assert_zero(result)
    assert not _bomb_processes(), "forked children outlived the evaluation"


@pytest.mark.parametrize("name", ["cpp_write_host.py", "cpp_write_host_fopen64.py"], ids=lambda n: n[:-3])
def test_writes_outside_sandbox_fail(build_cache_dir, tmp_path, name):
    host_file = tmp_path / "escaped.txt"
    repo_file = REPO_ROOT / "tests" / "adversarial" / "escaped_from_sandbox.txt"
    src = source(name, HOST_TMP_FILE=str(host_file), REPO_FILE=str(repo_file))
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


def test_dispatch_bypass_judged_from_the_build(build_cache_dir):
    """`namespace fast = at::cpu; fast::mm(x, w)` matches no static pattern and is invisible to the op tracer:
    the build's imports name `at::cpu::mm`, so it is rejected after compiling, before it runs."""
    result = evaluate(TASKS["linear"], source("cpp_namespace_alias.py"), config(build_cache_dir))
    assert result.status == REJECTED and BUILD_ATTACKS["cpp_namespace_alias.py"] in result.flags, describe(result)
    assert result.compiled and not any(f.startswith("static:") for f in result.flags), describe(result)
    assert "at::cpu::mm" in result.feedback, describe(result)
    assert_zero(result)


@pytest.mark.parametrize("static", [True, False], ids=["static_on", "static_off"])
def test_no_library_is_built_in_the_run_stage(build_cache_dir, static):
    """`load_inline` of `namespace fast = at::cpu; fast::mm` in `ModelNew.__init__`: the compile stage builds
    nothing, so the symbol check has nothing to judge; the run child must refuse to build it (no compiler
    runs there), with static checks on (no rule matches the alias) and off."""
    result = evaluate(TASKS["linear"], source("build_in_init.py"), config(build_cache_dir, static_checks=static))
    assert result.status == REJECTED and BUILD_ATTACKS["build_in_init.py"] in result.flags, describe(result)
    assert "nothing was built in adv_late" in result.feedback, describe(result)
    assert_zero(result)


UNPACKED_CALL = "ext = build(*ARGS, **OPTIONS)"
FLAG_SPELLINGS = {
    "unpacked": UNPACKED_CALL,
    "positional": 'ext = build("adv_flags_unpacked", [cpp_source], [], [], ["relu_forward"], FLAGS)',
    "keywords": "ext = build(**dict(name=ARGS[0], cpp_sources=ARGS[1], functions=ARGS[4], extra_cflags=FLAGS))",
    # the refusal caught, PyTorch doing the work: the refusal is recorded outside the candidate's reach
    "caught": f"try:\n    {UNPACKED_CALL}\nexcept Exception:\n    ext = nn.ReLU()\n    ext.relu_forward = ext.forward",
}


@pytest.mark.parametrize("spelling", list(FLAG_SPELLINGS))
def test_build_flags_refused_however_passed(build_cache_dir, spelling):
    """Static checks off: the child's hook binds the real call, whatever its spelling, and refuses the flag
    before anything is compiled (rejected even when the candidate caught the error)."""
    src = source("flags_unpacked.py")
    assert UNPACKED_CALL in src
    result = evaluate(TASKS["relu"], src.replace(UNPACKED_CALL, FLAG_SPELLINGS[spelling]),
                      config(build_cache_dir, static_checks=False))
    assert result.status == REJECTED and BUILD_ATTACKS["flags_unpacked.py"] in result.flags, describe(result)
    assert "-DKA_ASM=__asm__" in result.feedback and not result.compiled, describe(result)
    assert_zero(result)


def test_build_flags_unpacked_rejected_statically(build_cache_dir):
    assert_static_reject(evaluate(TASKS["relu"], source("flags_unpacked.py"), config(build_cache_dir)),
                         ("static:build_flags",))


def test_build_step_never_follows_a_planted_link(build_cache_dir, tmp_path):
    """The compile child plants `ext/planted -> VICTIM` at import; a second file over the same build starts
    another compile of the entry. Nothing outside the sandbox may change, and no link reaches the entry."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "lock").write_text("precious\n")
    (victim / "other").write_text("precious\n")
    flag = BUILD_ATTACKS["build_symlink.py"]
    assert_static_reject(evaluate(TASKS["relu"], source("build_symlink.py", VICTIM_DIR=str(victim), VARIANT="s"),
                                  config(build_cache_dir)), (flag,))
    entries = set()
    for variant in ("first", "second"):
        src = source("build_symlink.py", VICTIM_DIR=str(victim), VARIANT=variant)
        result = evaluate(TASKS["relu"], src, config(build_cache_dir, static_checks=False))
        assert result.status == CORRECT, describe(result)
        assert sorted(p.name for p in victim.iterdir()) == ["lock", "other"], "a file outside the sandbox was removed"
        from kernelbench.harness.build.build_cache import cache_key

        entries.add(Path(build_cache_dir, cache_key(src, "cpu"), "ext"))
    assert len(entries) == 1, "the two files should share one build entry (the second compile reuses it)"
    ext = entries.pop()
    assert not [p for p in ext.rglob("*") if p.is_symlink()], "a link came back into the build entry"
    assert all((victim / n).read_text() == "precious\n" for n in ("lock", "other"))


def test_compile_outcome_cannot_be_faked(build_cache_dir):
    """A build that fails, and an `atexit` handler registered at import that rewrites the compile child's
    result file to claim success, reached by an exception whose message cannot be read (the harness's own
    reporting raised, and the child used to leave through the interpreter's normal exit). The outcome
    travels over the parent's pipe and the child ends with `os._exit`: a compile error, never compiled,
    cached as one, and the error the harness itself reported."""
    import json

    from kernelbench.harness.build.build_cache import cache_key, source_key

    src = source("compile_forges_outcome.py")
    assert_static_reject(evaluate(TASKS["relu"], src, config(build_cache_dir)),
                         (BUILD_ATTACKS["compile_forges_outcome.py"], "static:try_except"))
    result = evaluate(TASKS["relu"], src, config(build_cache_dir, static_checks=False))
    assert result.status == COMPILE_ERROR and not result.compiled, describe(result)
    assert "Unreadable: <the exception's message could not be read>" in result.feedback, describe(result)
    assert "without a result" not in result.feedback, describe(result)
    outcome = Path(build_cache_dir, cache_key(src, "cpu"), "imports", source_key(src, "cpu") + ".json")
    assert json.loads(outcome.read_text())["status"] == "compile_error"
    assert not Path(build_cache_dir, cache_key(src, "cpu"), "built").exists()
    assert_zero(result)


def _pch_variants() -> set[str]:
    from kernelbench.harness.build import pch

    folder = pch.pch_folder()
    return {str(p) for p, _ in pch.pch_variants(folder)} if folder.exists() else set()


def test_pch_flood_builds_no_new_pch(build_cache_dir):
    """Flag lists that differ only by duplicates or order, or that fall outside the fixed PCH flag sets,
    get no PCH of their own (each used to cost ~170 MB and a minute of host compiler time)."""
    from kernelbench.harness.build import pch
    from kernelbench.harness.child.load_inline_hook import STANDARD_CFLAGS, normal_flags

    pch.ensure_pch(STANDARD_CFLAGS, "cpu")
    pch.ensure_pch(STANDARD_CFLAGS, "cuda")  # gcc's too: every variant a flood could ask for
    before = _pch_variants()
    default = '["-O3", "-fopenmp", "-O3", "-O3"]'
    floods = [default, '["-fopenmp", "-O3", "-fopenmp"]', '["-O3", "-O3", "-O3", "-O3", "-O3", "-fopenmp"]',
              '["-O1", "-g0", "-funroll-loops"]', '["-O2", "-DNDEBUG", "-mtune=native", "-O2"]']
    for flags in floods:
        src = source("pch_flood.py").replace(default, flags)
        assert pch.pch_flags(src) in (None, normal_flags(STANDARD_CFLAGS)), flags
        for device in ("cpu", "cuda"):
            pch.ensure_pch(pch.pch_flags(src), device)
    result = evaluate(TASKS["relu"], source("pch_flood.py"), config(build_cache_dir))
    assert result.status == CORRECT, describe(result)
    assert _pch_variants() == before, "a PCH was built for a flooding flag list"


# --- the pieces behind the defences, checked in-process (no compile, no child) -----------------------------

KERNEL_FILE = '''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = "torch::Tensor f(torch::Tensor x) { return x; }"
ext = load_inline(name="k", cpp_sources=[SRC], functions=["f"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.f(x)
'''


@pytest.mark.parametrize("variant,shared", [
    (KERNEL_FILE.replace("return ext.f(x)", "return ext.f(x).clone()"), True),  # only Python differs
    (KERNEL_FILE + "\nCACHE = {}\n", True),
    (KERNEL_FILE.replace('name="k"', 'name="k2"'), False),
    (KERNEL_FILE.replace('"-O3"', '"-O2"'), False),
    (KERNEL_FILE.replace("return x;", "return x.clone();"), False),
    (KERNEL_FILE.replace('functions=["f"]', 'functions=["f", "g"]'), False),
    # a compiler reached another way, or arguments not readable with certainty: the whole file is the key
    (KERNEL_FILE + "\nli = load_inline\n", False),
    (KERNEL_FILE.replace("SRC = ", "SRC = 'x'\nSRC = "), False),
    (KERNEL_FILE.replace("cpp_sources=[SRC]", "cpp_sources=[SRC.upper()]"), False),
    (KERNEL_FILE + "\nexec('pass')\n", False),
    (KERNEL_FILE.replace("import torch.nn as nn", "import torch.nn as nn\nimport os"), False),
    (KERNEL_FILE.replace("from torch.utils.cpp_extension import load_inline",
                         "from torch.utils.cpp_extension import load_inline, load") + '\nm = load(name="k", sources=["k.cpp"])\n', False),
    (KERNEL_FILE.replace("import load_inline", "import load_inline as li").replace("= load_inline(", "= li("), False),
])
def test_build_key_is_shared_only_by_identical_compiles(variant, shared):
    from kernelbench.harness.build.build_cache import cache_key

    assert (cache_key(variant, "cpu") == cache_key(KERNEL_FILE, "cpu")) is shared
    assert cache_key(variant, "cpu") != cache_key(KERNEL_FILE, "cuda")


def test_adversarial_candidates_share_their_builds():
    from kernelbench.harness.build.build_cache import cache_key

    # reads a private attribute (`x._version`): such a file is keyed whole (`build_cache.compiled_parts`)
    whole_file = {"version_skips_timed.py"}
    for library in ("adv_kernels", "adv_integrity"):
        keys = {cache_key(source(a.file), "cpu") for a in ATTACKS
                if not a.static_flags and f'name="{library}"' in source(a.file) and a.file not in whole_file}
        assert len(keys) == 1, f"the run-time candidates should carry the one shared C++ library {library}"
    # the hard-coded-shape pair are kernels of their own task (`L1/12_max_dim`), not variants of the shared
    # library; the two share one build between them; the BLAS found at run time is a matmul's (its own task), as
    # are its padded variant and the deleter's; the set-schedule reader keeps state a library of its own holds, as
    # does the allocator found in libc10
    own = {"hardcoded_shape.py", "hardcoded_shape_checked.py", "shape_fast_path.py", "cpp_found_blas.py",
           "found_blas_padded.py", "deleter_in_allowed_op.py", "set_schedule_skip.py", "found_allocator_blas.py",
           "found_allocator_aten.py", "found_pending_call_blas.py"}
    assert all('name="adv_kernels"' in source(a.file) or 'name="adv_integrity"' in source(a.file)
               for a in ATTACKS if not a.static_flags and "load_inline" in source(a.file) and a.file not in own)


@pytest.mark.parametrize("error,oom", [
    (MemoryError("std::bad_alloc"), True),
    (RuntimeError("std::bad_alloc"), True),
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
    (RuntimeError("CUDA error: cudaErrorMemoryAllocation"), True),
    (RuntimeError("shape '[4]' is invalid for input of size 5"), False),
])
def test_allocation_failures_read_as_out_of_memory(error, oom):
    from kernelbench.harness.child import worker

    try:
        raise error
    except BaseException as e:
        described = worker._describe(e)
    assert described["oom"] is oom


def test_snapshot_sees_rebinding_new_names_and_code_swaps_and_restores():
    import types

    from kernelbench.harness.child.snapshot import Snapshot

    module = types.ModuleType("kernelbench.fake_harness")
    exec("def clock():\n    return 1.0\n\nclass Tracer:\n    def hook(self):\n        return 'traced'\n", module.__dict__)
    clock, hook = module.clock, module.Tracer.hook
    snap = Snapshot([("kernelbench.fake_harness", module), ("kernelbench.fake_harness.Tracer", module.Tracer)])
    assert snap.changed() == []
    module.Tracer.hook = lambda self: "blind"
    module._perf_counter = lambda: 0.0
    clock.__code__ = (lambda: 0.0).__code__
    assert set(snap.changed()) == {("kernelbench.fake_harness.Tracer", "hook"), ("kernelbench.fake_harness", "_perf_counter"),
                                   ("kernelbench.fake_harness", "clock")}
    snap.restore()
    assert snap.changed() == [] and module.Tracer.hook is hook and module.clock() == 1.0
    assert not hasattr(module, "_perf_counter")


def test_a_warning_the_harness_gives_is_not_tampering():
    """Python records a warning in the giving module's `__warningregistry__`: a new name in a harness module, but
    the interpreter's, not the candidate's (a candidate that used up `vm.max_map_count` made `call_inputs` warn and
    was judged `harness_tampered`)."""
    import types
    import warnings

    from kernelbench.harness.child.snapshot import Snapshot

    module = types.ModuleType("kernelbench.fake_harness")
    exec("import warnings\ndef work():\n    warnings.warn('low on memory maps', stacklevel=1)\n", module.__dict__)
    snap = Snapshot([("kernelbench.fake_harness", module)])
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        module.work()
    assert "__warningregistry__" in vars(module)
    assert snap.changed() == []
    module._planted = 1
    assert snap.changed() == [("kernelbench.fake_harness", "_planted")]


def test_interpreted_triton_scores_its_correctness_only(build_cache_dir):
    """A correct Triton candidate on CPU ran under the interpreter: correct, flagged `interpreted`, no speedup,
    and the score is the correctness weight alone."""
    result = evaluate(TASKS["relu"], source("triton_honest_relu.py"), config(build_cache_dir))
    assert result.status == CORRECT and result.correct, describe(result)
    assert result.flags == ("interpreted",), describe(result)
    assert result.speedup == 0.0 and result.speedup_vs_compile == 0.0, describe(result)
    assert kernel_score(result) == pytest.approx(0.3), describe(result)
    assert result.conditions.timing_trials == 0 and "no speedup" in result.feedback, describe(result)
    from rewards.score import ScoreConfig

    assert ScoreConfig().reward(result) == pytest.approx(0.3)
