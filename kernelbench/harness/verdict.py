"""The parent's judgement of one run child: what came over its report pipe (read after the whole sandbox was
killed, `report`), decoded as a `protocol.RunReport`, its dynamic checks (`judge`) and its outputs compared
with the reference's (`compare_all`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import torch

from kernelbench.harness import code_check, paired, protocol
from kernelbench.harness.child import build_manifest, op_policy, report
from kernelbench.harness.insight import profiling
from kernelbench.harness.isolation import sandbox
from kernelbench.harness.child.outputs import tensor_digest
from kernelbench.harness.children import not_started
from kernelbench.harness.compare import Comparison, Digest, compare_outputs, inputs_match, inputs_unchanged
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.reference import Reference
from kernelbench.harness.result import CORRECT, HARNESS_ERROR, INCORRECT, REJECTED, RUNTIME_ERROR, TIMEOUT
from kernelbench.harness.staged import Staged, policy_of
from kernelbench.tasks.task_file import inspect_source

SIGNAL_NAMES = {4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV", 24: "SIGXCPU", 25: "SIGXFSZ"}


@dataclass(frozen=True)
class RunVerdict:
    """The parent's reading of one run child."""

    status: str
    detail: str = ""
    comparison: Comparison = Comparison(True)
    timing: protocol.Timing | None = None
    flags: tuple[str, ...] = ()
    reasons: dict[str, str] | None = None
    run_s: float = 0.0
    block_medians_ms: tuple[float, ...] = ()
    """Paired timing: the median of each candidate block, round by round with the reference's."""
    profile: profiling.ProfileTable = profiling.ProfileTable()
    """The candidate's profiled call (sent after the report: it never changes the fields above)."""
    profile_note: str = ""
    """Why `profile` is empty although profiling was asked for."""
    limits_held: tuple[str, ...] = ()
    """The limits the run child ran under (`sandbox.ChildOutcome.limits_held`)."""
    retime: bool = False
    """The one rejection is `paired.unaccounted` (the trials leave more of the candidate's blocks unaccounted for
    than the reference's leave of its own) with every output right: `evaluate` times it once more (`RETIMED`)."""


def _crash_detail(out: sandbox.ChildOutcome, fault: protocol.Fault | None) -> str:
    if fault is not None:
        kind = "out of memory" if fault.oom else f"error during {fault.phase}"
        return f"{kind}: {fault.error}\n{_trim_tb(fault.traceback)}"
    if out.signal:
        name = SIGNAL_NAMES.get(out.signal, f"signal {out.signal}")
        extra = " (killed: memory or process limit?)" if out.signal == 9 else ""
        if out.oom_kills:  # the kernel says so: the child's cgroup (`cgroup_memory_mb`), tmpfs pages included
            extra = f" (killed at its memory limit, {out.memory_peak_bytes >> 20} MiB, tmpfs files included)"
        return f"the run process crashed with {name}{extra}\n{out.stderr_tail[-600:]}"
    return (f"the run process exited (status {out.returncode}) without reporting a result: "
            f"sys.exit/os._exit/exit() in the candidate?\n{out.stderr_tail[-600:]}")


HARNESS_FRAMES = tuple(f"kernelbench/harness/child/{name}.py" for name in ("worker", "candidate_run", "outputs"))
"""The run child's own frames, left out of the traceback the agent reads."""


def _trim_tb(tb: str) -> str:
    lines = [ln for ln in tb.splitlines() if not any(frame in ln for frame in HARNESS_FRAMES)]
    return "\n".join(lines[-12:])


WEIGHTS_FLAG = "weights:state_dict"
"""A task declaring `KEEP_STATE_DICT` and a candidate whose `state_dict` keys or shapes differ from the reference's:
the user's trained weights could not be loaded into it (`agent.swap`), so it is rejected whatever its outputs."""


def judge(res: protocol.RunResult, out: sandbox.ChildOutcome, policy: str, op_checks: bool,
          keep_state_dict: bool = False) -> dict[str, str]:
    """Dynamic checks from what the run child recorded: flag -> reason. `keep_state_dict`: the task declares
    `KEEP_STATE_DICT`, read by the parent from the task's source (never from the child's word)."""
    found: dict[str, str] = {}
    if keep_state_dict and not res.state_dict_checked:  # the reference's weights never reached the check
        found["dynamic:harness_tampered"] = "the state_dict check was asked for and did not run"
    if keep_state_dict and res.state_dict_mismatch:
        found[WEIGHTS_FLAG] = f"ModelNew's state_dict differs from Model's: {res.state_dict_mismatch}"
    if res.timer_patched:
        found["dynamic:timer_patched"] = "replaced: " + ", ".join(res.timer_patched)[:600]
    if res.harness_tampered:
        found["dynamic:harness_tampered"] = "replaced: " + ", ".join(res.harness_tampered)[:600]
    extra = max(res.threads_after - res.threads_before, res.os_threads_after - res.os_threads_before)
    if extra > 0:
        found["dynamic:threads"] = f"{extra} thread(s) started by the candidate were still running after a phase"
    refused = res.new_tasks_refused
    if refused is not None and (refused.rlimit or refused.seccomp) and not refused.refused:
        found["dynamic:harness_tampered"] = "the run child's refusal of new threads was disarmed"
    total_ms = res.timing.total_ms if res.timing else 0.0
    if total_ms / 1e3 > out.wall_s:
        found["timing_inconsistent"] = f"trials sum to {total_ms / 1e3:.3f} s but the whole run took {out.wall_s:.3f} s"
    if op_checks and policy == "strict" and "op_policy" not in res.checks_installed:
        found["dynamic:harness_tampered"] = "the op tracer was asked for and did not run on the candidate's calls"
    if op_checks:
        for v in op_policy.judge_ops(list(res.ops), policy, res.kernel_calls):
            found.setdefault(v.flag, v.reason)
    return found


def checks_asked(pool: int, pairing: paired.Pairing | None) -> int:
    """How many check calls the run child must report: in paired timing, those the parent's drawn counts placed
    among the blocks that ran (each block places `min(count, what is left of the pool)`, in pool order:
    `timing.Measurement.place_checks`), and the run child skips the rest (`Measurement.verify`); otherwise the
    whole pool (`pairing` None: unpaired, every check runs, left-overs in the verification round)."""
    if pairing is None:
        return pool
    return min(pool, sum(pairing.block_checks[:pairing.rounds_done]))


def _candidate_calls(frames: report.Frames, ref: Reference, n_checks: int) -> dict[str, Any]:
    """The run child's reported calls, in the shape `compare_all` reads (each from its own frame); the first
    `n_checks` check calls (`checks_asked`)."""
    n_sets, n_timing = len(ref.outputs), len(ref.timing_outputs)
    cand: dict[str, Any] = {"outputs": [], "inputs_after": [], "timing": [], "checks": []}
    for i in range(n_sets):
        call = protocol.CallRecord.from_dict(frames.tensors(f"forward/{i}"))
        cand["outputs"].append(call.outputs)
        cand["inputs_after"].append(call.inputs_after)
    for key, label, n in (("timing", "verify", n_timing), ("checks", "check", n_checks)):
        for i in range(n):
            present = f"{label}/{i}" in frames.payloads
            call = protocol.CallRecord.from_dict(frames.tensors(f"{label}/{i}")) if present else None
            if call is not None and key == "checks":  # judged by digest (`inputs_match`): keep the digest alone;
                # anything sent that is no tensor (a string passed off as a digest) becomes None, which fails
                call = replace(call, inputs_after=[Digest(tensor_digest(a)) if isinstance(a, torch.Tensor) else None
                                                   for a in call.inputs_after])
            cand[key].append(call)
    return cand


def compare_all(ref: Reference, cand: dict[str, Any], res: protocol.RunResult, config: EvalConfig,
                checks: tuple[tuple[int, int], ...]) -> Comparison:
    got_structures = list(res.structures)
    if got_structures != ref.structures:
        if len(got_structures) != len(ref.structures):
            return Comparison(False, f"output structures {str(got_structures)[:200]} != expected {ref.structures}")
        i = next(i for i, (g, w) in enumerate(zip(got_structures, ref.structures)) if g != w)
        return Comparison(False, f"{ref.where(i)}: output structure {str(got_structures[i])[:200]} != expected {ref.structures[i]}")
    metas = res.output_meta
    worst = Comparison(True)
    for i, want in enumerate(ref.outputs):
        c = compare_outputs(cand["outputs"][i], want, metas[i] if i < len(metas) else [], config.device, config.atol, config.rtol, config.scale_atol_by_rms)
        if not c.ok:
            return replace(c, reason=f"{ref.where(i)}: {c.reason}")
        changed = inputs_unchanged(ref.inputs.sets[i], cand["inputs_after"][i])
        if changed:
            return Comparison(False, f"{ref.where(i)}: {changed}")
        worst = c if c.max_abs_error > worst.max_abs_error else worst
    timing_sets = ref.inputs.timing_sets
    for i, got in enumerate(cand["timing"]):
        if got is None:
            return Comparison(False, f"during timing: the verification call on timing set {i} was not reported")
        c = compare_outputs(got.outputs, ref.timing_outputs[i], [], config.device, config.atol, config.rtol,
                            config.scale_atol_by_rms)
        if not c.ok:
            return replace(c, reason=f"during timing (timing set {i}, buffers reused): {c.reason}")
        changed = inputs_unchanged(timing_sets[i], got.inputs_after)
        if changed:
            return Comparison(False, f"during timing (timing set {i}, buffers reused): {changed}")
    if any(g is None for g in cand["checks"]):
        return Comparison(False, "during timing: the check calls' outputs are missing")
    for j, (got, want) in enumerate(zip(cand["checks"], ref.check_outputs)):
        c = compare_outputs(got.outputs, want, [], config.device, config.atol, config.rtol, config.scale_atol_by_rms)
        if not c.ok:
            return replace(c, reason=f"during timing (a call among the timed ones, perturbed inputs): {c.reason}")
        changed = inputs_match(ref.check_input_digests[j], got.inputs_after)
        if changed:
            return Comparison(False, f"during timing (a call among the timed ones): {changed}")
    return worst


def verdict(staged: Staged, ref: Reference, out: sandbox.ChildOutcome, frames: report.Frames, job: protocol.RunJob,
            paired_mode: bool = False, pairing: paired.Pairing | None = None,
            code: code_check.CodeCheck | None = None) -> RunVerdict:
    """The parent's reading of a finished run child: what came over its report pipe (read after the whole
    sandbox was killed), its outputs compared with the reference's; in paired mode, `pairing` is what the
    parent saw of the rounds (None: the child never said `ready`); `code`, the check of which code ran during
    the candidate's calls (`code_check`), judged here once the child is dead."""
    config = staged.config
    if not out.untrusted_ran:  # never reached the candidate's code: whatever stopped it is the harness's
        return RunVerdict(HARNESS_ERROR, not_started(out, "run"), run_s=out.wall_s)
    # not exactly a report of this job (wrong nonce, malformed): read as no report at all
    sent = protocol.decode_untrusted(protocol.RunReport, frames.result(), job.nonce)
    res = sent.result if sent is not None else None
    if out.timed_out and not (job.setup.profile and res is not None):  # a complete report: the profiled call hung
        return RunVerdict(TIMEOUT, f"the run stage exceeded {config.run_timeout_s:.0f} s (hang or far too slow)", run_s=out.wall_s)
    if frames.problem:  # bytes nobody but candidate code could have written
        reason = f"the run process's report channel carried {frames.problem}"
        return RunVerdict(REJECTED, reason, flags=("dynamic:harness_tampered",),
                          reasons={"dynamic:harness_tampered": reason}, run_s=out.wall_s)
    refused = build_manifest.judge(sent.build_refused if sent is not None else ())
    if refused:  # a build the parent never checked was asked for (caught by the candidate or not)
        return RunVerdict(REJECTED, "\n".join(refused.values()), flags=tuple(refused), reasons=refused, run_s=out.wall_s)
    if res is None:
        fault = sent.fault if sent is not None else None
        detail = _crash_detail(out, fault)
        if ref.config_labels:  # the call that failed (or crashed the process): the first unreported set
            failed = next((i for i in range(len(ref.outputs)) if f"forward/{i}" not in frames.payloads), -1)
            if failed >= 0 and ((fault is not None and fault.phase == "forward") or (fault is None and failed > 0)):
                detail = f"{ref.where(failed)}: {detail}"
        return RunVerdict(RUNTIME_ERROR, detail, run_s=out.wall_s)
    try:
        asked = checks_asked(len(ref.check_outputs), pairing if paired_mode and pairing and not pairing.stopped else None)
        cand = _candidate_calls(frames, ref, asked)
    except Exception as e:  # what the child sent is untrusted: unreadable means no result
        return RunVerdict(RUNTIME_ERROR, f"unreadable outputs from the run process: {type(e).__name__}", run_s=out.wall_s)
    found = judge(res, out, policy_of(staged.task, config), config.op_checks,
                  inspect_source(staged.task.source).keep_state_dict)
    spans = pairing.candidate_block_spans_ns if paired_mode and pairing is not None else ()
    ran = code.judge(res, policy_of(staged.task, config), job.refuse_exec_memory, spans) if code is not None else {}
    unsampled = ran.pop(code_check.UNSAMPLED, "")  # informational: `evaluate` adds the flag after the status
    found.update(ran)
    medians: list[float] | None = None
    unaccounted = ""
    if paired_mode:  # a run child that reached timing but broke the protocol has no honest timing to score
        if pairing is None or pairing.stopped:
            found.setdefault("timing_inconsistent", "the run process broke the paired-timing protocol: " +
                             (pairing.stopped if pairing else "no `ready` before timing"))
        else:
            medians = paired.block_medians(res.timing_blocks, pairing.rounds_done)
            overrun = paired.overruns(res.timing_blocks, pairing.candidate_block_wall_s)
            unaccounted = "" if overrun else \
                paired.unaccounted(list(ref.blocks_ms), pairing.reference_block_runnable_s[:len(ref.blocks_ms)],
                                   res.timing_blocks, pairing.candidate_block_runnable_s,
                                   pairing.block_checks, pairing.reference_block_wall_s,
                                   pairing.candidate_block_wall_s)
            overrun = overrun or unaccounted
            if overrun or medians is None:
                found.setdefault("timing_inconsistent", overrun or "malformed timing blocks")
            parallel = paired.parallel_work(pairing, config.threads)
            if parallel:
                found.setdefault("dynamic:parallel_work", parallel)
    try:
        comparison = compare_all(ref, cand, res, config, job.setup.timing_checks)
    except (KeyError, IndexError, TypeError) as e:
        comparison = Comparison(False, f"malformed outputs from the run process ({type(e).__name__})")
    status = REJECTED if found else (CORRECT if comparison.ok else INCORRECT)
    detail = "" if comparison.ok else "\n".join((comparison.reason,) + comparison.positions)
    table, note = _profile_of(frames, out, job)
    reasons = dict(found, **({code_check.UNSAMPLED: unsampled} if unsampled else {}))
    retime = bool(paired_mode and comparison.ok and medians is not None and set(found) == {"timing_inconsistent"}
                  and unaccounted and found["timing_inconsistent"] == unaccounted)
    return RunVerdict(status, detail, comparison, res.timing,
                      tuple(found), reasons, out.wall_s, tuple(medians or ()), table, note, retime=retime)


def _profile_of(frames: report.Frames, out: sandbox.ChildOutcome, job: protocol.RunJob) -> tuple[profiling.ProfileTable, str]:
    """The run child's profile (the frame after its report) and, when there is none, why. Decided after the
    verdict and from nothing it depends on."""
    if not job.setup.profile or job.setup.timing_trials <= 0:
        return profiling.ProfileTable(), ""
    if frames.trailer is None:
        why = "the profiled call did not finish within its limit" if out.timed_out or out.signal == 14 \
            else "the run process ended before sending its profile"
        return profiling.ProfileTable(), f"candidate: {why}"
    try:
        return profiling.table_from_report(json.loads(frames.trailer)), ""
    except ValueError as e:
        return profiling.ProfileTable(), f"candidate: {str(e)[:300]}"
