"""`evaluate(task, candidate_src, config) -> EvalResult`: one candidate through the whole harness.

Stages (DESIGN.md, "The harness: rules"):
1. `precheck` (parent, no execution): the source parses and defines `ModelNew`; static policy checks.
2. `compile_stage`: import the candidate in a sandboxed child that builds its extension into the build cache
   (`kernelbench.harness.build.builder`); cached by source + toolchain.
3. `run_stage`: fresh seeds; a reference child (task code only) makes inputs, reference outputs and the
   reference timing (once for a group of candidates submitted together, `reference_cache`); a run child
   (candidate) gets only the inputs and returns outputs and its timing; the parent compares, judges the
   dynamic checks, re-verifies suspicious speedups, and reads telemetry.
   On CPU the two children live side by side and are timed in alternating blocks (`kernelbench.harness.paired`).
   The parts: the children's jobs and reports (`protocol`, `children`), the reference's record (`reference`),
   the measurement (`measurement`), the judgement of one run child (`verdict`).
`kernelbench.executors.evaluator.Evaluator` runs stage 2 in a pool ahead of stage 3. Every fault of the candidate
becomes a status; a fault of the harness (a child that never reached the candidate's code, a broken task's
reference, a required sandbox missing, the harness's own code raising) becomes `harness_error`.
"""

from __future__ import annotations

import ast
import ctypes
import os
import time
from dataclasses import replace
from typing import Any

from kernelbench.harness import code_check, feedback, paired, static_checks
from kernelbench.harness.build import builder, pch, symbols, triton_kernels
from kernelbench.harness.child import build_manifest
from kernelbench.harness.insight import profiling, roofline, telemetry
from kernelbench.harness.isolation import sandbox
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.measurement import measure_once, profile_tables
from kernelbench.harness.reference import Reference
from kernelbench.harness.reference_cache import Share
from kernelbench.harness.result import (COMPILE_ERROR, CORRECT, FORMAT_ERROR, HARNESS_ERROR, REJECTED, TIMEOUT,
                                        Conditions, EvalResult)
from kernelbench.harness.staged import Staged, policy_of
from kernelbench.harness.verdict import RunVerdict
from kernelbench.tasks.task import Task


def _decided(status: str, config: EvalConfig, policy: str, detail: str = "", flags: tuple[str, ...] = (),
             reasons: dict[str, str] | None = None, **fields: Any) -> EvalResult:
    text = feedback.render(status, detail=detail, flags=flags, reasons=reasons)
    cond = fields.pop("conditions", None) or Conditions(device=config.device, op_policy=policy, size=config.size)
    return EvalResult(status=status, flags=flags, feedback=text, conditions=cond, **fields)


def precheck(task: Task, src: str, config: EvalConfig) -> EvalResult | None:
    """Format and static checks, in the parent, without executing anything."""
    policy = policy_of(task, config)
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        return _decided(FORMAT_ERROR, config, policy, f"syntax error on line {e.lineno}: {e.msg}")
    defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if "ModelNew" not in defined:
        return _decided(FORMAT_ERROR, config, policy, "no `class ModelNew(nn.Module)` defined at module level")
    if config.static_checks:
        violations = static_checks.check_source(src, config.device)
        if violations:
            reasons = {v.flag: v.reason for v in violations}
            return _decided(REJECTED, config, policy, "", tuple(reasons), reasons)
    return None


def harness_error(task: Task, config: EvalConfig, cause: str, **fields: Any) -> EvalResult:
    """The result of an evaluation the harness could not carry out (not the candidate's fault; never scored)."""
    return _decided(HARNESS_ERROR, config, policy_of(task, config), cause.strip()[:2000], **fields)


def compile_stage(task: Task, src: str, config: EvalConfig, jobs: int = 0) -> Staged:
    """Precheck and build; a fault of the harness's own (it raised) becomes a decided `harness_error`. An
    interpreted Triton candidate runs under `triton_kernels.judged_config` from here on."""
    config = triton_kernels.judged_config(src, config)
    try:
        return _compile_stage(task, src, config, jobs)
    except Exception as e:
        return Staged(task, src, config, None, harness_error(task, config, f"compile stage raised {type(e).__name__}: {e}"))


def _compile_stage(task: Task, src: str, config: EvalConfig, jobs: int = 0) -> Staged:
    early = precheck(task, src, config)
    if early is not None:
        return Staged(task, src, config, None, early)
    # trusted parent, once per toolchain and flag set; CUDA builds' main.cpp uses it too
    pch_dir = pch.ensure_pch(pch.pch_flags(src), config.device)
    out = builder.build(src, config, jobs, pch_dir)
    policy = policy_of(task, config)
    fields = dict(compile_s=out.compile_s, cached_build=out.cached)
    if out.status == "ok":
        manifest = build_manifest.record(os.path.join(out.entry_dir, "ext"))  # before the check: what it judged
        violations = (symbols.check_build(os.path.join(out.entry_dir, "ext"), cache_dir=out.entry_dir)
                      if config.static_checks else [])
        if violations:  # bypasses judged from what the build imports, whatever the source called them
            reasons = {v.flag: v.reason for v in violations}
            return Staged(task, src, config, out, _decided(REJECTED, config, policy, "", tuple(reasons), reasons,
                                                           compiled=True, **fields))
        return Staged(task, src, config, out, manifest=manifest)
    if out.status == HARNESS_ERROR:
        return Staged(task, src, config, out, harness_error(task, config, out.error_text, **fields))
    if out.status == REJECTED:  # the compile child refused a build's flags, its pipe carried the candidate's frames, or its tree is too large
        reasons = {out.flag or "dynamic:harness_tampered": out.error_text}
        return Staged(task, src, config, out, _decided(REJECTED, config, policy, "", tuple(reasons), reasons, **fields))
    status = {"timeout": TIMEOUT, "format_error": FORMAT_ERROR}.get(out.status, COMPILE_ERROR)
    head = "compilation failed:\n" if status == COMPILE_ERROR else ""
    return Staged(task, src, config, out, _decided(status, config, policy, head + out.error_text, **fields))


SHARED_TIMING_GPU = "shared_timing_gpu"
"""Flag of a result timed on a GPU that also trains or generates (`EvalConfig.shared_gpu`)."""
RETIMED = "retimed"
"""Informational flag: the first paired timing's one fault was unaccounted time in the candidate's blocks with
every output right (`verdict.RunVerdict.retime`), and the result is the second timing's. Why: on a busy machine
run-queue waits land between trials on one side more than on the other; `python3 scripts/false_rejections.py
--n 200 --jobs 4 --load 0.5` rejected 3 and 6 honest solutions of 200 (`timing_inconsistent`) on a day when the
VM was noisier, with and without the week's other changes. A candidate whose reported times leave its blocks
short does so again and stays rejected; one whose lie is caught one time in q passes twice as often as before
at most (1 - q^2 against 1 - q)."""
SUSPICIOUS_SPEEDUP = "suspicious_speedup"
INFORMATIONAL_FLAGS = frozenset({SUSPICIOUS_SPEEDUP, triton_kernels.INTERPRETED, RETIMED, code_check.UNSAMPLED,
                                 SHARED_TIMING_GPU, roofline.ABOVE_ROOFLINE})
"""The flags `run_stage` adds that reject nothing: they say how a verdict was reached (timed twice, re-verified,
unsampled, on a shared GPU, above the roofline), never what rejected it. Readers that ask what rejected a
result (`train.rollout.noisy_rejection`, `scripts/false_rejections.py`) set these aside."""


def run_stage(staged: Staged, share: Share | None = None) -> EvalResult:
    """Correctness, timing, dynamic checks and telemetry for a compiled candidate; a fault of the harness's
    own (the reference failed, a child could not start, the harness raised) is a `harness_error`. With
    `share`: the seeds and reference of the candidate's group (`reference_cache`)."""
    if staged.decided is not None:
        return staged.decided
    t0 = time.perf_counter()
    try:
        result = _run_stage(staged, share)
        # the whole stage (the reference child, the slot, the comparison), not the run child's life alone: the
        # figure a scheduler of evaluations needs (`scripts/simulate_step.py --from-run`)
        return replace(result, run_s=time.perf_counter() - t0) if result.run_s > 0 else result
    except Exception as e:
        return harness_error(staged.task, staged.config, f"run stage raised {type(e).__name__}: {e}",
                             compiled=True, compile_s=staged.build.compile_s if staged.build else 0.0)
    finally:
        _give_back_freed_memory()


def _give_back_freed_memory() -> None:
    """Return the heap the run stage freed to the OS (glibc `malloc_trim`). Why: the parent holds both children's
    reports and the reference's outputs while it judges (hundreds of MB on an 8 MB elementwise task with its
    check calls); freed in worker threads' arenas that memory stayed resident, and four run workers of one
    evaluator grew past 10 GB (`scripts/false_rejections.py --jobs 4`, its `parent_rss_mib` column)."""
    try:
        _LIBC.malloc_trim(0)
    except (AttributeError, OSError):  # not glibc: nothing to ask
        pass


try:
    _LIBC = ctypes.CDLL("libc.so.6")
except OSError:
    _LIBC = None


def _run_stage(staged: Staged, share: Share | None) -> EvalResult:
    config, build = staged.config, staged.build
    policy = policy_of(staged.task, config)
    reading = telemetry.read(config.device)
    # decided here from the device and the source, never from what the child reports (triton_kernels)
    interpreted = triton_kernels.interpreted(staged.src, config.device)
    with sandbox.SlotLease() as slot:
        verdict, ref, seeds = measure_once(staged, slot, share)
        retimed = ""
        if verdict.retime:
            # run-queue waits on a busy machine fall between trials on one side more than the other: a second
            # timing tells that from a candidate whose reported times leave its blocks short (it does so again)
            retimed = verdict.reasons.get("timing_inconsistent", "") if verdict.reasons else ""
            verdict, ref, seeds = measure_once(staged, slot, share)
        speedup = 0.0 if interpreted else _speedup(ref, verdict)
        flags, reasons = list(verdict.flags), dict(verdict.reasons or {})
        if verdict.status == CORRECT and speedup > config.suspicious_speedup:
            # fresh seeds of its own, never the group's: a cache or a lucky draw does not repeat
            again, ref2, _ = measure_once(staged, slot)
            flags.append(SUSPICIOUS_SPEEDUP)
            reasons[SUSPICIOUS_SPEEDUP] = f"measured {speedup:.1f}x; re-verified with fresh inputs"
            if again.status != CORRECT:
                verdict = again
                flags += [f for f in again.flags if f not in flags]
                reasons.update(again.reasons or {})
            speedup = min(speedup, _speedup(ref2, again)) if again.status == CORRECT else 0.0
    torch_v, cuda_v = telemetry.versions()
    timing = verdict.timing
    cond = Conditions(device=config.device, device_name=reading.device_name, driver_version=reading.driver_version,
                      sm_clock_mhz=reading.sm_clock_mhz, mem_clock_mhz=reading.mem_clock_mhz,
                      temperature_c=reading.temperature_c, power_w=reading.power_w,
                      cpu_threads=config.threads if config.device == "cpu" else 0, torch_version=torch_v,
                      cuda_version=cuda_v, sandbox=sandbox.sandbox_kind(config.require_sandbox), op_policy=policy,
                      init_seed=seeds.init_seed, input_seeds=seeds.input_seeds + seeds.extra_seeds,
                      correctness_trials=len(seeds.input_seeds) + len(seeds.extra_seeds),
                      timing_trials=timing.trials if timing else 0, warmup_trials=config.warmup_trials, size=config.size,
                      timing_rounds=len(ref.block_medians_ms) if ref else 0)
    if verdict.status == HARNESS_ERROR:
        return harness_error(staged.task, config, verdict.detail, compiled=True,
                             compile_s=build.compile_s if build else 0.0, run_s=verdict.run_s, conditions=cond)
    correct = verdict.status == CORRECT
    status = REJECTED if flags and any(f != SUSPICIOUS_SPEEDUP for f in flags) else verdict.status
    correct = correct and status == CORRECT
    if interpreted:  # after the verdict: the flag rejects nothing, it withholds the speedup
        flags.append(triton_kernels.INTERPRETED)
    if retimed:  # after the verdict: the first timing's unaccounted time, cleared or confirmed by the second
        flags.append(RETIMED)
        reasons[RETIMED] = f"the first timing was inconsistent ({retimed}); timed again"
    if code_check.UNSAMPLED in reasons:  # after the verdict: which code ran was not checked (allow_unsampled)
        flags.append(code_check.UNSAMPLED)
    if config.shared_gpu and config.device == "cuda":  # after the verdict: timed beside training (train.layout)
        flags.append(SHARED_TIMING_GPU)
        reasons[SHARED_TIMING_GPU] = "timed on a GPU that also trains or generates (a one-GPU check): not comparable"
    ref_ms = ref.timing.median_ms if ref and ref.timing else 0.0
    comp_ms = ref.compile_timing.median_ms if ref and ref.compile_timing else 0.0
    run_ms = timing.median_ms if timing else 0.0
    speedup = speedup if correct else 0.0
    sol = roofline.assess(ref.work if ref else None, config.device, reading.device_name, config.threads,
                          run_ms if correct else 0.0, flags)
    if sol.sol_fraction > 1.0:  # after the status: a finding about the roofline, not about the kernel
        flags.append(roofline.ABOVE_ROOFLINE)
        reasons[roofline.ABOVE_ROOFLINE] = roofline.above_reason(sol)
    # against torch.compile: the speedup scaled by compiled/eager as the reference's one process measured
    # them, so it carries the paired figure's steadiness (one after the other: exactly comp_ms / run_ms)
    vs_compile = speedup * comp_ms / ref_ms if correct and comp_ms and ref_ms else 0.0
    prof = profile_tables(config, ref, verdict) if correct else profiling.Profile()
    text = feedback.render(status, detail=verdict.detail, speedup=speedup, runtime_ms=run_ms, ref_runtime_ms=ref_ms,
                           flags=tuple(flags), reasons=reasons, max_abs_error=verdict.comparison.max_abs_error,
                           profile=prof.summary())
    if sol.sol_fraction > 0:
        text += "\n" + roofline.feedback_line(sol.sol_fraction, sol.bound, sol.roofline_ms)
    if correct:  # findings that reject nothing (reduced-precision types): the model should know they were seen
        text += "".join(f"\nnote: {w.reason}; outputs are judged at the reference dtype's tolerances"
                        for w in static_checks.source_warnings(staged.src, config.device))
    return EvalResult(status=status, compiled=True, correct=correct, runtime_ms=run_ms,
                      runtime_std_ms=timing.std_ms if timing else 0.0, ref_runtime_ms=ref_ms, compile_ref_runtime_ms=comp_ms,
                      speedup=speedup, speedup_vs_compile=vs_compile,
                      flags=tuple(flags), feedback=text,
                      max_abs_error=verdict.comparison.max_abs_error, compile_s=build.compile_s if build else 0.0,
                      run_s=verdict.run_s, cached_build=bool(build and build.cached), conditions=cond,
                      sol_fraction=sol.sol_fraction, roofline_ms=sol.roofline_ms, sol_bound=sol.bound, profile=prof,
                      limits_held=verdict.limits_held)


def _speedup(ref: Reference | None, verdict: RunVerdict) -> float:
    if ref is None or verdict.status != CORRECT or not verdict.timing:
        return 0.0
    if ref.block_medians_ms and len(ref.block_medians_ms) == len(verdict.block_medians_ms):
        return paired.paired_speedup(list(ref.block_medians_ms), list(verdict.block_medians_ms))
    ref_ms = ref.timing.median_ms if ref.timing else 0.0
    run_ms = verdict.timing.median_ms
    return ref_ms / run_ms if ref_ms > 0 and run_ms > 0 else 0.0


def evaluate(task: Task, candidate_src: str, config: EvalConfig = EvalConfig()) -> EvalResult:
    """Evaluate one candidate solution file's text against `task` (see the module docstring); a
    `harness_error` is retried once (`retries` says so), then returned as it is."""
    result = run_stage(compile_stage(task, candidate_src, config))
    if result.status == HARNESS_ERROR:
        result = replace(run_stage(compile_stage(task, candidate_src, config)), retries=1)
    return result
