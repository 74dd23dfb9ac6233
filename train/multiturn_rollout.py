"""TRL's `rollout_func`: the batch's tasks run as multi-turn episodes, one training sample per turn, in
TRL's slots; and the batch's reward/, rollout/ and perf/ metrics, recorded for the step's log row
(`train.metrics_log.PendingMetrics`)."""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from typing import Any, Sequence

from agent.trajectory import Trajectory
from kernelbench.harness.result import STATUSES
from kernelbench.tasks.task import Task
from train.config import TrainConfig
from train.generation import chat_ids, generation_policy
from train.metrics_log import departing_share, PendingMetrics, repetition_rate, usual_openings
from train.rollout import Rollout
from train.samples import build_samples, TurnSample

# Imports inside functions: accelerate (0.1 s to import) loads when a step gathers across processes, not when this
# module is imported for its records and helpers.

UNKNOWN_LOGPROB = float("nan")
"""A completion token's generation log-prob when the policy gave none: TRL's GRPOTrainer (1.16,
`_generate_and_score_completions`) maps NaN to a zero log-prob difference, i.e. no importance-sampling
correction for that token."""


def scoring_of(config: TrainConfig) -> Any:
    """The run's reward settings (its `score` section): verdict -> score (never the harness's own number)."""
    return config.score


def task_prompt(task_id: str) -> list[dict[str, str]]:
    """A task's row in the training dataset: a stand-in prompt that names the task. TRL 1.16 hands
    `rollout_func` the prompts alone (no other dataset column), so the prompt is how the rollout knows its
    task (`MultiTurnRollout.task_of`); each turn's real context is built by the episode."""
    return [{"role": "user", "content": f"Optimise task {task_id}."}]


def _prompt_key(conversation: Sequence[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    return tuple((str(m["role"]), str(m["content"])) for m in conversation)


class MultiTurnRollout:
    """TRL's `rollout_func`: the batch's tasks → multi-turn episodes → one sample per turn, in TRL's slots.

    Owns its own tokenizer: the trainer's fast tokenizer must never be shared with another thread (the
    evaluator's callbacks, an overlapped rollout): a Rust tokenizer used by two threads at once fails with
    "Already borrowed".
    """

    def __init__(self, config: TrainConfig, rollout: Rollout, tasks: Sequence[Task], tokenizer: Any, *,
                 openings_path: str = "", metrics: PendingMetrics | None = None):
        self.config, self.rollout, self.tokenizer = config, rollout, tokenizer
        self.by_prompt = {_prompt_key(task_prompt(t.id)): t for t in tasks}
        self.metrics = metrics or PendingMetrics()
        """Where the batch's metrics go; the trainer's step callback takes them into the log row."""
        self.scoring = scoring_of(config)
        self.openings_path = openings_path
        self.openings: tuple[str, ...] = ()
        if openings_path and os.path.exists(openings_path):
            self.openings = tuple(json.loads(open(openings_path, encoding="utf-8").read()))
        self.last_samples: list[list[TurnSample]] = []

    def encode_prompt(self, conversation: Any) -> list[int]:
        return chat_ids(self.tokenizer, conversation)

    def task_of(self, prompt: Sequence[dict[str, Any]]) -> Task:
        """The task a dataset prompt names (`task_prompt`); a prompt of no task of this run is an error."""
        task = self.by_prompt.get(_prompt_key(prompt))
        if task is None:
            raise RuntimeError(f"the prompt {prompt!r} names no task of this run (rows come from task_prompt)")
        return task

    def __call__(self, prompts: list, trainer: Any) -> dict[str, list]:
        g = self.config.samples_per_task
        ids = [self.task_of(p).id for p in prompts]
        if len(ids) % g or any(len(set(ids[i:i + g])) != 1 for i in range(0, len(ids), g)):
            raise RuntimeError(f"batch does not come in blocks of {g} identical tasks: {ids}")
        tasks = [self.task_of(prompts[i]) for i in range(0, len(ids), g)]
        step = trainer.state.global_step // self.config.grad_steps_per_batch
        rank = trainer.accelerator.process_index
        seed = self.config.seed * 1_000_003 + step * 10_007 + rank * 104_729
        t0 = time.perf_counter()
        with generation_policy(trainer, self.tokenizer, self.config.backend, training=True) as policy:
            trajs = self.rollout.collect(policy, tasks, step, seed)
        wall_s = time.perf_counter() - t0
        n = self.config.trajectories
        groups = [trajs[k * n:(k + 1) * n] for k in range(len(tasks))]
        samples = build_samples(groups, self.encode_prompt, scoring=self.scoring, gamma=self.config.gamma,
                                return_mode=self.config.return_mode)
        self.last_samples = samples
        out = self.to_trl(samples, g)
        self.record_metrics(trainer, samples, trajs, wall_s)
        return out

    def to_trl(self, groups: list[list[TurnSample]], g: int) -> dict[str, list]:
        """Rows in TRL's slot order; a group with fewer than `g` turns (an episode ended early, a turn
        without tokens) is filled with one-token end-of-sequence samples of reward None and env_mask 0
        (TRL reads every completion's last token, so none may be empty)."""
        eos = self.tokenizer.eos_token_id
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "turn_reward": [], "env_mask": []}
        filled = False
        for samples in groups:
            real = [s for s in samples if s.completion_ids][:g]
            for s in real:
                out["prompt_ids"].append(list(s.prompt_ids))
                out["completion_ids"].append(list(s.completion_ids))
                # Unknown log-probs are NaN, which TRL's importance-sampling correction reads as "no correction"
                # (ratio 1); a 0.0 would read as probability 1 and shrink that token's ratio, and its gradient, to ~0.
                lps = list(s.logprobs) if len(s.logprobs) == len(s.completion_ids) else [UNKNOWN_LOGPROB] * len(s.completion_ids)
                out["logprobs"].append(lps)
                out["turn_reward"].append(s.reward)
                out["env_mask"].append([1] * len(s.completion_ids))
            for _ in range(g - len(real)):
                filled = True
                out["prompt_ids"].append(list(real[0].prompt_ids) if real else [eos])
                out["completion_ids"].append([eos])
                out["logprobs"].append([UNKNOWN_LOGPROB])
                out["turn_reward"].append(None)
                out["env_mask"].append([0])
        if not filled:
            del out["env_mask"]  # without fillers TRL counts completion lengths itself
        return out

    def record_metrics(self, trainer: Any, groups: list[list[TurnSample]], trajs: list[Trajectory], wall_s: float) -> None:
        """reward/, rollout/ and perf/ of this batch over every rank (gathered), recorded in `metrics` for the
        step's log row."""
        from accelerate.utils import gather_object

        samples = [s for grp in groups for s in grp]
        # Every turn carries the wall time of the batched call that produced it: count each call once. A
        # streamed call holds several tasks and turns, so the time alone names the call (two calls never
        # last the same to the nanosecond).
        gen_s = sum({t.generate_s for tr in trajs for t in tr.new_turns})
        evaluator = getattr(self.rollout, "evaluator", None)
        local = RankBatch(
            samples=[SampleRow(s.score, s.reward, s.advantage, s.status, s.turn_index, len(s.completion_ids),
                               s.finish_reason, s.response, repetition_rate(s.completion_ids)) for s in samples],
            groups=[[s.reward for s in grp if s.reward is not None] for grp in groups],
            best=[t.best_score for t in trajs], wall_s=wall_s, gen_s=gen_s,
            reused=getattr(evaluator, "reused", 0), submitted=getattr(evaluator, "submitted", 0),
            remeasured=getattr(evaluator, "remeasured", 0))
        every: list[RankBatch] = gather_object([local]) if trainer.accelerator.num_processes > 1 else [local]
        rows = [r for part in every for r in part.samples]
        if not self.openings:
            self.openings = usual_openings(r.response for r in rows)
            if self.openings_path and trainer.accelerator.is_main_process:
                with open(self.openings_path, "w", encoding="utf-8") as f:
                    json.dump(list(self.openings), f)
        metrics = rollout_metrics(rows, [g for part in every for g in part.groups],
                                  [b for part in every for b in part.best], self.openings)
        wall = max(part.wall_s for part in every)
        gen = max(part.gen_s for part in every)
        tokens = sum(r.tokens for r in rows)
        evaluated = sum(1 for r in rows if r.status != "format_error")
        metrics.update({"perf/rollout_s": wall, "perf/generate_s": gen,
                        "perf/generate_tokens_per_s": tokens / max(1e-9, sum(p.gen_s for p in every)),
                        "perf/eval_wait_share": max(0.0, wall - gen) / wall if wall > 0 else 0.0,
                        "perf/evaluations_per_s": evaluated / wall if wall > 0 else 0.0,
                        "perf/samples": float(len(rows))})
        submitted = sum(p.submitted for p in every)
        if submitted:
            metrics["perf/reused_evaluations_share"] = sum(p.reused for p in every) / submitted
            metrics["perf/remeasured_evaluations"] = float(sum(p.remeasured for p in every))
        for k, v in metrics.items():
            self.metrics.record(k, v)


@dataclass(frozen=True)
class SampleRow:
    """What a step's metrics read of one training sample."""

    score: float | None
    """The turn's score under the run's reward settings; None for a harness error (no verdict)."""
    reward: float | None
    """Its discounted return; None when unknown."""
    advantage: float
    status: str
    turn_index: int
    tokens: int
    """Completion tokens."""
    finish_reason: str
    response: str
    repetition_rate: float


@dataclass(frozen=True)
class RankBatch:
    """One process's share of a batch, as every process sends it to the others (`gather_object`)."""

    samples: list[SampleRow]
    groups: list[list[float]]
    """Each group's known rewards."""
    best: list[float]
    """Each trajectory's best score."""
    wall_s: float
    gen_s: float
    reused: int
    submitted: int
    remeasured: int


def rollout_metrics(rows: Sequence[SampleRow], groups: Sequence[Sequence[float]], best: Sequence[float],
                    openings: Sequence[str]) -> dict[str, float]:
    """reward/ and rollout/ of one batch from its samples' rows; `groups` holds each group's known rewards."""
    n = max(1, len(rows))
    scores = [r.score for r in rows if r.score is not None] or [0.0]
    rewards = [r.reward for r in rows if r.reward is not None] or [0.0]
    advs = [r.advantage for r in rows]
    adv_mean = sum(advs) / n
    m: dict[str, float] = {
        "reward/mean_score": sum(scores) / len(scores), "reward/best_score": max(scores),
        "reward/mean_return": sum(rewards) / len(rewards),
        "reward/correct_share": sum(r.status == "correct" for r in rows) / n,
        "reward/trajectory_best_mean": sum(best) / max(1, len(best)),
        "rollout/advantage_mean": adv_mean,
        "rollout/advantage_std": math.sqrt(sum((a - adv_mean) ** 2 for a in advs) / n),
        "rollout/zero_variance_group_share": sum(1 for g in groups if len(set(g)) <= 1) / max(1, len(groups)),
        "rollout/response_tokens_mean": sum(r.tokens for r in rows) / n,
        "rollout/response_tokens_max": float(max((r.tokens for r in rows), default=0)),
        "rollout/truncated_share": sum(r.finish_reason == "length" for r in rows) / n,
        "rollout/opening_departure_share": departing_share([r.response for r in rows], openings),
        "rollout/repetition_rate": sum(r.repetition_rate for r in rows) / n,
    }
    for t in sorted({r.turn_index for r in rows}):
        at = [r.score for r in rows if r.turn_index == t and r.score is not None]
        m[f"reward/turn{t + 1}_mean_score"] = sum(at) / max(1, len(at))
        adv = [r.advantage for r in rows if r.turn_index == t]
        m[f"rollout/turn{t + 1}_advantage_mean"] = sum(adv) / max(1, len(adv))
    shares: dict[str, int] = {}
    for r in rows:
        shares[r.status] = shares.get(r.status, 0) + 1

    for status in (*STATUSES, "harness_error"):
        m[f"rollout/status_{status}"] = shares.get(status, 0) / n
    return m
