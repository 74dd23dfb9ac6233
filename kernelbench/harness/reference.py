"""The reference's side of the run stage, in the parent: the job of the reference child (trusted task code only,
`kernelbench.harness.child.reference`), and the `Reference` record the parent keeps of it: timing, outputs,
inputs, work and profile."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from kernelbench.harness import children, paired, protocol
from kernelbench.harness.child.result_files import CHECKS_FILE, INPUTS_FILE, SavedInputs, check_file, read_result
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.insight.profiling import ProfileTable, table_from_report
from kernelbench.harness.isolation import sandbox
from kernelbench.tasks.inputs import Seeds
from kernelbench.tasks.task import Task


class HarnessError(RuntimeError):
    """The harness could not evaluate (the task's reference failed, the sandbox is missing): not the candidate's fault."""


REFERENCE_FILE_MB = 1 << 16
"""The reference child runs trusted task code; its input and output files grow with the task (GPU sizes
reach gigabytes), so only a generous bound applies to it."""


@dataclass(frozen=True)
class Reference:
    timing: protocol.Timing | None
    """The reference's trial times (None: not timed, e.g. a group's untimed reference)."""
    compile_timing: protocol.Timing | None
    """`torch.compile`'s, when `EvalConfig.time_compile_baseline` asked for it."""
    structures: list[str]
    inputs: SavedInputs
    """The inputs the reference child drew (`INPUTS_FILE`), which the run child gets a copy of."""
    outputs: list[list[Any]]
    block_medians_ms: tuple[float, ...] = ()
    """Paired timing: the median of each block (empty when timed in one go)."""
    blocks_ms: tuple[tuple[float, ...], ...] = ()
    """Paired timing: each block's trial times (for `paired.unaccounted`)."""
    check_outputs: list[list[Any]] = field(default_factory=list)
    """Outputs of the hidden check calls' inputs (`children.timing_checks`), computed by the reference."""
    check_input_digests: list[list[str | None]] = field(default_factory=list)
    """Digests of each hidden check call's inputs before the call (`compare.inputs_match`), from the reference."""
    timing_outputs: list[list[Any]] = field(default_factory=list)
    """Outputs of the timing base sets (what the verification round must return)."""
    work: protocol.Work | None = None
    """Bytes and FLOPs of the timed configuration (`child.work.count_work`); None when not counted."""
    profile: ProfileTable | None = None
    """The reference's profile of one untimed call, as the parent read its report (`profiling.table_from_report`);
    None when none was asked for or it did not parse (`profile_note` says why)."""
    profile_note: str = ""
    """Why an asked-for profile is missing ("" otherwise)."""
    set_configs: tuple[int, ...] = ()
    """Input configuration of each correctness set (`kernelbench.tasks.input_configs`); empty: one configuration."""
    config_labels: tuple[str, ...] = ()
    """How feedback names each configuration (its constants and input shapes, never its seeds)."""

    def where(self, i: int) -> str:
        """`input set i`, with its configuration when the task has more than one."""
        if i < len(self.set_configs) and self.set_configs[i] < len(self.config_labels):
            return f"input set {i}, {self.config_labels[self.set_configs[i]]}"
        return f"input set {i}"


def reference_job(task: Task, config: EvalConfig, seeds: Seeds, pipes: paired.Pipes | None = None,
                  part: str = "all") -> protocol.ReferenceJob:
    """The reference child's job; `pipes` for paired timing; `part`: `protocol.ReferenceJob.part`."""
    task_fields = protocol.TaskFields(id=task.id, level=task.level, name=task.name, origin=task.origin,
                                      source=task.source, path=task.path, op_policy=task.op_policy)
    return protocol.ReferenceJob(
        nonce=secrets.token_hex(16), setup=children.setup(config, seeds), task=task_fields, size=config.size,
        time_compile=config.time_compile_baseline, timing_seeds=tuple(seeds.timing_seeds),
        paired=protocol.PipeFds(**pipes.job_fields()) if pipes else None, part=part)


def _load(path: str) -> dict[str, Any]:
    """A file the reference child wrote, its tensors mapped rather than read (`mmap=True`: 0.17 s less per
    evaluation of the benchmark's ReLU, whose two files hold about 350 MB). Safe to map: the child has ended,
    no candidate's uid can write its folder, and the files are deleted or left parent-only right after
    (`measurement`, `reference_cache`), so the pages cannot change under the record."""

    return torch.load(path, weights_only=True, mmap=True)


def reference_from(task: Task, out: sandbox.ChildOutcome, report: protocol.ReferenceReport | None, scratch: str,
                   rounds: int = 0, group: Reference | None = None, judged_checks: int | None = None) -> Reference:
    """The parent's record of a finished reference child; `rounds`: paired rounds the candidate completed;
    `group`: the group's reference whose inputs this child timed on (part `timing`), whose outputs, inputs
    and counts the record keeps, with this child's timing; `judged_checks` (paired timing): how many check
    calls the verdict judges, whose outputs and input digests the child wrote after its blocks (CHECKS_FILE;
    a count that does not match is the harness's fault, raised)."""
    res = report.result if report is not None else None
    if res is None:
        if not out.started:
            raise HarnessError(children.not_started(out, "reference"))
        why = "timed out" if out.timed_out else (report.fault.error if report and report.fault and report.fault.error
                                                 else f"exit {out.returncode}: {out.stderr_tail[-800:]}")
        raise HarnessError(f"reference of task {task.id} failed: {why}")
    blocks = res.timing_blocks
    profile, profile_note = _profile(res.profile)
    # the candidate may stop after the reference's block of a round: that round is left out
    medians = paired.block_medians(blocks[:rounds], rounds) if rounds and blocks is not None else None
    checks = _judged_checks(scratch, judged_checks) if judged_checks is not None else None
    if group is not None:
        return replace(group, timing=res.timing, compile_timing=res.compile_timing,
                       check_outputs=checks["check_outputs"] if checks else group.check_outputs,
                       check_input_digests=checks["check_input_digests"] if checks else group.check_input_digests,
                       block_medians_ms=tuple(medians or ()),
                       blocks_ms=tuple(tuple(float(t) for t in b) for b in blocks[:rounds]) if medians else (),
                       profile=profile, profile_note=profile_note)
    saved = _load(os.path.join(scratch, "reference.pt"))
    if checks is not None:
        saved.update(checks)
    return Reference(timing=res.timing, compile_timing=res.compile_timing,
                     structures=list(res.structures), inputs=SavedInputs.from_saved(_load(os.path.join(scratch, INPUTS_FILE))),
                     outputs=saved["outputs"], check_outputs=saved["check_outputs"],
                     check_input_digests=saved["check_input_digests"],
                     timing_outputs=saved["timing_outputs"], block_medians_ms=tuple(medians or ()),
                     blocks_ms=tuple(tuple(float(t) for t in b) for b in blocks[:rounds]) if medians else (),
                     work=res.work, profile=profile, profile_note=profile_note, set_configs=res.set_configs,
                     config_labels=res.config_labels)


def _profile(report: dict[str, Any] | None) -> tuple[ProfileTable | None, str]:
    """The reference child's profile report read once, here (the child's report is a plain dict: the same reader
    as the run child's untrusted one); None and why when it was asked for and did not parse."""
    if report is None:
        return None, ""
    try:
        return table_from_report(report), ""
    except ValueError as e:
        return None, str(e)


def _judged_checks(scratch: str, n: int) -> dict[str, Any]:
    path = os.path.join(scratch, CHECKS_FILE)
    if not os.path.exists(path):
        raise HarnessError(f"the reference child wrote no {CHECKS_FILE} for the {n} judged check calls")
    saved = _load(path)
    if saved["count"] != n or len(saved["check_input_digests"]) != n:
        raise HarnessError(f"the reference child's {CHECKS_FILE} holds {saved['count']} check calls, "
                           f"not the {n} judged")
    outputs = []
    for j in range(n):
        if not os.path.exists(check_file(scratch, j)):
            raise HarnessError(f"the reference child wrote no outputs of judged check call {j}")
        outputs.append(_load(check_file(scratch, j)))
    return {"check_outputs": outputs, "check_input_digests": saved["check_input_digests"]}


def run_reference(task: Task, config: EvalConfig, seeds: Seeds, slot: sandbox.SlotLease, scratch: str,
                  part: str = "all") -> Reference:
    """The trusted reference in its own sandboxed child; writes inputs.pt into `scratch`."""
    job = reference_job(task, config, seeds, part=part)
    spec = children.child_spec(config, scratch, job, max_file_mb=REFERENCE_FILE_MB)
    out = sandbox.run_child(spec, slot, config.require_sandbox)
    return reference_from(task, out, read_result(scratch, job.nonce), scratch)
