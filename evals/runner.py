"""A benchmark run: tasks × trajectories × turns through the agent, one results.jsonl record per kernel.

    kernel-agent bench --tasks builtin:heldout --backend openai --base-url http://localhost:8000/v1 \
        --model my-model --trajectories 16 --turns 8 --device cuda --out runs/bench-my-model

Resuming: every kernel is appended to `results.jsonl` (flushed and fsynced) the moment the harness
returns its verdict, so a killed run loses only the evaluations in flight. `--resume` reads the file
back, rebuilds each unfinished trajectory from its finished turns (kernel, summary, feedback: what the
next prompt needs) and continues it for the turns it still lacks, so no finished evaluation is redone.
A torn last line (a kill mid-write) is cut off before appending.
"""

from __future__ import annotations

import json
import os
import platform
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Callable, get_args, Iterable, Literal

import pydantic.dataclasses
from pydantic import ConfigDict, Field, field_validator, TypeAdapter, ValidationInfo
from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeElapsedColumn

from agent.backends import make_policy
from agent.episode import EpisodeRunner, Job
from agent.policy import SamplingConfig
from agent.prompts import PromptSettings
from agent.trajectory import Turn
from evals import baselines as bl, replay
from evals.metrics import compute_metrics
from evals.report import write_report
from evals.results_log import BenchError, BenchRecord, record_key, ResultsLog
from evals.tracking import report_metrics, require_tracker, TrackerError
from kernelbench.executors.executor import ExecutorConfig, make_evaluator
from kernelbench.harness.config import Device, EvalConfig, OpPolicy
from kernelbench.harness.insight import telemetry
from kernelbench.harness.result import CORRECT
from kernelbench.tasks.catalog import load_tasks
from kernelbench.tasks.splits import select
from kernelbench.tasks.task import OriginError, Task
from rewards.score import ScoreConfig

SPLITS = ("train", "heldout", "extra", "all")
Backend = Literal["hf", "vllm", "openai", "replay"]
BACKENDS = get_args(Backend)
RESUME_KEYS = ("tasks", "level", "limit", "backend", "model", "from_dir", "device", "size", "op_policy")
"""Config fields a resumed run must share with the run it continues (trajectories and turns may grow)."""


@pydantic.dataclasses.dataclass(frozen=True, config=ConfigDict(extra="forbid", validate_default=True))
class BenchConfig:
    """Everything `kernel-agent bench` was asked; saved resolved as DIR/config.json (pydantic's JSON dump, which
    validates back into an equal config). Validated on construction: docs/architecture.md, "Configuration"."""

    tasks: str = "builtin:heldout"
    """`ORIGIN[:SPLIT][:level_N]` (see `parse_task_spec`)."""
    level: int = 0
    """Only tasks of this level (0: every level)."""
    limit: int = Field(0, ge=0)
    """Only the first N tasks after filtering (0: all)."""
    backend: Backend = "openai"
    """`hf`, `vllm`, `openai`, or `replay` (re-evaluate the kernels of `from_dir`, no model)."""
    model: str = ""
    """Model name or path for the backend."""
    base_url: str = ""
    """Chat-completions endpoint for `openai`."""
    from_dir: str = ""
    """Earlier run folder whose kernels `replay` re-evaluates."""
    trajectories: int = Field(16, ge=1)
    """N trajectories per task (Kevin-32B evaluates best@16)."""
    turns: int = Field(8, ge=1)
    """T refinement turns per trajectory (Kevin-32B's test-time setting)."""
    streaming_turns: bool = True
    """A trajectory's next turn is generated as soon as its own verdict is back, batched with whatever else is
    ready (`agent.episode.EpisodeRunner`); False (`--lockstep-turns`): a task's trajectories advance turn by
    turn together, the earlier schedule."""
    device: Device = "cpu"
    """`cpu` (C++ kernels) or `cuda`."""
    size: Literal["", "cpu", "gpu"] = ""
    """Task size (`cpu` or `gpu`); empty: `gpu` on cuda, `cpu` on cpu."""
    out: str = "runs/bench"
    """Output folder."""
    resume: bool = False
    """Continue the run in `out` instead of refusing to touch it."""
    op_policy: OpPolicy = ""
    """`strict`, `partial`, or empty for each task's own policy."""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    """Sampling (`agent.policy.SamplingConfig`: temperature, top_p, max_tokens, seed)."""
    prompt: PromptSettings = field(default_factory=lambda: PromptSettings(hardware=""))
    """Prompt settings (`agent.prompts.PromptSettings`): `hardware` named in the prompt (empty: the device name
    the harness reads), `token_budget` (oldest turns dropped first beyond it), `language`, `style`. `device`
    is this config's `device`; `op_policy` is each task's (or `op_policy` above)."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """Harness settings (`kernelbench.harness.config.EvalConfig`: timing_trials, build_cache_dir, profile, ...);
    `device`, `size` and `op_policy` are this config's (size resolved)."""
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    """Where evaluations run (`kernelbench.executors.executor.ExecutorConfig`: kind `local` or `ray`,
    ray_address, compile_workers, run_workers, max_in_flight)."""
    score: ScoreConfig = field(default_factory=ScoreConfig)
    """How a verdict becomes the score recorded with each turn (`rewards.ScoreConfig`: correctness_weight,
    speedup_cap), as training scores it."""
    compile_baseline: bool = True
    """Report speedups against `torch.compile` too (cached per task/size/device/torch; see evals.baselines)."""
    refresh_baselines: bool = False
    """Measure the baselines again instead of reading the cache."""
    baseline_cache: str = ""
    """Baseline cache file; empty: `$KERNEL_AGENT_BASELINES` or ~/.cache/kernel-agent/baselines.json."""
    price_in: float = Field(0.0, ge=0)
    """USD per million prompt tokens (0 with price_out 0: no cost reported)."""
    price_out: float = Field(0.0, ge=0)
    """USD per million completion tokens (reasoning included)."""
    report_to: Literal["", "wandb", "trackio"] = ""
    """Also send metrics.json's scalars to `wandb` or `trackio` (empty: only the files)."""

    @field_validator("prompt", "eval")
    @classmethod
    def _target_from_config(cls, value: Any, info: ValidationInfo) -> Any:
        """One place for the run's target: the nested settings take device, size and op policy from the fields
        above (validated before them; a nested value of its own is overwritten)."""
        if not {"device", "size", "op_policy"} <= info.data.keys():
            return value  # one of them failed: its own error says so
        if info.field_name == "prompt":
            return replace(value, device=info.data["device"])
        size = info.data["size"] or ("gpu" if info.data["device"] == "cuda" else "cpu")
        return replace(value, device=info.data["device"], size=size, op_policy=info.data["op_policy"])

    def resolved_size(self) -> str:
        return self.size or ("gpu" if self.device == "cuda" else "cpu")


def config_dict(config: BenchConfig) -> dict[str, Any]:
    """Every field of `config` as JSON values (pydantic's dump): config.json's `bench`."""
    return TypeAdapter(BenchConfig).dump_python(config, mode="json")


def parse_task_spec(spec: str) -> tuple[str, str, int]:
    """`ORIGIN[:SPLIT][:level_N]` -> (origin, split, level).

    Origins hold colons themselves (`kernelbench:/data/KB`, `hf:ScalingIntelligence/KernelBench`), so
    selectors are read from the right: a trailing segment that is a split name (`train`, `heldout`,
    `extra`, `all`) or a level (`level_2`, as the dataset names its splits, or `L2`) is a selector; at
    most one of each, in either order. The split defaults to `heldout`: a benchmark measures tasks the
    agent did not train on; ask for `:all` to run a whole level.
    """
    parts = spec.split(":")
    split, level = "", 0
    while len(parts) > 1:
        last = parts[-1]
        lvl = _level_of(last)
        if last in SPLITS and not split:
            split = last
        elif lvl and not level:
            level = lvl
        else:
            break
        parts.pop()
    origin = ":".join(parts)
    if not origin or (origin not in ("builtin",) and not origin.startswith(("kernelbench:", "hf:"))):
        raise BenchError(f"--tasks {spec!r}: origin must be builtin, kernelbench:PATH or hf:NAME "
                         f"(optionally :train|:heldout|:extra|:all and :level_N)")
    return origin, split or "heldout", level


def _level_of(segment: str) -> int:
    for prefix in ("level_", "level", "L"):
        rest = segment[len(prefix):]
        if segment.startswith(prefix) and rest.isdigit() and 1 <= int(rest) <= 4:
            return int(rest)
    return 0


def resolve_tasks(spec: str, level: int = 0, limit: int = 0) -> list[Task]:
    """The tasks a spec names, filtered by level and cut to `limit`; level-4 tasks needing weights are skipped."""

    origin, split, spec_level = parse_task_spec(spec)
    if level and spec_level and level != spec_level:
        raise BenchError(f"--level {level} contradicts --tasks {spec!r}")
    level = level or spec_level
    try:
        tasks = select(load_tasks(origin), split)
    except OriginError as e:
        raise BenchError(str(e)) from None
    tasks = [t for t in tasks if (not level or t.level == level) and not t.needs_weights]
    tasks = tasks[:limit] if limit > 0 else tasks
    if not tasks:
        raise BenchError(f"--tasks {spec!r}{f' --level {level}' if level else ''} selects no task")
    return tasks


def prepare_out_dir(config: BenchConfig) -> list[BenchRecord]:
    """Refuse to overwrite a run; on --resume check it is the same run. Returns the records already there."""
    log = ResultsLog(os.path.join(config.out, "results.jsonl"))
    old_cfg_path = os.path.join(config.out, "config.json")
    if not config.resume:
        if os.path.exists(log.path):
            raise BenchError(f"{config.out} already holds a run: pass --resume to continue it or choose another --out")
        return []
    if os.path.exists(old_cfg_path):
        with open(old_cfg_path, encoding="utf-8") as f:
            old = json.load(f).get("bench", {})
        diff = [k for k in RESUME_KEYS if k in old and old[k] != getattr(config, k)]
        if diff:
            raise BenchError(f"--resume: {config.out} was run with other settings ({', '.join(diff)})")
    return log.load()


def write_config(config: BenchConfig, tasks: list[Task], extra: dict[str, Any] | None = None) -> None:
    torch_v, cuda_v = telemetry.versions()
    doc = {"bench": config_dict(config),
           "tasks": [{"id": t.id, "level": t.level, "origin": t.origin} for t in tasks],
           "environment": {"device_name": telemetry.read(config.device).device_name, "torch_version": torch_v,
                           "cuda_version": cuda_v, "python": platform.python_version(), "host": platform.node()},
           **(extra or {})}
    os.makedirs(config.out, exist_ok=True)
    tmp = os.path.join(config.out, "config.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    os.replace(tmp, os.path.join(config.out, "config.json"))


def load_baselines(config: BenchConfig, tasks: list[Task], say: Callable[[str], None]) -> dict[str, bl.Baseline]:
    """torch.compile baselines per task (from the cache, or measured now)."""
    if not config.compile_baseline:
        return {}
    cache = bl.BaselineCache(config.baseline_cache)
    found = {}
    for task in tasks:
        baseline, cached = bl.get_or_measure(task, config.eval, cache, refresh=config.refresh_baselines)
        found[task.id] = baseline
        say(f"baseline {task.id}: eager {baseline.eager_ms:.3f} ms, torch.compile {baseline.compile_ms:.3f} ms"
            f" ({'cached' if cached else 'measured'})")
    return found


def resume_jobs(tasks: list[Task], trajectories: int, turns: int, done: list[BenchRecord],
                score: ScoreConfig = ScoreConfig()):
    """(job, turns still to run) for every trajectory that is not finished, with its finished turns as history
    (each scored under `score`, the run's settings)."""

    have: dict[tuple[str, str], dict[int, BenchRecord]] = defaultdict(dict)
    for rec in done:
        have[(rec.task, rec.trajectory)][rec.turn] = rec
    for task in tasks:
        for i in range(trajectories):
            got = have.get((task.id, str(i)), {})
            history = []
            while len(history) in got:  # the contiguous finished prefix; a later turn needs all earlier ones
                rec = got[len(history)]
                history.append(Turn(index=len(history), prompt=[], response=rec.response, reasoning=rec.reasoning,
                                    summary=rec.summary, candidate=rec.candidate, result=rec.result,
                                    score=score.score(rec.result)))
            if len(history) < turns:
                yield Job(task=task, traj_id=str(i), history=tuple(history)), turns - len(history)


def group_jobs(pending: Iterable[tuple[Any, int]], op_policy: str) -> dict[tuple[int, str], list[Any]]:
    """Jobs grouped by (turns still to run, op policy): one EpisodeRunner serves each group."""
    groups: dict[tuple[int, str], list[Any]] = defaultdict(list)
    for job, remaining in pending:
        groups[(remaining, op_policy or job.task.op_policy or "strict")].append(job)
    return dict(sorted(groups.items(), key=lambda kv: -kv[0][0]))


def run_agent(config: BenchConfig, tasks: list[Task], done: list[BenchRecord], evaluator, policy,
              baselines: dict[str, bl.Baseline], on_record: Callable[[BenchRecord], None]) -> None:
    """Run every unfinished (task, trajectory) to `config.turns` turns, appending each kernel as it is judged."""

    log = ResultsLog(os.path.join(config.out, "results.jsonl"))
    hardware = config.prompt.hardware or bl.device_identity(config.device)[0]

    def on_turn(task: Task, traj_id: str, turn) -> None:
        result, source = bl.apply_compile_baseline(turn.result, baselines.get(task.id))
        rec = BenchRecord(task=task.id, level=task.level, origin=task.origin, trajectory=traj_id, turn=turn.index,
                          candidate=turn.candidate, summary=turn.summary, response=turn.response,
                          reasoning=turn.reasoning, compile_baseline=source, result=result,
                          finish_reason=turn.finish_reason, generate_s=turn.generate_s,
                          prompt_tokens=turn.prompt_tokens, completion_tokens=turn.completion_tokens,
                          reasoning_tokens=turn.reasoning_tokens)
        log.append(rec)
        on_record(rec)

    for (remaining, policy_name), jobs in group_jobs(resume_jobs(tasks, config.trajectories, config.turns, done, config.score),
                                                     config.op_policy).items():
        settings = replace(config.prompt, hardware=hardware, op_policy=policy_name)
        runner = EpisodeRunner(policy, evaluator, turns=remaining, sampling=config.sampling, prompt_settings=settings,
                               on_turn=on_turn, streaming=config.streaming_turns, score=config.score.score)
        runner.run(jobs)


def select_records(records: list[BenchRecord], tasks: list[Task], trajectories: int | None,
                   turns: int | None) -> list[BenchRecord]:
    """The records of this run's tasks, trajectories < N and turns < T, one per key (the first written)."""
    ids = {t.id for t in tasks}
    seen, out = set(), []
    for rec in records:
        key = record_key(rec)
        if key in seen or rec.task not in ids:
            continue
        if trajectories is not None and rec.trajectory.isdigit() and int(rec.trajectory) >= trajectories:
            continue
        if turns is not None and rec.turn >= turns:
            continue
        seen.add(key)
        out.append(rec)
    return out


class Progress:
    """Live progress (rich): kernels judged, statuses so far, best speedup."""

    def __init__(self, total: int, enabled: bool = True):
        self.counts: dict[str, int] = defaultdict(int)
        self.best = 0.0
        self._bar = None
        if enabled and total:
            self._bar = Bar(TextColumn("[bold]bench"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("{task.description}"))
            self._task = self._bar.add_task("", total=total)
            self._bar.start()

    def __call__(self, rec: BenchRecord) -> None:
        self.counts[rec.result.status] += 1
        if rec.result.status == CORRECT:
            self.best = max(self.best, rec.result.speedup)
        if self._bar is not None:
            text = " ".join(f"{k}:{v}" for k, v in sorted(self.counts.items())) + f" best {self.best:.2f}x"
            self._bar.update(self._task, advance=1, description=text)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


@dataclass(frozen=True)
class BenchOutcome:
    out_dir: str
    metrics: dict[str, Any]
    new_kernels: int
    """Kernels evaluated by this invocation (0 when a resumed run had nothing left)."""


def run_bench(config: BenchConfig, policy=None, say: Callable[[str], None] = print,
              progress: bool = True) -> BenchOutcome:
    """Resolve tasks, write config.json, run (or replay) every unfinished kernel, then metrics and report.

    `policy` overrides the backend (tests and callers that hold a model already)."""

    if config.report_to:
        try:
            require_tracker(config.report_to)  # before any work: a missing package is known at once
        except TrackerError as e:
            raise BenchError(str(e)) from None
    done = prepare_out_dir(config)
    if config.backend == "replay":
        source = replay.load_source(config.from_dir)
        config = replace(config, trajectories=source.trajectories, turns=source.turns)
        tasks = replay.source_tasks(source, config.level, config.limit)
    else:
        tasks = resolve_tasks(config.tasks, config.level, config.limit)
    write_config(config, tasks)
    baselines = load_baselines(config, tasks, say)
    done_keys = {record_key(r) for r in done}
    if config.backend == "replay":
        todo = [r for r in replay.records_for(source, tasks) if record_key(r) not in done_keys]
    else:
        todo = [k for k in ((t.id, str(i), j) for t in tasks for i in range(config.trajectories)
                            for j in range(config.turns)) if k not in done_keys]
    bar = Progress(len(todo), enabled=progress)
    new = []

    def on_record(rec: BenchRecord) -> None:
        new.append(rec)
        bar(rec)

    try:
        if todo:
            with make_evaluator(config.eval, config.executor) as evaluator:
                if config.backend == "replay":
                    replay.run_replay(config, tasks, todo, evaluator, baselines, on_record)
                else:
                    if policy is None:
                        policy = make_backend(config)
                    run_agent(config, tasks, done, evaluator, policy, baselines, on_record)
    finally:
        bar.close()
    records = select_records(ResultsLog(os.path.join(config.out, "results.jsonl")).load(), tasks,
                             config.trajectories, config.turns)
    metrics = compute_metrics(records, config.turns, price_in=config.price_in, price_out=config.price_out)
    metrics["expected_kernels"] = len(tasks) * config.trajectories * config.turns
    with open(os.path.join(config.out, "metrics.json"), "w", encoding="utf-8") as f:
        json.dump(metrics, f, indent=1, sort_keys=True)
    write_report(config.out, metrics, records, config=config_dict(config))
    if config.report_to:
        report_metrics(config.report_to, metrics, config_dict(config), config.out)
    return BenchOutcome(config.out, metrics, len(new))


def make_backend(config: BenchConfig):
    if not config.model:
        raise BenchError(f"--backend {config.backend} needs --model")
    try:
        return make_policy(config.backend, config.model, base_url=config.base_url, device=config.device)
    except ValueError as e:
        raise BenchError(str(e)) from None
