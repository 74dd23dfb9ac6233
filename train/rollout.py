"""Rollouts for training: the harness-backed multi-turn rollout, and the producer that runs it ahead of
the trainer within a staleness bound.

Staleness (stated exactly): the trainer's weights after b updates are version b. Batch b is generated and
evaluated with version max(0, b − max_staleness). With max_staleness = 1, batch b+1 is generated and
evaluated (compiles, correctness, timing) while the trainer updates on batch b; the rollout weights are
then one optimizer step behind, and the loss's importance-sampling weight π_old / π_rollout corrects for it.
With 0 every batch is on-policy and nothing overlaps across batches. Inside one batch the episode runner
already overlaps one task's evaluations with the next task's generation. The version a batch uses is
fixed, not "whatever is newest", so a run is reproducible and resumable.
"""

from __future__ import annotations

import copy
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol, Sequence

from agent.episode import EpisodeRunner, Job, Trajectory
from agent.policy import Policy, SamplingConfig
from agent.prompts import PromptSettings
from kernelbench.task import Task


class Rollout(Protocol):
    """Produces one batch of trajectories for the given tasks with the given policy."""

    def collect(self, policy: Policy, tasks: Sequence[Task], step: int, seed: int) -> list[Trajectory]: ...


@dataclass
class HarnessRollout:
    """N trajectories × T turns per task through `agent.episode` and the real evaluation harness."""

    evaluator: Any
    trajectories: int
    turns: int
    sampling: SamplingConfig
    prompt_settings: PromptSettings
    log_dir: str = ""
    """Each step's trajectories go to `log_dir/step_NNNNNN.jsonl` (a resumed step reuses finished ones)."""

    def collect(self, policy: Policy, tasks: Sequence[Task], step: int, seed: int) -> list[Trajectory]:
        log_path = f"{self.log_dir}/step_{step:06d}.jsonl" if self.log_dir else ""
        runner = EpisodeRunner(policy, self.evaluator, turns=self.turns, sampling=replace(self.sampling, seed=seed),
                               prompt_settings=self.prompt_settings, log_path=log_path)
        return runner.run(Job(task=t, traj_id=str(i)) for t in tasks for i in range(self.trajectories))


class PoolEvaluator:
    """`submit(task, src) -> Future[EvalResult]` over `kernelbench.evaluate` in a thread pool; used when
    `kernelbench.evaluator.Evaluator` (separate compile and run pools) is not available."""

    def __init__(self, config: Any, workers: int = 2):
        from kernelbench.evaluate import evaluate

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
    """The harness's evaluator for `executor` (`kernelbench.executor`: local threads or Ray actors), else
    `PoolEvaluator` when the harness's own is absent."""
    try:
        from kernelbench.executor import make_evaluator as make
    except ImportError:
        return PoolEvaluator(eval_config, workers=max(compile_workers, run_workers))
    return make(eval_config, executor=executor, ray_address=ray_address, compile_workers=compile_workers,
                run_workers=run_workers, max_in_flight=max_in_flight)


@dataclass(frozen=True)
class RolloutBatch:
    step: int
    weights_version: int
    trajectories: list[Trajectory]
    wall_s: float
    """Wall time of the rollout (generation and evaluation, overlapped)."""


class RolloutProducer:
    """Runs `rollout.collect` for steps start..end−1, each with the weights of version max(0, step − staleness).

    The trainer calls `publish(version, weights)` after each update and `get(step)` for the next batch.
    With staleness 0 everything runs in the caller's thread on the trainer's own model.
    """

    def __init__(self, rollout: Rollout, policy: Policy, tasks_for_step: Callable[[int], list[Task]],
                 seed_for_step: Callable[[int], int], *, staleness: int, start: int, end: int,
                 load_weights: Callable[[dict], None] | None = None):
        self.rollout, self.policy = rollout, policy
        self.tasks_for_step, self.seed_for_step = tasks_for_step, seed_for_step
        self.staleness, self.start, self.end = staleness, start, end
        self.load_weights = load_weights
        self.versions: dict[int, dict] = {}
        self.batches: dict[int, RolloutBatch] = {}
        self.error: BaseException | None = None
        self.cond = threading.Condition()
        self.thread: threading.Thread | None = None
        self.stopped = False

    def version_for(self, step: int) -> int:
        return max(0, step - self.staleness)

    def publish(self, version: int, weights: dict | None) -> None:
        """Make `weights` (trainer version `version`) available; drop versions no future batch needs."""
        with self.cond:
            if weights is not None:
                self.versions[version] = weights
            self.cond.notify_all()

    def weights_of(self, version: int) -> dict | None:
        with self.cond:
            return self.versions.get(version)

    def _run_one(self, step: int) -> RolloutBatch:
        version = self.version_for(step)
        if self.load_weights is not None:
            with self.cond:
                self.cond.wait_for(lambda: version in self.versions or self.stopped)
                if self.stopped:
                    raise RuntimeError("producer stopped")
                weights = self.versions[version]
                for v in [v for v in self.versions if v < version]:
                    del self.versions[v]
            self.load_weights(weights)
        t0 = time.perf_counter()
        trajs = self.rollout.collect(self.policy, self.tasks_for_step(step), step, self.seed_for_step(step))
        return RolloutBatch(step=step, weights_version=version, trajectories=trajs, wall_s=time.perf_counter() - t0)

    def _loop(self) -> None:
        try:
            for step in range(self.start, self.end):
                batch = self._run_one(step)
                with self.cond:
                    self.batches[step] = batch
                    self.cond.notify_all()
                    # Never run more than `staleness` batches ahead of the trainer.
                    self.cond.wait_for(lambda: self.stopped or len(self.batches) < max(1, self.staleness))
                    if self.stopped:
                        return
        except BaseException as e:  # surfaced to the trainer by get()
            with self.cond:
                self.error = e
                self.cond.notify_all()

    def get(self, step: int) -> RolloutBatch:
        if self.staleness == 0:
            return self._run_one(step)
        if self.thread is None:
            self.thread = threading.Thread(target=self._loop, name="rollout", daemon=True)
            self.thread.start()
        with self.cond:
            self.cond.wait_for(lambda: step in self.batches or self.error is not None)
            if step not in self.batches:
                raise RuntimeError("rollout producer failed") from self.error
            batch = self.batches.pop(step)
            self.cond.notify_all()
            return batch

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
        if self.thread is not None:
            self.thread.join(timeout=600)


def rollout_copy(model: Any) -> Any:
    """A separate copy of the trainer's model for an overlapped HF rollout (the trainer keeps updating its own)."""
    clone = copy.deepcopy(model)
    clone.eval()
    for p in clone.parameters():
        p.requires_grad_(False)
    return clone


def vllm_load_weights(policy: Any, weights: dict) -> None:
    """Push trainer weights into a vLLM engine (GPU only): each worker loads them into its model runner."""
    items = list(weights.items())

    def _load(worker: Any) -> None:
        worker.model_runner.model.load_weights(weights=items)

    policy.llm.collective_rpc(_load)
