"""The parent's side of starting a reference or run child: the job it writes (`protocol`), the hidden check
calls it draws, the sandbox's limits and environment, and why a child that never reached untrusted code
stopped."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from kernelbench.harness import protocol
from kernelbench.harness.build import builder, nvrtc
from kernelbench.harness.isolation import sandbox, warm_child
from kernelbench.harness.child import launch
from kernelbench.tasks.inputs import Seeds
from kernelbench.harness.config import EvalConfig


def paired(config: EvalConfig) -> bool:
    """Paired timing: on CPU, the reference and the candidate timed in alternating blocks (`paired`)."""
    return config.device == "cpu" and config.timing_rounds > 0 and config.timing_trials > 0


def setup(config: EvalConfig, seeds: Seeds, profile: str = "") -> protocol.Setup:
    """What the reference and the run child of one evaluation share; `profile` overrides the config's
    ("ncu": the untimed run child under Nsight Compute)."""
    return protocol.Setup(
        device=config.device, threads=config.threads, init_seed=seeds.init_seed,
        input_seeds=tuple(seeds.input_seeds), extra_seeds=tuple(seeds.extra_seeds),
        warmup_trials=config.warmup_trials, timing_trials=config.timing_trials,
        timing_input_sets=max(1, min(config.timing_input_sets, len(seeds.input_seeds))),
        timing_budget_s=config.run_timeout_s / 4, min_trials=config.min_timing_trials,
        timing_checks=timing_checks(config, seeds) if config.timing_trials > 0 else (),
        profile=profile or ("torch" if config.profile in ("torch", "ncu") else ""),
        profile_timeout_s=config.profile_timeout_s, max_input_set_mb=config.max_input_set_mb)


def timing_checks(config: EvalConfig, seeds: Seeds) -> tuple[tuple[int, int], ...]:
    """(timing set, seed) of each hidden check call among the timed trials (timing.Measurement._check): a pool of
    `protocol.CHECK_POOL_FACTOR` times the count expected among the trials (one per paired block on average), since
    the count per block is random (`paired.draw_checks`, `Measurement.place_checks`); the reference computes
    every one; unpaired, those left over run in the verification round and the parent compares every one;
    paired, the parent asks for those that ran among the trials (`verdict.checks_asked`). Derived from this evaluation's secret seeds, so the reference and run jobs agree and
    nothing the candidate sees before the run predicts them; the seeds give element-wise factors in the timing
    range (`timing.check_inputs`), so a check looks like a trial; each check's base set is drawn uniformly, as each
    timed call's is (`Measurement._load_next`)."""
    if config.timing_checks <= 0:
        return ()
    count = protocol.CHECK_POOL_FACTOR * max(config.timing_checks, config.timing_rounds if paired(config) else 0)
    sets = max(1, len(seeds.timing_seeds))
    rng = random.Random(f"timing checks {seeds.init_seed} {list(seeds.timing_seeds)}")  # str seeds: SHA-512
    # each check's set drawn, not rotated: with checks on sets 0, 1, 2, 3... in order and timed calls rotating too,
    # a call's set (which signs and magnitudes show) named its kind (tests/adversarial/set_schedule_skip.py)
    return tuple((rng.randrange(sets), rng.getrandbits(62)) for _ in range(count))


def child_spec(config: EvalConfig, scratch: str, job: protocol.ReferenceJob | protocol.RunJob, binds=(),
               extensions_dir: str = "", max_file_mb: int = 0, pass_fds: tuple[int, ...] = (),
               timeout_s: float = 0.0) -> sandbox.ChildSpec:
    """Writes the job into `scratch` (the child reads and deletes it first) and describes the child."""
    Path(scratch, "job.json").write_text(json.dumps(protocol.job_to_dict(job)))
    env = builder.child_env(config, extensions_dir) if extensions_dir else \
        (("OMP_NUM_THREADS", str(config.threads)),) + builder.cpu_allocator_env(config)
    if config.device == "cuda" and not extensions_dir:
        env += nvrtc.child_env(config.device)
    if config.device == "cuda" and config.cuda_device:  # the run's own GPU, and no other (train.layout)
        env += (("CUDA_VISIBLE_DEVICES", config.cuda_device),)
    return sandbox.ChildSpec(argv=launch.child_argv(scratch), scratch_dir=scratch,
                             worker=sandbox.WorkerEntry(scratch) if config.warm_workers else None,
                             limits=builder.child_limits(config, timeout_s or config.run_timeout_s, max_file_mb), binds=tuple(binds),
                             cuda=config.device == "cuda", env=env, pass_fds=pass_fds)


def not_started(out: sandbox.ChildOutcome, what: str) -> str:
    """Why a child that never reached untrusted code stopped, for a `harness_error`'s text."""
    if not out.started:
        head = f"the {what} child could not start (the interpreter or the project could not be loaded in the sandbox)"
    else:
        head = f"the harness's own code failed in the {what} child before the candidate ran"
    state = "timed out" if out.timed_out else f"exit {out.returncode}" + (f", signal {out.signal}" if out.signal else "")
    return f"{head} ({state}, {out.sandbox}): {out.stderr_tail.strip()[-600:]}"


def prestart_warm_worker(config: EvalConfig) -> None:
    """Start, now, the warm worker that `config`'s children will fork from (`kernelbench.harness.isolation.warm_child`), so
    its `import torch` runs beside the caller's own start instead of before the first child; nothing where
    warm workers do not serve."""
    spec = sandbox.ChildSpec(argv=(), scratch_dir="", env=builder.child_env(config, os.devnull),
                             worker=sandbox.WorkerEntry(os.devnull) if config.warm_workers else None)
    if warm_child.serves(spec):
        warm_child.zygote(sandbox.child_environment(spec))
