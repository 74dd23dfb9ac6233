"""The reference child (`reference` jobs): only the task's trusted `Model` runs here, never a candidate.

It builds the input sets and the timing sets from the parent's seeds, computes reference outputs at full
precision (TF32 off), the hidden check calls' outputs, and times the reference; it writes `inputs.pt` and
`reference.pt`. A group's paired timing splits that in two (`ReferenceJob.part`): one child computes the
group's inputs and outputs untimed, and each candidate's paired child loads those inputs and only times.
With `paired` in the job (CPU), it times in blocks on the parent's word over inherited pipes
(`timing.serve_blocks`, `kernelbench.harness.paired`), alive beside the candidate's run child.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import torch

from kernelbench.harness import protocol
from kernelbench.harness.child import profiled_call, timing
from kernelbench.harness.child.outputs import flatten_output, input_digests, report_value, sync
from kernelbench.harness.child.result_files import check_file, CHECKS_FILE, INPUTS_FILE
from kernelbench.tasks.input_configs import labels, make_config_sets
from kernelbench.tasks.inputs import clone_args, make_input_sets, make_timing_sets, Seeds, to_device
from kernelbench.tasks.problem import load_problem
from kernelbench.tasks.task import Task


def full_precision() -> None:
    # DESIGN.md rule 3: PyTorch lets convolutions use TF32 by default, which alone misses a 1e-4 tolerance.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def discard(label: str, out: Any, buffers: list[Any]) -> None:
    """The reference's stand-in for the run child's report of a check or verification call: the same copies and
    serialisation, thrown away, so both children do the same untimed work per block (`paired.unaccounted`)."""
    report_value(out, buffers)


def run_reference(job: protocol.ReferenceJob, scratch: str, reporter: Any = None) -> tuple[protocol.ReferenceResult, None]:
    setup = job.setup
    device = setup.device
    if job.part not in protocol.REFERENCE_PARTS:
        raise ValueError(f"unknown reference part {job.part!r}")
    torch.set_num_threads(setup.threads)
    full_precision()
    problem = load_problem(Task(**job.task.to_dict()), job.size)
    seeds = Seeds(setup.init_seed, setup.input_seeds, setup.extra_seeds, job.timing_seeds)
    torch.manual_seed(seeds.init_seed)
    init_inputs = list(problem.get_init_inputs())
    given = None
    if job.part == "timing":  # the group's inputs, the very values its outputs were computed from (reference_cache)
        given = torch.load(os.path.join(scratch, INPUTS_FILE), weights_only=True)
        init_inputs = given["init_inputs"]
    torch.manual_seed(seeds.init_seed)
    model = problem.Model(*init_inputs).to(device)
    if given is not None:
        sets, timing_sets, set_configs = given["sets"], given["timing_sets"], []
    else:
        sets, timing_sets, set_configs = _make_inputs(problem, seeds, setup, scratch, init_inputs, model)
    if job.paired is not None:  # the run child, started beside this one, waits for these (kernelbench.harness.paired)
        timing.Channel(job.paired.read_fd, job.paired.write_fd).send(timing.INPUTS_READY)
    timed = [to_device(s, device) for s in timing_sets]
    checks = [tuple(c) for c in setup.timing_checks]
    profile = setup.profile == "torch" and setup.timing_trials > 0 and job.part != "outputs"
    counted: tuple[protocol.Work | None, str] = (None, "")
    if job.part == "timing":  # the parent holds the group's outputs
        structures, profile_error = [], profiled_call.warm_up(device) if profile else ""
    else:
        # paired timing: the check calls' outputs come from the reference's own blocks (`_timings`), not up front
        upfront = checks if job.paired is None and job.part != "outputs" else []
        structures, profile_error = _expected(model, sets, timing_sets, timed, device, upfront, scratch, profile)
        if setup.timing_trials > 0:  # speed of light: bytes and FLOPs of the timed configuration, counted here (trusted
            from kernelbench.harness.child import work  # task code only; never in the candidate's child) and reported with the rest

            counted = work.measured(model, to_device(clone_args((timing_sets or sets)[0]), device))
    many = len(problem.configs) > 1 and job.part != "timing"
    times: dict[str, Any] = dict(timing=None, timing_blocks=None, profile=None, compile_timing=None)
    if setup.timing_trials > 0 and job.part != "outputs":
        times.update(_timings(job, model, timed, device, checks, profile, profile_error, scratch))
    return protocol.ReferenceResult(
        structures=tuple(structures), work=counted[0], work_error=counted[1],
        set_configs=tuple(set_configs) if many else (),
        config_labels=tuple(labels(problem.configs, sets, set_configs)) if many else (), **times), None


def _make_inputs(problem: Any, seeds: Any, setup: protocol.Setup, scratch: str,
                 init_inputs: list[Any], model: Any) -> tuple[list[Any], list[Any], list[int]]:
    """The input sets (every configuration's), the timing sets and each set's configuration, drawn from the
    seeds and written to `inputs.pt`; with them, for a task declaring `KEEP_STATE_DICT`, the reference's
    `state_dict` (on the CPU), which the run child checks the candidate's against and loads into it
    (`candidate_run._weights`)."""

    _refuse_oversized(problem.get_inputs, setup.max_input_set_mb)
    sets = make_input_sets(problem.get_inputs, seeds)
    timing_sets = make_timing_sets(problem.get_inputs, seeds) if setup.timing_trials > 0 else []
    if setup.timing_trials > 0 and not timing_sets:  # no timing seeds (a baseline with no candidate to judge)
        timing_sets = [clone_args(s) for s in sets[: setup.timing_input_sets]]
    # correctness on every input configuration, timing on the first (kernelbench.tasks.input_configs): the other
    # configurations' sets follow the first's in `sets`, so the run child treats them alike
    more_sets, owners = make_config_sets(problem.configs, seeds)
    set_configs, sets = [0] * len(sets) + owners, sets + more_sets
    weights = {k: v.detach().to("cpu").clone() for k, v in model.state_dict().items()} \
        if getattr(problem.module, "KEEP_STATE_DICT", False) is True else None
    torch.save({"init_inputs": init_inputs, "sets": sets, "timing_sets": timing_sets, "state_dict": weights},
               os.path.join(scratch, INPUTS_FILE))
    return sets, timing_sets, set_configs


def _refuse_oversized(get_inputs: Callable[[], Any], limit_mb: int) -> None:
    """Raise (a harness error naming the size) when one input set is over `limit_mb` MiB, before any is drawn:
    the sizes come from `get_inputs()` on the meta device (no memory, no time). A `get_inputs` that cannot run
    there (it reads a tensor's values) is measured on its first real set instead."""

    if limit_mb <= 0:
        return
    try:
        with torch.device("meta"):
            drawn = list(get_inputs())
    except Exception:  # noqa: BLE001 - data-dependent construction: draw one real set (the seed is reset after)
        drawn = list(get_inputs())
    size = sum(t.numel() * t.element_size() for t in drawn if isinstance(t, torch.Tensor))
    if size > limit_mb << 20:
        shapes = ", ".join(str(tuple(t.shape)) for t in drawn if isinstance(t, torch.Tensor))
        raise ValueError(f"one input set of this task is {size / 2**20:,.0f} MiB ({shapes}), over the harness's "
                         f"{limit_mb:,} MiB (EvalConfig.max_input_set_mb): an evaluation draws about a dozen sets "
                         "on one CPU thread and holds them in two processes; use a smaller size for this device")


def _expected(model: Any, sets: list[Any], timing_sets: list[Any], timed: list[Any], device: str, checks: list[Any],
              scratch: str, profile: bool) -> tuple[list[Any], str]:
    """Reference outputs of every set, timing set and hidden check call, and the check calls' input digests,
    written to `reference.pt`; the output structures, and the profiler's warm-up error ("" when none or
    not asked)."""

    outputs, structures, timing_outputs = [], [], []
    with torch.no_grad():
        for s in sets:
            structure, tensors, _ = flatten_output(model(*to_device(clone_args(s), device)))
            outputs.append(tensors)
            structures.append(structure)
        for s in timing_sets:
            timing_outputs.append(flatten_output(model(*to_device(clone_args(s), device)))[1])
    check_outputs: list[Any] = [None] * len(checks)
    # as in the run child, whose profiler threads must exist before it counts threads
    profile_error = profiled_call.warm_up(device) if profile else ""

    def keep(label: str, out: Any, buffers: list[Any]) -> None:
        check_outputs[int(label.split("/")[1])] = flatten_output(out)[1]

    if checks:  # the expected outputs of the run child's hidden check calls: same code, same calls
        timing.Measurement(model, timed, device, keep, checks).run_checks()
    sync(device)
    # what each check call's inputs are before the call, for the parent (`compare.inputs_match`)
    check_input_digests = [input_digests(timing.check_inputs(timed[k % len(timed)], seed)) for k, seed in checks]
    torch.save({"outputs": outputs, "timing_outputs": timing_outputs, "check_outputs": check_outputs,
                "check_input_digests": check_input_digests}, os.path.join(scratch, "reference.pt"))
    return structures, profile_error


def _keep_check(scratch: str, kept: set[int]) -> Callable[[str, Any, list[Any]], None]:
    """Paired timing: the reference's report of a check call its block made (called where the run child sends
    its own, after the parent's readings of the block): the output goes to `check_file(scratch, j)` and
    leaves this process's memory. Why a file and not a list: outputs kept in memory took the heap space each block's
    freed copies left, so every later timed call of the reference allocated its output on fresh pages (an rms_norm
    reference's trials went from 3.2 to 21 ms and an honest candidate was rejected `timing_inconsistent`)."""

    def keep(label: str, out: Any, buffers: list[Any]) -> None:
        j = int(label.split("/")[1])
        torch.save(flatten_output(out)[1], check_file(scratch, j))
        kept.add(j)

    return keep


def _judged_checks(n: int | None, kept: set[int], checks: list[Any], timed: list[Any], scratch: str) -> None:
    """Paired timing: the first `n` check calls of the pool are those the parent judges (the run child ran exactly
    these among its trials, `verdict.checks_asked`); their outputs, as this child's blocks computed them (the same
    calls in the same order: each block places its count in pool order, `Measurement.place_checks`), are in their
    files (`_keep_check`); their inputs' digests and the count go to `CHECKS_FILE`. Why not up front: the
    pool is twice what the blocks place, and computing, digesting and saving all of it before timing held both
    children for 0.3-0.4 s of a 2.5 s warm evaluation (8 MB ReLU); here only the judged ones are digested, while
    the run child verifies."""

    if n is None:
        raise RuntimeError("paired timing: the parent ended without the count of judged check calls")
    missing = [j for j in range(n) if j not in kept]
    if missing or n > len(checks):
        raise RuntimeError(f"paired timing: {n} check calls judged, but this child's blocks computed {sorted(kept)}")
    digests = [input_digests(timing.check_inputs(timed[k % len(timed)], seed)) for k, seed in checks[:n]]
    torch.save({"count": n, "check_input_digests": digests}, os.path.join(scratch, CHECKS_FILE))


def _timings(job: protocol.ReferenceJob, model: Any, timed: list[Any], device: str, checks: list[Any], profile: bool,
             profile_error: str, scratch: str) -> dict[str, Any]:
    """The reference's timing (paired or in one go), its profiled call and its torch.compile baseline."""

    setup, found = job.setup, {}
    if job.paired is not None:  # blocks on the parent's word, alternating with the candidate's (kernelbench.harness.paired)
        # its blocks' check calls are held as plain copies as the run child's are (the same untimed work inside
        # the blocks); what the run child then sends, after the parent's readings, this child writes to files
        kept: set[int] = set()
        m = timing.Measurement(model, timed, device, _keep_check(scratch, kept), checks)
        blocks = timing.serve_blocks(m, setup.warmup_trials, timing.Channel(job.paired.read_fd, job.paired.write_fd))
        _judged_checks(m.checks_judged, kept, checks, timed, scratch)
        if m.times_ms:
            found["timing"] = timing.stats(m.times_ms, setup.warmup_trials)
            found["timing_blocks"] = blocks
    else:
        st = timing.measure(model, timed, device, setup.warmup_trials, setup.timing_trials, setup.timing_budget_s,
                            discard, checks, setup.min_trials)
        found["timing"] = st
    if profile and timed:  # after the timing: one untimed call, the same way as the candidate's (kernelbench.harness.insight.profiling)
        found["profile"] = {"ok": False, "error": profile_error} if profile_error else \
            profiled_call.report(model, clone_args(timed[0]), device, ())
    if job.time_compile:
        compiled = torch.compile(model)
        st = timing.measure(compiled, timed, device, setup.warmup_trials, setup.timing_trials, setup.timing_budget_s,
                            discard, checks, setup.min_trials)
        found["compile_timing"] = st
    return found
