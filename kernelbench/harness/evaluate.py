"""`evaluate(task, candidate_src, config) -> EvalResult`: one candidate through the whole harness.

Stages (DESIGN.md, "The harness: rules"):
1. `precheck` (parent, no execution): the source parses and defines `ModelNew`; static policy checks.
2. `compile_stage`: import the candidate in a sandboxed child that builds its extension into the build cache
   (`kernelbench.harness.builder`); cached by source + toolchain.
3. `run_stage`: fresh seeds; a reference child (task code only) makes inputs, reference outputs and the
   reference timing; a run child (candidate) gets only the inputs and returns outputs and its timing; the
   parent compares, judges the dynamic checks, re-verifies suspicious speedups, and reads telemetry.
   On CPU the two children live side by side and are timed in alternating blocks (`kernelbench.harness.paired`).
`kernelbench.executors.evaluator.Evaluator` runs stage 2 in a pool ahead of stage 3. Every fault of the candidate
becomes a status; a fault of the harness (a child that never reached the candidate's code, a broken task's
reference, a required sandbox missing, the harness's own code raising) becomes `harness_error`.
"""

from __future__ import annotations

import ast
import json
import os
import random
import secrets
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelbench.harness import build_manifest, builder, feedback, ncu, nvrtc, paired, pch, profiling, report, sandbox, static_checks, symbols, telemetry, triton_kernels
from kernelbench.harness.child import op_policy, timing, worker
from kernelbench.harness import roofline
from kernelbench.harness.compare import Comparison, compare_outputs, inputs_unchanged
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.child.inputs import Seeds, draw_seeds
from kernelbench.harness.result import (COMPILE_ERROR, CORRECT, FORMAT_ERROR, HARNESS_ERROR, INCORRECT, REJECTED,
                                RUNTIME_ERROR, TIMEOUT, Conditions, EvalResult)
from kernelbench.tasks.task import Task

SIGNAL_NAMES = {4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV", 24: "SIGXCPU", 25: "SIGXFSZ"}


class HarnessError(RuntimeError):
    """The harness could not evaluate (the task's reference failed, the sandbox is missing): not the candidate's fault."""


@dataclass(frozen=True)
class Staged:
    """A candidate past the compile stage, ready for the run stage (or already decided)."""

    task: Task
    src: str
    config: EvalConfig
    build: builder.BuildOutcome | None
    decided: EvalResult | None = None
    """Set when the candidate failed before the run stage (format, static check, compile)."""
    manifest: dict[str, dict[str, str]] | None = None
    """The build folder as the parent recorded it after the compile stage (`build_manifest.record`): all
    the run child may load. None: recorded when the run stage starts."""


def policy_of(task: Task, config: EvalConfig) -> str:
    return config.op_policy or task.op_policy or "strict"


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


def not_started(out: sandbox.ChildOutcome, what: str) -> str:
    """Why a child that never reached untrusted code stopped, for a `harness_error`'s text."""
    if not out.started:
        head = f"the {what} child could not start (the interpreter or the project could not be loaded in the sandbox)"
    else:
        head = f"the harness's own code failed in the {what} child before the candidate ran"
    state = "timed out" if out.timed_out else f"exit {out.returncode}" + (f", signal {out.signal}" if out.signal else "")
    return f"{head} ({state}, {out.sandbox}): {out.stderr_tail.strip()[-600:]}"


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
        violations = symbols.check_build(os.path.join(out.entry_dir, "ext")) if config.static_checks else []
        if violations:  # bypasses judged from what the build imports, whatever the source called them
            reasons = {v.flag: v.reason for v in violations}
            return Staged(task, src, config, out, _decided(REJECTED, config, policy, "", tuple(reasons), reasons,
                                                           compiled=True, **fields))
        return Staged(task, src, config, out, manifest=manifest)
    if out.status == HARNESS_ERROR:
        return Staged(task, src, config, out, harness_error(task, config, out.error_text, **fields))
    if out.status == REJECTED:  # the compile child's report pipe carried frames of the candidate's own
        reasons = {"dynamic:harness_tampered": out.error_text}
        return Staged(task, src, config, out, _decided(REJECTED, config, policy, "", tuple(reasons), reasons, **fields))
    status = {"timeout": TIMEOUT, "format_error": FORMAT_ERROR}.get(out.status, COMPILE_ERROR)
    head = "compilation failed:\n" if status == COMPILE_ERROR else ""
    return Staged(task, src, config, out, _decided(status, config, policy, head + out.error_text, **fields))


def _job(config: EvalConfig, mode: str, seeds: Seeds, nonce: str, **extra: Any) -> dict[str, Any]:
    return {"mode": mode, "nonce": nonce, "device": config.device, "threads": config.threads,
            "init_seed": seeds.init_seed, "input_seeds": list(seeds.input_seeds), "extra_seeds": list(seeds.extra_seeds),
            "warmup_trials": config.warmup_trials, "timing_trials": config.timing_trials,
            "timing_input_sets": max(1, min(config.timing_input_sets, len(seeds.input_seeds))),
            "timing_budget_s": config.run_timeout_s / 4, "min_trials": config.min_timing_trials,
            "timing_checks": _timing_checks(config, seeds) if config.timing_trials > 0 else [],
            "profile": "torch" if config.profile in ("torch", "ncu") else "",
            "profile_timeout_s": config.profile_timeout_s, **extra}


def _timing_checks(config: EvalConfig, seeds: Seeds) -> list[list[int]]:
    """(timing set, seed) of each hidden check call among the timed trials (timing.Measurement._check): at least
    one per paired block. Derived from this evaluation's secret seeds, so the reference and run jobs agree and
    nothing the candidate sees before the run predicts them; the seeds give element-wise factors in the timing
    range (`timing.check_inputs`), so a check looks like a trial."""
    if config.timing_checks <= 0:
        return []
    count = max(config.timing_checks, config.timing_rounds if _paired(config) else 0)
    sets = max(1, len(seeds.timing_seeds))
    rng = random.Random(f"timing checks {seeds.init_seed} {list(seeds.timing_seeds)}")  # str seeds: SHA-512
    return [[j % sets, rng.getrandbits(62)] for j in range(count)]


REFERENCE_FILE_MB = 1 << 16
"""The reference child runs trusted task code; its input and output files grow with the task (GPU sizes
reach gigabytes), so only a generous bound applies to it."""


def _limits(config: EvalConfig, max_file_mb: int = 0, timeout_s: float = 0.0) -> sandbox.Limits:
    return sandbox.Limits(timeout_s=timeout_s or config.run_timeout_s, max_processes=config.max_processes,
                          max_file_mb=max(config.max_file_mb, max_file_mb),
                          memory_limit_mb=config.memory_limit_mb if config.device == "cpu" else 0)


def _child_spec(config: EvalConfig, scratch: str, job: dict[str, Any], binds=(), extensions_dir: str = "",
                max_file_mb: int = 0, pass_fds: tuple[int, ...] = (), timeout_s: float = 0.0) -> sandbox.ChildSpec:
    Path(scratch, "job.json").write_text(json.dumps(job))
    env = builder.child_env(config, extensions_dir) if extensions_dir else (("OMP_NUM_THREADS", str(config.threads)),)
    if config.device == "cuda" and not extensions_dir:
        env += nvrtc.child_env(config.device)
    return sandbox.ChildSpec(argv=worker.child_argv(scratch), scratch_dir=scratch,
                             limits=_limits(config, max_file_mb, timeout_s), binds=tuple(binds),
                             cuda=config.device == "cuda", env=env, pass_fds=pass_fds)


def _spawn(config: EvalConfig, slot: sandbox.SlotLease, scratch: str, job: dict[str, Any], binds=(),
           extensions_dir: str = "", max_file_mb: int = 0) -> tuple[sandbox.ChildOutcome, dict[str, Any]]:
    spec = _child_spec(config, scratch, job, binds, extensions_dir, max_file_mb)
    out = sandbox.run_child(spec, slot, config.require_sandbox)
    return out, worker.read_result(scratch, job["nonce"])


def _load(path: str) -> dict[str, Any]:
    import torch

    return torch.load(path, weights_only=True)


@dataclass(frozen=True)
class Reference:
    timing: dict[str, float]
    compile_timing: dict[str, float]
    structures: list[str]
    inputs: dict[str, Any]
    outputs: list[list[Any]]
    block_medians_ms: tuple[float, ...] = ()
    """Paired timing: the median of each block (empty when timed in one go)."""
    blocks_ms: tuple[tuple[float, ...], ...] = ()
    """Paired timing: each block's trial times (for `paired.unaccounted`)."""
    check_outputs: list[list[Any]] = field(default_factory=list)
    """Outputs of the hidden check calls' inputs (`_timing_checks`), computed by the reference."""
    timing_outputs: list[list[Any]] = field(default_factory=list)
    """Outputs of the timing base sets (what the verification round must return)."""
    work: dict[str, Any] = field(default_factory=dict)
    """Bytes and FLOPs of the timed configuration (`kernelbench.harness.child.work.Work.to_dict`), {} when not counted."""
    profile: dict[str, Any] = field(default_factory=dict)
    """The reference child's profile report of one untimed call (`profiling.table_from_report`); {} when none."""
    set_configs: tuple[int, ...] = ()
    """Input configuration of each correctness set (`kernelbench.tasks.input_configs`); empty: one configuration."""
    config_labels: tuple[str, ...] = ()
    """How feedback names each configuration (its constants and input shapes, never its seeds)."""

    def where(self, i: int) -> str:
        """`input set i`, with its configuration when the task has more than one."""
        if i < len(self.set_configs) and self.set_configs[i] < len(self.config_labels):
            return f"input set {i}, {self.config_labels[self.set_configs[i]]}"
        return f"input set {i}"


def _reference_job(task: Task, config: EvalConfig, seeds: Seeds, **extra: Any) -> dict[str, Any]:
    task_fields = {k: getattr(task, k) for k in ("id", "level", "name", "origin", "source", "path", "op_policy")}
    return _job(config, "reference", seeds, secrets.token_hex(16), task=task_fields, size=config.size,
                time_compile=config.time_compile_baseline, timing_seeds=list(seeds.timing_seeds), **extra)


def _reference_from(task: Task, out: sandbox.ChildOutcome, res: dict[str, Any], scratch: str,
                    rounds: int = 0) -> Reference:
    if not res.get("ok"):
        if not out.started:
            raise HarnessError(not_started(out, "reference"))
        why = "timed out" if out.timed_out else res.get("error") or f"exit {out.returncode}: {out.stderr_tail[-800:]}"
        raise HarnessError(f"reference of task {task.id} failed: {why}")
    blocks = res.get("timing_blocks")
    # the candidate may stop after the reference's block of a round: that round is left out
    medians = paired.block_medians(blocks[:rounds], rounds) if rounds and isinstance(blocks, list) else None
    saved = _load(os.path.join(scratch, "reference.pt"))
    return Reference(timing=res.get("timing", {}), compile_timing=res.get("compile_timing", {}),
                     structures=res["structures"], inputs=_load(os.path.join(scratch, "inputs.pt")),
                     outputs=saved["outputs"], check_outputs=saved.get("check_outputs", []),
                     timing_outputs=saved.get("timing_outputs", []), block_medians_ms=tuple(medians or ()),
                     blocks_ms=tuple(tuple(float(t) for t in b) for b in blocks[:rounds]) if medians else (),
                     work=res.get("work") or {}, profile=res.get("profile") or {},
                     set_configs=tuple(int(c) for c in res.get("set_configs", ())),
                     config_labels=tuple(str(t) for t in res.get("config_labels", ())))


def run_reference(task: Task, config: EvalConfig, seeds: Seeds, slot: sandbox.SlotLease, scratch: str) -> Reference:
    """The trusted reference in its own sandboxed child; writes inputs.pt into `scratch`."""
    job = _reference_job(task, config, seeds)
    out, res = _spawn(config, slot, scratch, job, max_file_mb=REFERENCE_FILE_MB)
    return _reference_from(task, out, res, scratch)


@dataclass(frozen=True)
class RunVerdict:
    """The parent's reading of one run child."""

    status: str
    detail: str = ""
    comparison: Comparison = Comparison(True)
    timing: dict[str, float] | None = None
    flags: tuple[str, ...] = ()
    reasons: dict[str, str] | None = None
    run_s: float = 0.0
    block_medians_ms: tuple[float, ...] = ()
    """Paired timing: the median of each candidate block, round by round with the reference's."""
    profile: profiling.ProfileTable = profiling.ProfileTable()
    """The candidate's profiled call (sent after the report: it never changes the fields above)."""
    profile_note: str = ""
    """Why `profile` is empty although profiling was asked for."""


def _crash_detail(out: sandbox.ChildOutcome, res: dict[str, Any]) -> str:
    if res:
        kind = "out of memory" if res.get("oom") else f"error during {res.get('phase', 'run')}"
        return f"{kind}: {res.get('error', '')}\n{_trim_tb(res.get('traceback', ''))}"
    if out.signal:
        name = SIGNAL_NAMES.get(out.signal, f"signal {out.signal}")
        extra = " (killed: memory or process limit?)" if out.signal == 9 else ""
        return f"the run process crashed with {name}{extra}\n{out.stderr_tail[-600:]}"
    return (f"the run process exited (status {out.returncode}) without reporting a result: "
            f"sys.exit/os._exit/exit() in the candidate?\n{out.stderr_tail[-600:]}")


def _trim_tb(tb: str) -> str:
    lines = [ln for ln in tb.splitlines() if "kernelbench/harness/child/worker.py" not in ln]
    return "\n".join(lines[-12:])


def _judge(res: dict[str, Any], out: sandbox.ChildOutcome, policy: str, op_checks: bool) -> dict[str, str]:
    """Dynamic checks from what the run child recorded: flag -> reason."""
    found: dict[str, str] = {}
    if res.get("timer_patched"):
        found["dynamic:timer_patched"] = "replaced: " + ", ".join(map(str, res["timer_patched"]))[:600]
    if res.get("harness_tampered"):
        found["dynamic:harness_tampered"] = "replaced: " + ", ".join(map(str, res["harness_tampered"]))[:600]
    extra = max(int(res.get("threads_after", 0)) - int(res.get("threads_before", 0)),
                int(res.get("os_threads_after", 0)) - int(res.get("os_threads_before", 0)))
    if extra > 0:
        found["dynamic:threads"] = f"{extra} thread(s) started by the candidate were still running after a phase"
    refused = res.get("new_tasks_refused") or {}
    if (refused.get("rlimit") or refused.get("seccomp")) and not refused.get("refused"):
        found["dynamic:harness_tampered"] = "the run child's refusal of new threads was disarmed"
    total_ms = float(res.get("timing", {}).get("total_ms", 0.0))
    if total_ms / 1e3 > out.wall_s:
        found["timing_inconsistent"] = f"trials sum to {total_ms / 1e3:.3f} s but the whole run took {out.wall_s:.3f} s"
    if op_checks:
        for v in op_policy.judge_ops(list(res.get("ops", [])), policy, int(res.get("kernel_calls", -1))):
            found.setdefault(v.flag, v.reason)
    return found


def _candidate_calls(frames: report.Frames, ref: Reference) -> dict[str, Any]:
    """The run child's reported calls, in the shape `_compare_all` reads (each from its own frame)."""
    n_sets, n_timing, n_checks = len(ref.outputs), len(ref.timing_outputs), len(ref.check_outputs)
    cand: dict[str, Any] = {"outputs": [], "inputs_after": [], "timing": [], "checks": []}
    for i in range(n_sets):
        call = frames.tensors(f"forward/{i}")
        cand["outputs"].append(call["outputs"])
        cand["inputs_after"].append(call["inputs_after"])
    for key, label, n in (("timing", "verify", n_timing), ("checks", "check", n_checks)):
        for i in range(n):
            cand[key].append(frames.tensors(f"{label}/{i}") if f"{label}/{i}" in frames.payloads else None)
    return cand


def _compare_all(ref: Reference, cand: dict[str, Any], res: dict[str, Any], config: EvalConfig,
                 checks: list[list[int]]) -> Comparison:
    got_structures = res.get("structures")
    if got_structures != ref.structures:
        if not isinstance(got_structures, list) or len(got_structures) != len(ref.structures):
            return Comparison(False, f"output structures {str(got_structures)[:200]} != expected {ref.structures}")
        i = next(i for i, (g, w) in enumerate(zip(got_structures, ref.structures)) if g != w)
        return Comparison(False, f"{ref.where(i)}: output structure {str(got_structures[i])[:200]} != expected {ref.structures[i]}")
    metas = res.get("output_meta", [])
    worst = Comparison(True)
    for i, want in enumerate(ref.outputs):
        c = compare_outputs(cand["outputs"][i], want, metas[i] if i < len(metas) else [], config.device, config.atol, config.rtol, config.scale_atol_by_rms)
        if not c.ok:
            return replace(c, reason=f"{ref.where(i)}: {c.reason}")
        changed = inputs_unchanged(ref.inputs["sets"][i], cand["inputs_after"][i])
        if changed:
            return Comparison(False, f"{ref.where(i)}: {changed}")
        worst = c if c.max_abs_error > worst.max_abs_error else worst
    timing_sets = ref.inputs.get("timing_sets", [])
    for i, got in enumerate(cand["timing"]):
        if got is None:
            return Comparison(False, f"during timing: the verification call on timing set {i} was not reported")
        c = compare_outputs(got["outputs"], ref.timing_outputs[i], [], config.device, config.atol, config.rtol,
                            config.scale_atol_by_rms)
        if not c.ok:
            return replace(c, reason=f"during timing (timing set {i}, buffers reused): {c.reason}")
        changed = inputs_unchanged(timing_sets[i], got["inputs_after"])
        if changed:
            return Comparison(False, f"during timing (timing set {i}, buffers reused): {changed}")
    if any(g is None for g in cand["checks"]):
        return Comparison(False, "during timing: the check calls' outputs are missing")
    for j, (got, want) in enumerate(zip(cand["checks"], ref.check_outputs)):
        c = compare_outputs(got["outputs"], want, [], config.device, config.atol, config.rtol, config.scale_atol_by_rms)
        if not c.ok:
            return replace(c, reason=f"during timing (a call among the timed ones, perturbed inputs): {c.reason}")
        k, seed = checks[j]
        changed = inputs_unchanged(timing.check_inputs(timing_sets[k % len(timing_sets)], seed), got["inputs_after"])
        if changed:
            return Comparison(False, f"during timing (a call among the timed ones): {changed}")
    return worst


def _run_job(staged: Staged, seeds: Seeds, slot: sandbox.SlotLease, ref_scratch: str, collector: report.Collector,
             pipes: paired.Pipes | None = None, profile: str = "") -> tuple[str, sandbox.ChildSpec, dict[str, Any]]:
    """Scratch folder, child spec and job of the candidate's run child (inputs copied from the reference's)."""
    config = staged.config
    scratch = sandbox.make_scratch(slot.uid, prefix="ka-run-")
    try:
        shutil.copy(os.path.join(ref_scratch, "inputs.pt"), os.path.join(scratch, "inputs.pt"))
        Path(scratch, "candidate.py").write_text(staged.src)
        sandbox.give_tree(scratch, slot.uid)
        kind = sandbox.sandbox_kind(config.require_sandbox)
        binds = builder.run_binds(staged.build.entry_dir, scratch, slot.uid, kind, staged.build.pch_dir)
        extra = {"paired": pipes.job_fields()} if pipes else {}
        extra.update({"profile": profile} if profile else {})
        manifest = staged.manifest
        if manifest is None:  # a Staged made elsewhere: the build as it is now, never none at all
            manifest = build_manifest.record(os.path.join(staged.build.entry_dir, "ext"))
        job = _job(config, "run", seeds, secrets.token_hex(16), candidate="candidate.py",
                   pch_dir=staged.build.pch_dir, triton=triton_kernels.uses_triton(staged.src),
                   build_manifest=manifest, **collector.job_fields(), **extra)
        # the report holds every call's output and arguments afterwards: a few times inputs.pt
        collector.max_bytes = 8 * os.path.getsize(os.path.join(scratch, "inputs.pt")) + (64 << 20)
        fds = (pipes.child_fds if pipes else ()) + (collector.write_fd,)
        spec = _child_spec(config, scratch, job, binds, os.path.join(staged.build.entry_dir, "ext"),
                           max_file_mb=64, pass_fds=fds)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return scratch, spec, job


def _verdict(staged: Staged, ref: Reference, out: sandbox.ChildOutcome, frames: report.Frames, job: dict[str, Any],
             paired_mode: bool = False, pairing: paired.Pairing | None = None) -> RunVerdict:
    """The parent's reading of a finished run child: what came over its report pipe (read after the whole
    sandbox was killed), its outputs compared with the reference's; in paired mode, `pairing` is what the
    parent saw of the rounds (None: the child never said `ready`)."""
    config = staged.config
    if not out.untrusted_ran:  # never reached the candidate's code: whatever stopped it is the harness's
        return RunVerdict(HARNESS_ERROR, not_started(out, "run"), run_s=out.wall_s)
    res = frames.result()
    if res and res.get("nonce") != job["nonce"]:
        res = {}
    if out.timed_out and not (job.get("profile") and res.get("ok")):  # a complete report: the profiled call hung
        return RunVerdict(TIMEOUT, f"the run stage exceeded {config.run_timeout_s:.0f} s (hang or far too slow)", run_s=out.wall_s)
    if frames.problem:  # bytes nobody but candidate code could have written
        reason = f"the run process's report channel carried {frames.problem}"
        return RunVerdict(REJECTED, reason, flags=("dynamic:harness_tampered",),
                          reasons={"dynamic:harness_tampered": reason}, run_s=out.wall_s)
    refused = build_manifest.judge(res)
    if refused:  # a build the parent never checked was asked for (caught by the candidate or not)
        return RunVerdict(REJECTED, refused[build_manifest.FLAG], flags=tuple(refused), reasons=refused, run_s=out.wall_s)
    if not res.get("ok"):
        detail = _crash_detail(out, res)
        if ref.config_labels:  # the call that failed (or crashed the process): the first unreported set
            failed = next((i for i in range(len(ref.outputs)) if f"forward/{i}" not in frames.payloads), -1)
            if failed >= 0 and (res.get("phase") == "forward" or (not res and failed > 0)):
                detail = f"{ref.where(failed)}: {detail}"
        return RunVerdict(RUNTIME_ERROR, detail, run_s=out.wall_s)
    try:
        cand = _candidate_calls(frames, ref)
    except Exception as e:  # what the child sent is untrusted: unreadable means no result
        return RunVerdict(RUNTIME_ERROR, f"unreadable outputs from the run process: {type(e).__name__}", run_s=out.wall_s)
    found = _judge(res, out, policy_of(staged.task, config), config.op_checks)
    medians: list[float] | None = None
    if paired_mode:  # a run child that reached timing but broke the protocol has no honest timing to score
        if pairing is None or pairing.stopped:
            found.setdefault("timing_inconsistent", "the run process broke the paired-timing protocol: " +
                             (pairing.stopped if pairing else "no `ready` before timing"))
        else:
            medians = paired.block_medians(res.get("timing_blocks"), pairing.rounds_done)
            overrun = paired.overruns(res.get("timing_blocks"), pairing.candidate_block_wall_s) or \
                paired.unaccounted(list(ref.blocks_ms), pairing.reference_block_runnable_s[:len(ref.blocks_ms)],
                                   res.get("timing_blocks"), pairing.candidate_block_runnable_s,
                                   len(job.get("timing_checks", [])), pairing.reference_block_wall_s,
                                   pairing.candidate_block_wall_s)
            if overrun or medians is None:
                found.setdefault("timing_inconsistent", overrun or "malformed timing blocks")
    try:
        comparison = _compare_all(ref, cand, res, config, job.get("timing_checks", []))
    except (KeyError, IndexError, TypeError) as e:
        comparison = Comparison(False, f"malformed outputs from the run process ({type(e).__name__})")
    status = REJECTED if found else (CORRECT if comparison.ok else INCORRECT)
    detail = "" if comparison.ok else "\n".join((comparison.reason,) + comparison.positions)
    table, note = _profile_of(frames, out, job)
    return RunVerdict(status, detail, comparison, res.get("timing"),
                      tuple(found), found, out.wall_s, tuple(medians or ()), table, note)


def _profile_of(frames: report.Frames, out: sandbox.ChildOutcome, job: dict[str, Any]) -> tuple[profiling.ProfileTable, str]:
    """The run child's profile (the frame after its report) and, when there is none, why. Decided after the
    verdict and from nothing it depends on."""
    if not job.get("profile") or job["timing_trials"] <= 0:
        return profiling.ProfileTable(), ""
    if frames.trailer is None:
        why = "the profiled call did not finish within its limit" if out.timed_out or out.signal == 14 \
            else "the run process ended before sending its profile"
        return profiling.ProfileTable(), f"candidate: {why}"
    try:
        return profiling.table_from_report(json.loads(frames.trailer)), ""
    except ValueError as e:
        return profiling.ProfileTable(), f"candidate: {str(e)[:300]}"


def run_candidate(staged: Staged, ref: Reference, seeds: Seeds, slot: sandbox.SlotLease, ref_scratch: str) -> RunVerdict:
    """The candidate's run child after the reference's (timed one after the other)."""
    collector = report.Collector(0)
    try:
        scratch, spec, job = _run_job(staged, seeds, slot, ref_scratch, collector)
        try:
            child = sandbox.start_child(spec, slot, staged.config.require_sandbox)
            collector.started()
            out = child.wait()  # ends with every process of the sandbox killed
            return _verdict(staged, ref, out, collector.finish(trailer=_trailer(job)), job)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    finally:
        collector.close()


def _with_ncu(staged: Staged, verdict: RunVerdict, seeds: Seeds, slot: sandbox.SlotLease,
              ref_scratch: str) -> RunVerdict:
    """Nsight Compute's counters for a correct candidate's kernels (`--profile ncu`): a second run child, not
    timed, under ncu (`kernelbench.harness.ncu`). Anything that goes wrong is a note on the profile, never the verdict."""
    path = ncu.find()
    if not path:
        return replace(verdict, profile_note=_joined(verdict.profile_note, "ncu: Nsight Compute is not installed"))
    collector = report.Collector(0)
    try:
        scratch, spec, job = _run_job(replace(staged, config=replace(staged.config, timing_trials=0)), seeds, slot,
                                      ref_scratch, collector, profile="ncu")
        try:
            spec = replace(spec, argv=ncu.command(path, spec.argv, os.path.join(scratch, ncu.LOG_FILE)))
            child = sandbox.start_child(spec, slot, staged.config.require_sandbox)
            collector.started()
            out = child.wait()
            collector.finish()
            try:
                rows = ncu.read_log(os.path.join(scratch, ncu.LOG_FILE))
            except (OSError, ValueError) as e:
                tail = out.stderr_tail.strip().splitlines()[-1:] or [""]
                return replace(verdict, profile_note=_joined(verdict.profile_note, f"ncu: {e}; {tail[0][:200]}"))
            return replace(verdict, profile=replace(verdict.profile, ncu_rows=rows))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    except Exception as e:  # the harness's own failure here is the profile's, not the verdict's
        return replace(verdict, profile_note=_joined(verdict.profile_note, f"ncu: {type(e).__name__}: {e}"[:300]))
    finally:
        collector.close()


def _joined(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _profile(config: EvalConfig, ref: Reference | None, verdict: RunVerdict) -> profiling.Profile:
    """Both tables of a correct, timed evaluation, and why any asked-for part is missing (empty otherwise)."""
    if config.profile not in ("torch", "ncu") or verdict.status != CORRECT or config.timing_trials <= 0:
        return profiling.Profile()
    notes = [verdict.profile_note]
    reference = profiling.ProfileTable()
    try:
        reference = profiling.table_from_report((ref.profile if ref else {}) or {"error": "no reference profile"})
    except ValueError as e:
        notes.append(f"reference: {e}")
    tool = "torch.profiler+ncu" if config.profile == "ncu" and config.device == "cuda" else "torch.profiler"
    return profiling.Profile(candidate=verdict.profile, reference=reference, tool=tool, unavailable=_joined(*notes))


def _trailer(job: dict[str, Any]) -> str:
    return report.PROFILE_LABEL if job.get("profile") else ""


def _paired(config: EvalConfig) -> bool:
    return config.device == "cpu" and config.timing_rounds > 0 and config.timing_trials > 0


def _measure_paired(staged: Staged, slot: sandbox.SlotLease, seeds: Seeds) -> tuple[RunVerdict, Reference]:
    """Reference and candidate children alive together, timed in alternating blocks (kernelbench.harness.paired).

    The reference runs as a second slot's uid, so the candidate cannot signal it even without bubblewrap's
    pid namespace, and freezing the candidate's uid never touches it.
    """
    config = staged.config
    ref_pipes, cand_pipes = paired.Pipes(), paired.Pipes()
    collector = report.Collector(0)
    sink = report.Collector(0)  # the reference's stand-in reports: drained, dropped
    children: list[sandbox.RunningChild] = []
    with sandbox.SlotLease() as ref_slot:
        ref_scratch = sandbox.make_scratch(ref_slot.uid, prefix="ka-ref-")
        scratch = ""
        try:
            ref_job = _reference_job(staged.task, config, seeds, paired=ref_pipes.job_fields(),
                                     discard_fd=sink.write_fd)
            # alive for its own work, the candidate's whole run and the torch.compile baseline after it
            ref_spec = _child_spec(config, ref_scratch, ref_job, max_file_mb=REFERENCE_FILE_MB,
                                   pass_fds=ref_pipes.child_fds + (sink.write_fd,), timeout_s=3 * config.run_timeout_s)
            ref_child = sandbox.start_child(ref_spec, ref_slot, config.require_sandbox)
            children.append(ref_child)
            ref_pipes.started()
            sink.started()
            ref_call_ms = paired.ready_ms(ref_pipes.receive(ref_child.deadline))
            if ref_call_ms is None:  # the reference failed before timing: its result says why
                _reference_from(staged.task, ref_child.wait(), worker.read_result(ref_scratch, ref_job["nonce"]),
                                ref_scratch)
                raise HarnessError(f"reference of task {staged.task.id} never became ready for paired timing")
            scratch, spec, job = _run_job(staged, seeds, slot, ref_scratch, collector, cand_pipes)
            cand_child = sandbox.start_child(spec, slot, config.require_sandbox)
            children.append(cand_child)
            cand_pipes.started()
            collector.started()
            cand_call_ms = paired.ready_ms(cand_pipes.receive(cand_child.deadline))
            pairing = None
            if cand_call_ms is not None:
                pairing = paired.run_rounds(ref_pipes, ref_child, cand_pipes, cand_child, paired.plan(
                    config.timing_trials, config.timing_rounds, config.run_timeout_s / 4, ref_call_ms, cand_call_ms,
                    config.min_timing_trials))
            cand_pipes.send("E")
            out = cand_child.wait()  # every process of its sandbox killed (past its deadline: a timeout)
            frames = collector.finish(trailer=_trailer(job))
            ref_pipes.send("E")  # the torch.compile baseline (if asked) runs now, with the candidate gone
            ref = _reference_from(staged.task, ref_child.wait(), worker.read_result(ref_scratch, ref_job["nonce"]),
                                  ref_scratch, pairing.rounds_done if pairing else 0)
            if pairing is not None and pairing.stopped == paired.REFERENCE_STOPPED:
                raise HarnessError(f"reference of task {staged.task.id} stopped during paired timing")
            verdict = _verdict(staged, ref, out, frames, job, True, pairing)
            return verdict, ref
        finally:
            for child in children:
                child.kill()
            ref_pipes.close()
            cand_pipes.close()
            collector.close()
            sink.close()
            shutil.rmtree(ref_scratch, ignore_errors=True)
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)


def _measure_once(staged: Staged, slot: sandbox.SlotLease) -> tuple[RunVerdict, Reference | None, Seeds]:
    config = staged.config
    seeds = draw_seeds(config.correctness_trials, config.extra_distribution_trials,
                       config.timing_input_sets if config.timing_trials > 0 else 0)
    if _paired(config):
        verdict, ref = _measure_paired(staged, slot, seeds)
        return verdict, ref, seeds
    ref_scratch = sandbox.make_scratch(slot.uid, prefix="ka-ref-")
    try:
        ref = run_reference(staged.task, config, seeds, slot, ref_scratch)
        verdict = run_candidate(staged, ref, seeds, slot, ref_scratch)
        if config.profile == "ncu" and config.device == "cuda" and verdict.status == CORRECT:
            verdict = _with_ncu(staged, verdict, seeds, slot, ref_scratch)
        return verdict, ref, seeds
    finally:
        shutil.rmtree(ref_scratch, ignore_errors=True)


def run_stage(staged: Staged) -> EvalResult:
    """Correctness, timing, dynamic checks and telemetry for a compiled candidate; a fault of the harness's
    own (the reference failed, a child could not start, the harness raised) is a `harness_error`."""
    if staged.decided is not None:
        return staged.decided
    try:
        return _run_stage(staged)
    except Exception as e:
        return harness_error(staged.task, staged.config, f"run stage raised {type(e).__name__}: {e}",
                             compiled=True, compile_s=staged.build.compile_s if staged.build else 0.0)


def _run_stage(staged: Staged) -> EvalResult:
    config, build = staged.config, staged.build
    policy = policy_of(staged.task, config)
    reading = telemetry.read(config.device)
    # decided here from the device and the source, never from what the child reports (triton_kernels)
    interpreted = triton_kernels.interpreted(staged.src, config.device)
    with sandbox.SlotLease() as slot:
        verdict, ref, seeds = _measure_once(staged, slot)
        speedup = 0.0 if interpreted else _speedup(ref, verdict)
        flags, reasons = list(verdict.flags), dict(verdict.reasons or {})
        if verdict.status == CORRECT and speedup > config.suspicious_speedup:
            again, ref2, _ = _measure_once(staged, slot)  # fresh seeds: a cache or a lucky draw does not repeat
            flags.append("suspicious_speedup")
            reasons["suspicious_speedup"] = f"measured {speedup:.1f}x; re-verified with fresh inputs"
            if again.status != CORRECT:
                verdict = again
                flags += [f for f in again.flags if f not in flags]
                reasons.update(again.reasons or {})
            speedup = min(speedup, _speedup(ref2, again)) if again.status == CORRECT else 0.0
    torch_v, cuda_v = telemetry.versions()
    timing = verdict.timing or {}
    cond = Conditions(device=config.device, device_name=reading.device_name, driver_version=reading.driver_version,
                      sm_clock_mhz=reading.sm_clock_mhz, mem_clock_mhz=reading.mem_clock_mhz,
                      temperature_c=reading.temperature_c, power_w=reading.power_w,
                      cpu_threads=config.threads if config.device == "cpu" else 0, torch_version=torch_v,
                      cuda_version=cuda_v, sandbox=sandbox.sandbox_kind(config.require_sandbox), op_policy=policy,
                      init_seed=seeds.init_seed, input_seeds=seeds.input_seeds + seeds.extra_seeds,
                      correctness_trials=len(seeds.input_seeds) + len(seeds.extra_seeds),
                      timing_trials=int(timing.get("trials", 0)), warmup_trials=config.warmup_trials, size=config.size,
                      timing_rounds=len(ref.block_medians_ms) if ref else 0)
    if verdict.status == HARNESS_ERROR:
        return harness_error(staged.task, config, verdict.detail, compiled=True,
                             compile_s=build.compile_s if build else 0.0, run_s=verdict.run_s, conditions=cond)
    correct = verdict.status == CORRECT
    status = REJECTED if flags and any(f != "suspicious_speedup" for f in flags) else verdict.status
    correct = correct and status == CORRECT
    if interpreted:  # after the verdict: the flag rejects nothing, it withholds the speedup
        flags.append(triton_kernels.INTERPRETED)
    ref_ms = float(ref.timing.get("median_ms", 0.0)) if ref else 0.0
    comp_ms = float(ref.compile_timing.get("median_ms", 0.0)) if ref else 0.0
    run_ms = float(timing.get("median_ms", 0.0))
    speedup = speedup if correct else 0.0
    sol = roofline.assess(ref.work if ref else {}, config.device, reading.device_name, config.threads,
                          run_ms if correct else 0.0, flags)
    if sol.sol_fraction > 1.0:  # after the status: a finding about the roofline, not about the kernel
        flags.append(roofline.ABOVE_ROOFLINE)
        reasons[roofline.ABOVE_ROOFLINE] = roofline.above_reason(sol)
    # against torch.compile: the speedup scaled by compiled/eager as the reference's one process measured
    # them, so it carries the paired figure's steadiness (one after the other: exactly comp_ms / run_ms)
    vs_compile = speedup * comp_ms / ref_ms if correct and comp_ms and ref_ms else 0.0
    prof = _profile(config, ref, verdict) if correct else profiling.Profile()
    text = feedback.render(status, detail=verdict.detail, speedup=speedup, runtime_ms=run_ms, ref_runtime_ms=ref_ms,
                           flags=tuple(flags), reasons=reasons, max_abs_error=verdict.comparison.max_abs_error,
                           profile=prof.summary())
    if sol.sol_fraction > 0:
        text += "\n" + roofline.feedback_line(sol.sol_fraction, sol.bound, sol.roofline_ms)
    return EvalResult(status=status, compiled=True, correct=correct, runtime_ms=run_ms,
                      runtime_std_ms=float(timing.get("std_ms", 0.0)), ref_runtime_ms=ref_ms, compile_ref_runtime_ms=comp_ms,
                      speedup=speedup, speedup_vs_compile=vs_compile,
                      score=feedback.kernel_score(correct, speedup, status == REJECTED), flags=tuple(flags), feedback=text,
                      max_abs_error=verdict.comparison.max_abs_error, compile_s=build.compile_s if build else 0.0,
                      run_s=verdict.run_s, cached_build=bool(build and build.cached), conditions=cond,
                      sol_fraction=sol.sol_fraction, roofline_ms=sol.roofline_ms, sol_bound=sol.bound, profile=prof)


def _speedup(ref: Reference | None, verdict: RunVerdict) -> float:
    if ref is None or verdict.status != CORRECT or not verdict.timing:
        return 0.0
    if ref.block_medians_ms and len(ref.block_medians_ms) == len(verdict.block_medians_ms):
        return paired.paired_speedup(list(ref.block_medians_ms), list(verdict.block_medians_ms))
    ref_ms, run_ms = float(ref.timing.get("median_ms", 0.0)), float(verdict.timing.get("median_ms", 0.0))
    return ref_ms / run_ms if ref_ms > 0 and run_ms > 0 else 0.0


def evaluate(task: Task, candidate_src: str, config: EvalConfig = EvalConfig()) -> EvalResult:
    """Evaluate one candidate solution file's text against `task` (see the module docstring); a
    `harness_error` is retried once (`retries` says so), then returned as it is."""
    result = run_stage(compile_stage(task, candidate_src, config))
    if result.status == HARNESS_ERROR:
        result = replace(run_stage(compile_stage(task, candidate_src, config)), retries=1)
    return result
