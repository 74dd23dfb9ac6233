"""The run stage's measurement: the reference child and the candidate's run child, one after the other or, on
CPU, alive together and timed in alternating blocks (`kernelbench.harness.paired`); the untimed Nsight Compute
child; and the profile tables of a correct evaluation."""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import replace
from pathlib import Path

from kernelbench.harness import children, code_check, paired, protocol, reference_cache
from kernelbench.harness.build import builder, triton_kernels
from kernelbench.harness.child import build_manifest, report, timing
from kernelbench.harness.insight import ncu, profiling
from kernelbench.harness.isolation import sandbox
from kernelbench.harness.child.result_files import INPUTS_FILE, read_result
from kernelbench.harness.build.build_tree import remove_tree
from kernelbench.tasks.inputs import Seeds, draw_seeds
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.reference import REFERENCE_FILE_MB, HarnessError, Reference, reference_from, reference_job
from kernelbench.harness.result import CORRECT
from kernelbench.harness.staged import Staged, policy_of
from kernelbench.harness.verdict import RunVerdict, checks_asked as verdict_checks, verdict

def report_bound(inputs_bytes: int, seeds: Seeds, checks: int) -> int:
    """Most bytes the run child's report may carry: the output and argument buffers of each reported call (every
    correctness set, each hidden check call, one verification call per timing set), four sets' worth each (its
    buffers and an output up to three times their size), plus 64 MiB; never less than eight times inputs.pt.

    Why the checks count: paired timing makes one per round, so 50 rounds of an 8 MB ReLU carried 800 MB of
    check calls alone and an honest kernel's report overran a bound of eight times its inputs."""
    sets = len(seeds.input_seeds) + len(seeds.extra_seeds) + len(seeds.timing_seeds)
    return max(8 * inputs_bytes, 4 * inputs_bytes * (sets + checks) // max(1, sets)) + (64 << 20)


def _give_inputs(ref_scratch: str, scratch: str, uid: int, collector: report.Collector, seeds: Seeds,
                 job: protocol.RunJob) -> None:
    """The reference's `inputs.pt` into the run child's scratch folder, readable by its uid; the report's bound
    follows from its size and the number of reported calls (`report_bound`)."""
    size = _copy_inputs(ref_scratch, scratch, uid)
    collector.max_bytes = report_bound(size, seeds, len(job.setup.timing_checks))


def _copy_inputs(src_dir: str, scratch: str, uid: int) -> int:
    """`inputs.pt` from `src_dir` into a child's scratch folder, readable by its uid; its size."""
    target = os.path.join(scratch, INPUTS_FILE)
    # a new file, never through a link: the child's folder is its uid's (only harness code runs there yet)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as dst, open(os.path.join(src_dir, INPUTS_FILE), "rb") as src:
        shutil.copyfileobj(src, dst)
        if uid >= 0:
            os.fchown(dst.fileno(), uid, uid)
        return dst.tell()


def _run_job(staged: Staged, seeds: Seeds, slot: sandbox.SlotLease, ref_scratch: str, collector: report.Collector,
             pipes: paired.Pipes | None = None, profile: str = "") -> tuple[str, sandbox.ChildSpec, protocol.RunJob]:
    """Scratch folder, child spec and job of the candidate's run child; its inputs copied from the reference's
    scratch folder, or, with `ref_scratch` empty (paired: the child starts before they exist), by `_give_inputs`
    later."""
    config = staged.config
    scratch = sandbox.make_scratch(slot.uid, prefix="ka-run-")
    try:
        Path(scratch, "candidate.py").write_text(staged.src)
        sandbox.give_tree(scratch, slot.uid)
        kind = sandbox.sandbox_kind(config.require_sandbox)
        binds = builder.run_binds(staged.build.entry_dir, scratch, slot.uid, kind, staged.build.pch_dir)
        manifest = staged.manifest
        if manifest is None:  # a Staged made elsewhere: the build as it is now, never none at all
            manifest = build_manifest.record(os.path.join(staged.build.entry_dir, "ext"))
        job = protocol.RunJob(nonce=secrets.token_hex(16), setup=children.setup(config, seeds, profile),
                              candidate="candidate.py", pch_dir=staged.build.pch_dir,
                              triton=triton_kernels.uses_triton(staged.src),
                              trace_ops=config.op_checks and policy_of(staged.task, config) == "strict",
                              build_manifest=manifest, refuse_exec_memory=_exec_refused(staged, profile),
                              report_fd=collector.write_fd,
                              paired=protocol.PipeFds(**pipes.job_fields()) if pipes else None)
        if ref_scratch:
            _give_inputs(ref_scratch, scratch, slot.uid, collector, seeds, job)
        fds = (pipes.child_fds if pipes else ()) + (collector.write_fd,)
        spec = children.child_spec(config, scratch, job, binds, os.path.join(staged.build.entry_dir, "ext"),
                           max_file_mb=64, pass_fds=fds)
    except BaseException:
        remove_tree(scratch)
        raise
    return scratch, spec, job


def _exec_refused(staged: Staged, profile: str) -> bool:
    """Whether the run child refuses new executable memory after `__init__`: where `code_check` judges."""
    return code_check.applies(staged.config, staged.src, profile) and policy_of(staged.task, staged.config) == "strict"


def _code_check(staged: Staged, judged: bool = True) -> code_check.CodeCheck | None:
    """The sampler of which code ran, attached to the run child's cgroup before the child runs (pass its
    `attach` as `sandbox.start_child`'s `on_cgroup`; None where the check does not apply); `judged=False`: the
    paired reference's, the same cost and nothing read."""
    if not code_check.applies(staged.config, staged.src):
        return None
    ext = os.path.join(staged.build.entry_dir, "ext")
    manifest = (staged.manifest or build_manifest.record(ext)) if judged else {}
    return code_check.CodeCheck(staged.config, ext, manifest, judged)


def run_candidate(staged: Staged, ref: Reference, seeds: Seeds, slot: sandbox.SlotLease, ref_scratch: str) -> RunVerdict:
    """The candidate's run child after the reference's (timed one after the other)."""
    collector = report.Collector(0)
    check = None
    try:
        scratch, spec, job = _run_job(staged, seeds, slot, ref_scratch, collector)
        try:
            check = _code_check(staged)
            child = sandbox.start_child(spec, slot, staged.config.require_sandbox, check.attach if check else None)
            collector.started()
            out = child.wait()  # ends with every process of the sandbox killed
            return replace(verdict(staged, ref, out, collector.finish(trailer=_trailer(job)), job, code=check),
                           limits_held=out.limits_held)
        finally:
            remove_tree(scratch)
    finally:
        collector.close()
        if check is not None:
            check.close()


def _with_ncu(staged: Staged, judged: RunVerdict, seeds: Seeds, slot: sandbox.SlotLease,
              ref_scratch: str) -> RunVerdict:
    """Nsight Compute's counters for a correct candidate's kernels (`--profile ncu`): a second run child, not
    timed, under ncu (`kernelbench.harness.insight.ncu`). Anything that goes wrong is a note on the profile, never the verdict."""
    path = ncu.find()
    if not path:
        return replace(judged, profile_note=_joined(judged.profile_note, "ncu: Nsight Compute is not installed"))
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
                return replace(judged, profile_note=_joined(judged.profile_note, f"ncu: {e}; {tail[0][:200]}"))
            return replace(judged, profile=replace(judged.profile, ncu_rows=rows))
        finally:
            remove_tree(scratch)
    except Exception as e:  # the harness's own failure here is the profile's, not the verdict's
        return replace(judged, profile_note=_joined(judged.profile_note, f"ncu: {type(e).__name__}: {e}"[:300]))
    finally:
        collector.close()


def _joined(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def profile_tables(config: EvalConfig, ref: Reference | None, judged: RunVerdict) -> profiling.Profile:
    """Both tables of a correct, timed evaluation, and why any asked-for part is missing (empty otherwise)."""
    if config.profile not in ("torch", "ncu") or judged.status != CORRECT or config.timing_trials <= 0:
        return profiling.Profile()
    notes = [judged.profile_note]
    reference = ref.profile if ref and ref.profile else profiling.ProfileTable()
    if not (ref and ref.profile):
        notes.append(f"reference: {(ref.profile_note if ref else '') or 'no reference profile'}")
    tool = "torch.profiler+ncu" if config.profile == "ncu" and config.device == "cuda" else "torch.profiler"
    return profiling.Profile(candidate=judged.profile, reference=reference, tool=tool, unavailable=_joined(*notes))


def _trailer(job: protocol.RunJob) -> str:
    return report.PROFILE_LABEL if job.setup.profile else ""


def _measure_paired(staged: Staged, slot: sandbox.SlotLease, seeds: Seeds,
                    group: reference_cache.Held | None = None) -> tuple[RunVerdict, Reference]:
    """Reference and candidate children alive together, timed in alternating blocks (kernelbench.harness.paired).

    The reference runs as a second slot's uid, so the candidate cannot signal it even without bubblewrap's
    pid namespace, and freezing the candidate's uid never touches it. With `group` (the group's reference,
    `reference_cache`), the reference child times on the group's inputs and computes no outputs (part `timing`).
    """
    config = staged.config
    ref_pipes, cand_pipes = paired.Pipes(), paired.Pipes()
    collector = report.Collector(0)
    running: list[sandbox.RunningChild] = []
    check = ref_check = None
    with sandbox.SlotLease() as ref_slot:
        ref_scratch = sandbox.make_scratch(ref_slot.uid, prefix="ka-ref-")
        scratch = ""
        try:
            if group is not None:
                _copy_inputs(group.inputs_dir, ref_scratch, ref_slot.uid)
            ref_job = reference_job(staged.task, config, seeds, ref_pipes,
                                    "timing" if group is not None else "all")
            # alive for its own work, the candidate's whole run and the torch.compile baseline after it
            ref_spec = children.child_spec(config, ref_scratch, ref_job, max_file_mb=REFERENCE_FILE_MB,
                                   pass_fds=ref_pipes.child_fds, timeout_s=3 * config.run_timeout_s)
            ref_check = _code_check(staged, judged=False)  # sampled as the candidate is: the same cost
            ref_child = sandbox.start_child(ref_spec, ref_slot, config.require_sandbox,
                                            ref_check.attach if ref_check else None)
            running.append(ref_child)
            ref_pipes.started()
            # the run child starts now, beside the reference, and waits for its inputs (timing.GO)
            scratch, spec, job = _run_job(staged, seeds, slot, "", collector, cand_pipes)
            check = _code_check(staged)
            cand_child = sandbox.start_child(spec, slot, config.require_sandbox, check.attach if check else None)
            running.append(cand_child)
            cand_pipes.started()
            collector.started()
            announced = ref_pipes.receive(ref_child.deadline) == timing.INPUTS_READY
            if announced:  # the inputs exist: the run child goes on while the reference computes its outputs
                _give_inputs(ref_scratch, scratch, slot.uid, collector, seeds, job)
                cand_child.restart_clock()  # its limit counts from its inputs, as when it started after the reference
                cand_pipes.send(timing.GO)  # a child already gone answers nothing below: its outcome says why
            ref_call_ms = paired.ready_ms(ref_pipes.receive(ref_child.deadline)) if announced else None
            if ref_call_ms is None:  # the reference failed before timing: its result says why
                reference_from(staged.task, ref_child.wait(), read_result(ref_scratch, ref_job.nonce), ref_scratch,
                               group=group.ref if group is not None else None)
                raise HarnessError(f"reference of task {staged.task.id} never became ready for paired timing")
            cand_call_ms = paired.ready_ms(cand_pipes.receive(cand_child.deadline))
            pairing = None
            if cand_call_ms is not None:
                plan = paired.plan(config.timing_trials, config.timing_rounds, config.run_timeout_s / 4, ref_call_ms,
                                   cand_call_ms, config.min_timing_trials)
                with sandbox.TimingLease() as turn:  # one paired timing at a time on this machine
                    ref_child.extend_s(turn.waited_s)
                    cand_child.extend_s(turn.waited_s)
                    pairing = paired.run_rounds(ref_pipes, ref_child, cand_pipes, cand_child, plan,
                                                len(job.setup.timing_checks))
            cand_pipes.send("E")
            # the reference keeps the outputs of the check calls the verdict judges (`verdict.checks_asked`), as its
            # own blocks computed them; a pairing that stopped is rejected `timing_inconsistent` and judges none
            judged = verdict_checks(len(job.setup.timing_checks), pairing) if pairing and not pairing.stopped else 0
            end = f"E {judged}"
            if not ref_job.time_compile:  # its profiled call (untimed) runs beside the candidate's verification
                ref_pipes.send(end)
            out = cand_child.wait()  # every process of its sandbox killed (past its deadline: a timeout)
            frames = collector.finish(trailer=_trailer(job))
            if ref_job.time_compile:  # the torch.compile baseline is timed now, with the candidate gone
                ref_pipes.send(end)
            ref = reference_from(staged.task, ref_child.wait(), read_result(ref_scratch, ref_job.nonce),
                                 ref_scratch, pairing.rounds_done if pairing else 0,
                                 group.ref if group is not None else None, judged_checks=judged)
            if pairing is not None and pairing.stopped == paired.REFERENCE_STOPPED:
                raise HarnessError(f"reference of task {staged.task.id} stopped during paired timing")
            return replace(verdict(staged, ref, out, frames, job, True, pairing, code=check),
                           limits_held=out.limits_held), ref
        finally:
            for child in running:
                child.kill()
            for sampling in (check, ref_check):
                if sampling is not None:
                    sampling.close()
            ref_pipes.close()
            cand_pipes.close()
            collector.close()
            remove_tree(ref_scratch)
            if scratch:
                remove_tree(scratch)


def measure_once(staged: Staged, slot: sandbox.SlotLease,
                 share: reference_cache.Share | None = None) -> tuple[RunVerdict, Reference | None, Seeds]:
    """One measurement with fresh seeds; with `share`, the group's seeds and reference (`reference_cache`):
    all of it one after the other, its inputs and outputs under paired timing, whose reference child stays
    the candidate's own and times beside it."""
    config = staged.config
    if children.paired(config) and (share is None or not share.ticket):
        seeds = draw_seeds(config.correctness_trials, config.extra_distribution_trials, config.timing_input_sets)
        judged, ref = _measure_paired(staged, slot, seeds)
        return judged, ref, seeds
    with reference_cache.held(staged, slot, share) as held:
        if children.paired(config):
            judged, ref = _measure_paired(staged, slot, held.seeds, held)
            return judged, ref, held.seeds
        judged = run_candidate(staged, held.ref, held.seeds, slot, held.inputs_dir)
        if config.profile == "ncu" and config.device == "cuda" and judged.status == CORRECT:
            judged = _with_ncu(staged, judged, held.seeds, slot, held.inputs_dir)
        return judged, held.ref, held.seeds
