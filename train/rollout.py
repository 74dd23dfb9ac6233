"""Rollouts for training: the harness-backed multi-turn rollout and the evaluators it submits to.

A rollout runs on the trainer's current weights inside TRL's generation step (train/grpo.py), so every
batch is on-policy. Inside one batch the episode runner overlaps evaluation with generation: a task's
next turn is generated as soon as its evaluations return, while other tasks' kernels compile and run.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol, Sequence

from agent.episode import EpisodeRunner, Job, Trajectory
from agent.policy import Policy, SamplingConfig
from agent.prompts import PromptSettings
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
    log_dir: str = ""
    """Each step's trajectories go to `log_dir/step_NNNNNN[-rank].jsonl` (a resumed step reuses finished ones)."""
    score: Callable[[Any], float] | None = None
    """Verdict -> score under the run's reward settings (`rewards.ScoreConfig.score`)."""
    rank: int = 0
    """Process index; ranks above 0 log to their own file."""

    def collect(self, policy: Policy, tasks: Sequence[Task], step: int, seed: int) -> list[Trajectory]:
        suffix = f"-{self.rank}" if self.rank else ""
        log_path = f"{self.log_dir}/step_{step:06d}{suffix}.jsonl" if self.log_dir else ""
        runner = EpisodeRunner(policy, self.evaluator, turns=self.turns, sampling=replace(self.sampling, seed=seed),
                               prompt_settings=self.prompt_settings, log_path=log_path, score=self.score)
        # traj_id `k/i`: trajectory i of the batch's k-th task slot, so a task drawn twice stays two groups.
        return runner.run(Job(task=t, traj_id=f"{k}/{i}") for k, t in enumerate(tasks) for i in range(self.trajectories))


class PoolEvaluator:
    """`submit(task, src) -> Future[EvalResult]` over `kernelbench.harness.evaluate` in a thread pool; used when
    `kernelbench.executors.evaluator.Evaluator` (separate compile and run pools) is not available."""

    def __init__(self, config: Any, workers: int = 2):
        from kernelbench.harness.evaluate import evaluate

        self._evaluate = evaluate
        self.config = config
        self.pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="eval")

    def submit(self, task: Task, src: str) -> Future:
        return self.pool.submit(self._evaluate, task, src, self.config)

    def close(self) -> None:
        self.pool.shutdown(wait=True)


class ReusingEvaluator:
    """Wraps an evaluator: the first submission of a (task, candidate text) is evaluated, identical later
    ones share its Future (see `TrainConfig.reuse_identical_results`). Counts what it reused."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.config = getattr(inner, "config", None)
        self._seen: dict[tuple[str, str], Future] = {}
        self._lock = threading.Lock()
        self.submitted = 0
        self.reused = 0

    def submit(self, task: Task, src: str) -> Future:
        """A new Future per call (callers key their bookkeeping by Future), resolved from the shared one."""
        key = (task.id, src)
        with self._lock:
            self.submitted += 1
            shared = self._seen.get(key)
            if shared is None:
                shared = self._seen[key] = self.inner.submit(task, src)
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

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close:
            close()


def make_evaluator(eval_config: Any, compile_workers: int, run_workers: int, *, executor: str = "local",
                   ray_address: str = "", max_in_flight: int = 0) -> Any:
    """The harness's evaluator for `executor` (`kernelbench.executors.executor`: local threads or Ray actors), else
    `PoolEvaluator` when the harness's own is absent."""
    try:
        from kernelbench.executors.executor import make_evaluator as make
    except ImportError:
        return PoolEvaluator(eval_config, workers=max(compile_workers, run_workers))
    from kernelbench.executors.executor import ExecutorConfig

    return make(eval_config, ExecutorConfig(kind=executor, ray_address=ray_address, compile_workers=compile_workers,
                                            run_workers=run_workers, max_in_flight=max_in_flight))
