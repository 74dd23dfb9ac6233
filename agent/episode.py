"""Multi-turn episodes: N trajectories x T turns per task, generation batched, evaluation overlapped.

Each answer is parsed and its kernel submitted to the evaluator at once. Turns stream: a trajectory's next
turn is generated as soon as its own verdict is back, batched with whatever other prompts are ready then
(other trajectories of its task, other tasks, other turns), so one slow compile holds only its own
trajectory and the policy works while the harness does. Every prompt draws with a seed of its own, fixed by
(task, trajectory, turn), so a repeated run samples the same answers whichever calls its prompts land in
(where the backend honours per-prompt seeds: `agent.policy.SamplingConfig.seeds`). `streaming=False` keeps
the earlier lockstep schedule (Kevin-32B's rollout shape, arXiv 2507.11948): one policy call per task and
turn, the next when all the task's verdicts of that turn are back. A finished trajectory is appended to a
JSONL log straight away: a crash loses at most the trajectories in flight, and a rerun skips every
(task, trajectory) pair already logged.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Protocol

from agent.parsing import format_error_result, parse_response
from agent.policy import Completion, Conversation, Policy, SamplingConfig
from agent.prompts import PromptSettings, build_messages
from agent.trajectory import Trajectory, TrajectoryLog, Turn
from kernelbench.harness.result import EvalResult
from kernelbench.tasks.task import Task

# Imports inside functions: the evaluator imports torch; the episode's records load without it (`agent.strategies`,
# `evals.runner`, `train.rollout` import this module at their top).

log = logging.getLogger(__name__)


class SubmitsEvaluations(Protocol):
    """What the runner needs of an evaluator (`kernelbench.executors.evaluator.Evaluator` is one)."""

    def submit(self, task: Task, candidate_src: str, group: str = "") -> Future: ...


@dataclass(frozen=True)
class Job:
    """One trajectory to run: fresh (no history) or continuing a beam-search parent's turns."""

    task: Task
    traj_id: str
    history: tuple[Turn, ...] = ()
    parent: str = ""
    round: int = 0


SEED_SLOTS = 10_000
"""Trajectories per task a run may hold: the radix of the trajectory in `EpisodeRunner.prompt_seed`."""
SEED_GROUPS = 1_000_000
"""Tasks a run may hold: the radix of the task in `EpisodeRunner.prompt_seed`."""


@dataclass
class _Group:
    """One task of the run and its trajectories in flight."""

    task: Task
    ordinal: int
    """Position of the task among the run's tasks in job order (logged jobs included): part of its seeds."""
    size: int = 0
    """The task's jobs seen so far, logged ones included (a slot's `index` is the count before it)."""
    slots: list["_Slot"] = field(default_factory=list)
    waiting: int = 0
    """Lockstep only: verdicts of the current turn not back yet."""


@dataclass(frozen=True)
class _Answer:
    """A generated answer waiting for its verdict."""

    prompt: Conversation
    completion: Completion
    summary: str
    candidate: str


@dataclass
class _Slot:
    """One trajectory in flight."""

    job: Job
    group: _Group
    index: int
    """Position among its task's jobs in job order (logged jobs included): part of its seeds."""
    turns: list[Turn]
    pending: _Answer | None = None
    """The answer generated for its next turn, until its verdict is recorded."""


@dataclass
class _Run:
    """The state of one `EpisodeRunner.run`."""

    ready: deque = field(default_factory=deque)
    """Slots whose next turn can be generated, in the order they became ready."""
    in_flight: dict = field(default_factory=dict)
    """Future of an evaluation -> its slot, in submission order."""
    finished: dict = field(default_factory=dict)
    """(task_id, traj_id) -> Trajectory."""
    token: str = field(default_factory=lambda: os.urandom(6).hex())
    """Names this run's evaluation groups: one per task and turn (`Evaluator.submit`'s `group`, one reference)."""


TurnCallback = Callable[[Task, str, Turn], None]


class EpisodeRunner:
    """Runs jobs to `turns` new turns each with one policy and one evaluator."""

    def __init__(self, policy: Policy, evaluator: SubmitsEvaluations, *, turns: int, sampling: SamplingConfig,
                 prompt_settings: PromptSettings, score: Callable[[EvalResult], float | None], log_path: str = "",
                 on_turn: TurnCallback | None = None, streaming: bool = True):
        self.score = score
        """Verdict -> per-kernel score: `rewards.ScoreConfig.score` under the run's reward settings, passed by
        every caller (no default here, so no run scores at settings other than its own)."""
        self.policy = policy
        self.evaluator = evaluator
        self.turns = turns
        self.sampling = sampling
        self.prompt_settings = prompt_settings
        self.log = TrajectoryLog(log_path) if log_path else None
        self.on_turn = on_turn
        self.count_tokens = getattr(policy, "count_tokens", None)
        self.streaming = streaming
        """True: a trajectory's next turn is generated as soon as its own verdict is back, in a call with
        whatever other prompts are ready. False (lockstep, the earlier schedule): a task's trajectories
        advance turn by turn together, one policy call per task and turn, so the slowest evaluation of a
        turn holds the task's other trajectories."""
        self.chunk = int(getattr(policy, "batch_size", 0) or 0)
        """Most prompts per streamed call: a backend that generates in chunks of this size (hf) would
        otherwise hold a first chunk's kernels back until its last chunk is done; 0: no bound."""

    def run(self, jobs: Iterable[Job]) -> list[Trajectory]:
        """Run every job not already in the log; return all of them (logged ones as loaded), in job order."""
        jobs = list(jobs)
        keys = [(job.task.id, job.traj_id) for job in jobs]
        if len(set(keys)) != len(keys):
            # Trajectories are keyed by (task, traj_id): a repeat would overwrite another trajectory and
            # hand its result back twice (a task drawn twice in one batch needs distinct traj_ids).
            dup = next(k for k in keys if keys.count(k) > 1)
            raise ValueError(f"two jobs share task {dup[0]!r} and trajectory id {dup[1]!r}")
        done = self.log.load() if self.log else {}
        state = _Run()
        groups: dict[str, _Group] = {}
        for job, key in zip(jobs, keys):
            group = groups.setdefault(job.task.id, _Group(task=job.task, ordinal=len(groups)))
            slot = _Slot(job=job, group=group, index=group.size, turns=list(job.history))
            group.size += 1
            if key in done:
                state.finished[key] = done[key]
            elif self.turns <= 0:
                self._finish(slot, state)
            else:
                group.slots.append(slot)
        if len(groups) > SEED_GROUPS or any(g.size > SEED_SLOTS for g in groups.values()):
            raise ValueError(f"a run holds at most {SEED_GROUPS} tasks of at most {SEED_SLOTS} trajectories "
                             "each (their sampling seeds would repeat)")
        for group in groups.values():
            state.ready.extend(group.slots)
        while state.ready or state.in_flight:
            if state.ready:
                self._generate(self._take(state.ready), state)
            self._collect(state, block=not state.ready)
        return [state.finished[key] for key in keys]

    def _take(self, ready: deque) -> list[_Slot]:
        """The slots of the next policy call: streaming, every ready one (at most `chunk`); lockstep, the
        first ready task's, which became ready together."""
        if self.streaming:
            n = min(len(ready), self.chunk) if self.chunk else len(ready)
        else:
            group = ready[0].group
            n = next((i for i, s in enumerate(ready) if s.group is not group), len(ready))
        return [ready.popleft() for _ in range(n)]

    def _generate(self, batch: list[_Slot], state: _Run) -> None:
        prompts = [build_messages(s.group.task.shown_source, [t.attempt() for t in s.turns], self.prompt_settings,
                                  self.count_tokens) for s in batch]
        seeds = tuple(self.prompt_seed(s.group.ordinal, s.index, len(s.turns)) for s in batch)
        # `seed` too: a backend that reads only `seed + i` still gets seeds that differ from call to call.
        completions = self.policy.generate(prompts, replace(self.sampling, seed=seeds[0], seeds=seeds))
        if len(completions) != len(prompts):
            raise RuntimeError(f"policy returned {len(completions)} completions for {len(prompts)} prompts")
        if not self.streaming:
            batch[0].group.waiting = len(batch)
        for slot, prompt, completion in zip(batch, prompts, completions):
            parsed = parse_response(completion.text)
            slot.pending = _Answer(prompt, completion, parsed.summary, parsed.code)
            if parsed.ok:
                # Submitted as soon as it is parsed: compiles start while the rest are still parsed and
                # while other prompts generate.
                group = f"{state.token}/{slot.group.ordinal}/{len(slot.turns)}"  # the task's answers at this turn
                state.in_flight[self.evaluator.submit(slot.group.task, parsed.code, group=group)] = slot
            else:  # nothing to evaluate: recorded now, and (streaming) its next turn is ready at once
                self._record(slot, format_error_result(parsed), state)

    def prompt_seed(self, group: int, slot: int, turn: int) -> int:
        """The sampling seed of one prompt: trajectory `slot` (its position among the task's jobs) of the
        run's `group`-th task, at `turn` (its index in the trajectory, inherited turns included). One per
        prompt rather than one per call because a streamed call holds whatever is ready, which depends on
        timing: distinct for every (group, slot, turn) of a run (within `SEED_GROUPS` and `SEED_SLOTS`),
        and the same when the run is repeated or resumed, whichever call the prompt lands in."""
        return self.sampling.seed + slot + SEED_SLOTS * (group + SEED_GROUPS * turn)

    def _collect(self, state: _Run, *, block: bool) -> None:
        if not state.in_flight:
            return
        done, _ = wait(list(state.in_flight), timeout=None if block else 0, return_when=FIRST_COMPLETED)
        for fut in [f for f in state.in_flight if f in done]:  # submission order: the same run, the same calls
            self._record(state.in_flight.pop(fut), _result_of(fut), state)

    def _record(self, slot: _Slot, result: EvalResult, state: _Run) -> None:
        p = slot.pending
        if p is None:
            raise RuntimeError(f"a verdict for trajectory {slot.job.traj_id} arrived with no answer waiting for it")
        completion = p.completion
        turn = Turn(index=len(slot.turns), prompt=p.prompt, response=completion.text,
                    reasoning=completion.reasoning, summary=p.summary, candidate=p.candidate, result=result,
                    score=self.score(result), token_ids=completion.token_ids, logprobs=completion.logprobs,
                    finish_reason=completion.finish_reason, generate_s=completion.generate_s,
                    prompt_token_ids=tuple(getattr(completion, "prompt_token_ids", ()) or ()),
                    prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens,
                    reasoning_tokens=completion.reasoning_tokens)
        slot.turns.append(turn)
        slot.pending = None
        if self.on_turn:
            self.on_turn(slot.group.task, slot.job.traj_id, turn)
        if self.streaming:
            self._advance([slot], state)
            return
        group = slot.group
        group.waiting -= 1
        if group.waiting == 0:
            self._advance(group.slots, state)

    def _advance(self, slots: list[_Slot], state: _Run) -> None:
        """Each slot's next turn is ready, or the slot has all its turns and finishes (its task's group
        finishes with its last slot)."""
        for slot in slots:
            if len(slot.turns) - len(slot.job.history) < self.turns:
                state.ready.append(slot)
            else:
                self._finish(slot, state)

    def _finish(self, slot: _Slot, state: _Run) -> None:
        job = slot.job
        traj = Trajectory(task_id=job.task.id, traj_id=job.traj_id, turns=tuple(slot.turns),
                          inherited_turns=len(job.history), parent=job.parent, round=job.round)
        state.finished[(job.task.id, job.traj_id)] = traj
        if self.log:
            self.log.append(traj)


def _result_of(fut: Future) -> EvalResult:
    """The evaluator's verdict; an evaluator that raised is recorded as a flagged runtime error rather
    than ending a long run (DESIGN.md: faults are results)."""
    from kernelbench.executors.evaluator import HarnessBroken

    try:
        return fut.result()
    except HarnessBroken:  # the judge is broken: the job stops (DESIGN.md, rule 6)
        raise
    except Exception as e:  # the harness itself failed on this candidate: never scored
        log.exception("evaluator raised")
        return EvalResult(status="harness_error",
                          feedback=f"The evaluation harness failed: {type(e).__name__}: {e}"[:500])
