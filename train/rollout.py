"""Rollouts for training: the harness-backed multi-turn rollout and the evaluator wrapper it submits to.

A rollout runs on the trainer's current weights inside TRL's generation step (train/grpo.py), so every
batch is on-policy. Inside one batch the episode runner overlaps evaluation with generation: a trajectory's
next turn is generated as soon as its own evaluation returns, while other kernels compile and run.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol, Sequence

from agent.episode import EpisodeRunner, Job
from agent.policy import Policy, SamplingConfig
from agent.prompts import PromptSettings
from agent.trajectory import Trajectory
from kernelbench.harness.evaluate import INFORMATIONAL_FLAGS
from kernelbench.tasks.task import Task


class Rollout(Protocol):
    """Produces one batch of trajectories for the given tasks with the given policy."""

    def collect(self, policy: Policy, tasks: Sequence[Task], step: int, seed: int) -> list[Trajectory]:
        """`trajectories` trajectories per entry of `tasks`, in that order (entry k's are [k·N, (k+1)·N)); a
        task listed twice gets two separate sets of trajectories."""
        ...


@dataclass
class HarnessRollout:
    """N trajectories × T turns per task through `agent.episode` and the real evaluation harness."""

    evaluator: Any
    trajectories: int
    turns: int
    sampling: SamplingConfig
    prompt_settings: PromptSettings
    score: Callable[[Any], float | None]
    """Verdict -> score under the run's reward settings (`rewards.ScoreConfig.score`; `train.multiturn_rollout.scoring_of`)."""
    log_dir: str = ""
    """Each step's trajectories go to `log_dir/step_NNNNNN[-rank].jsonl` (a resumed step reuses finished ones)."""
    rank: int = 0
    """Process index; ranks above 0 log to their own file."""
    streaming: bool = True
    """Streamed turns (`TrainConfig.streaming_turns`; `agent.episode.EpisodeRunner`)."""

    def collect(self, policy: Policy, tasks: Sequence[Task], step: int, seed: int) -> list[Trajectory]:
        suffix = f"-{self.rank}" if self.rank else ""
        log_path = f"{self.log_dir}/step_{step:06d}{suffix}.jsonl" if self.log_dir else ""
        runner = EpisodeRunner(policy, self.evaluator, turns=self.turns, sampling=replace(self.sampling, seed=seed),
                               prompt_settings=self.prompt_settings, log_path=log_path, score=self.score,
                               streaming=self.streaming)
        # traj_id `k/i`: trajectory i of the batch's k-th task slot, so a task drawn twice stays two groups.
        return runner.run(Job(task=t, traj_id=f"{k}/{i}") for k, t in enumerate(tasks) for i in range(self.trajectories))


NOISY_FLAGS = frozenset({"timing_inconsistent", "dynamic:parallel_work"})
"""Flags judged from timing measurements a loaded machine can disturb (`paired.unaccounted`,
`paired.parallel_work`). A verdict resting on them alone is not reused for an identical later text: one such
false rejection of an honest kernel (the cpu-tiny demo's fast answer, under the trainer's load) was served as
the reward of every later sample of it, and the run never learned the faster kernel."""


def noisy_rejection(result: Any) -> bool:
    """A rejection whose every flag, the informational ones aside (`evaluate.INFORMATIONAL_FLAGS`), is a
    timing-noise one (`NOISY_FLAGS`). Why aside: since a paired timing whose one fault is unaccounted time is timed
    again, a rejection the second timing confirmed reads `timing_inconsistent, retimed`; read as a rejection with
    another flag it was reused, and in one cpu-tiny run a single such verdict on a slow answer was served to 16
    samples, unmeasured again."""
    flags = set(getattr(result, "flags", ()) or ()) - INFORMATIONAL_FLAGS
    return getattr(result, "status", "") == "rejected" and bool(flags) and flags <= NOISY_FLAGS


class ReusingEvaluator:
    """Wraps an evaluator: the first submission of a (task, candidate text) is evaluated, identical later
    ones share its Future (see `TrainConfig.reuse_identical_results`), except after a rejection on timing
    noise alone (`NOISY_FLAGS`): that text is measured again and the new verdict is the one shared from then
    on. Counts what it reused and what it measured again."""

    def __init__(self, inner: Any, noisy_retries: int = 0):
        self.inner = inner
        self.noisy_retries = noisy_retries
        self._count_lock = threading.Lock()
        """Measure a text rejected on timing noise alone this many more times at once (`TrainConfig.noisy_retries`)."""
        self.config = getattr(inner, "config", None)
        self._seen: dict[tuple[str, str], Future] = {}
        self._lock = threading.Lock()
        self.submitted = 0
        self.reused = 0
        self.remeasured = 0

    def submit(self, task: Task, src: str, group: str = "") -> Future:
        """A new Future per call (callers key their bookkeeping by Future), resolved from the shared one;
        `group` goes with the first submission of a text (a reused verdict was measured in its own group)."""
        key = (task.id, src)
        with self._lock:
            self.submitted += 1
            shared = self._seen.get(key)
            again = (shared is not None and shared.done() and shared.exception() is None
                     and noisy_rejection(shared.result()))
            if shared is None or again:
                shared = self._seen[key] = self._measured(task, src, group)
                self.remeasured += again
            else:
                self.reused += 1
        mine: Future = Future()

        def _copy(f: Future) -> None:
            if f.exception() is not None:
                mine.set_exception(f.exception())
            else:
                mine.set_result(f.result())

        shared.add_done_callback(_copy)
        return mine

    def _measured(self, task: Task, src: str, group: str) -> Future:
        """The inner evaluator's verdict, measured again up to `noisy_retries` times while it is a rejection on
        timing noise alone; the Future resolves with the last."""
        if not self.noisy_retries:
            return self.inner.submit(task, src, group=group)
        out: Future = Future()
        left = [self.noisy_retries]

        def _done(f: Future) -> None:
            if f.exception() is None and noisy_rejection(f.result()) and left[0] > 0:
                left[0] -= 1
                with self._count_lock:  # not `_lock`: `submit` holds it when an inner Future is already done
                    self.remeasured += 1
                self.inner.submit(task, src, group=group).add_done_callback(_done)
            elif f.exception() is not None:
                out.set_exception(f.exception())
            else:
                out.set_result(f.result())

        self.inner.submit(task, src, group=group).add_done_callback(_done)
        return out

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close:
            close()
