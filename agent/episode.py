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

import json
import logging
import os
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Iterator, Protocol

from agent.parsing import format_error_result, parse_response
from agent.policy import Completion, Conversation, Policy, SamplingConfig
from agent.prompts import Attempt, PromptSettings, build_messages
from kernelbench.harness.result import CORRECT, EvalResult
from kernelbench.tasks.task import Task

log = logging.getLogger(__name__)


class SubmitsEvaluations(Protocol):
    """What the runner needs of an evaluator (`kernelbench.executors.evaluator.Evaluator` is one)."""

    def submit(self, task: Task, candidate_src: str, group: str = "") -> Future: ...


@dataclass(frozen=True)
class Turn:
    """One answer of one trajectory and the harness's verdict on it (one training sample)."""

    index: int
    """Position in the trajectory, from 0 (inherited turns of a beam-search parent included)."""
    prompt: Conversation
    response: str
    """The answer as generated (inline `<think>` blocks included: the tokens the policy produced)."""
    reasoning: str
    """Reasoning returned in a separate API field, kept for the record and never re-sent."""
    summary: str
    candidate: str
    """The solution file submitted, empty when the answer had none (format_error)."""
    result: EvalResult
    score: float | None
    """Per-kernel score of the verdict under the run's reward settings (`rewards.ScoreConfig`; DESIGN.md:
    correctness_weight·correct + speedup·correct); None for a `harness_error` (no verdict on the kernel)."""
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    finish_reason: str = ""
    generate_s: float = 0.0
    """Wall time of the batched policy call that produced this answer."""
    prompt_token_ids: tuple[int, ...] = ()
    """The prompt's token ids as the policy encoded them (empty when the backend gives none)."""
    prompt_tokens: int = 0
    """Prompt tokens of this turn's policy call (0 when the backend could not count them)."""
    completion_tokens: int = 0
    """Tokens the policy generated for this answer, reasoning included."""
    reasoning_tokens: int = 0
    """Of `completion_tokens`, those spent reasoning."""

    def attempt(self) -> Attempt:
        return Attempt(code=self.candidate, summary=self.summary, status=self.result.status,
                       feedback=self.result.feedback)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "prompt": self.prompt, "response": self.response,
                "reasoning": self.reasoning, "summary": self.summary, "candidate": self.candidate,
                "result": self.result.to_dict(), "score": self.score, "token_ids": list(self.token_ids),
                "logprobs": list(self.logprobs), "finish_reason": self.finish_reason,
                "generate_s": self.generate_s, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "reasoning_tokens": self.reasoning_tokens,
                "prompt_token_ids": list(self.prompt_token_ids)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Turn":
        return cls(index=d["index"], prompt=d["prompt"], response=d["response"], reasoning=d.get("reasoning", ""),
                   summary=d["summary"], candidate=d["candidate"], result=EvalResult.from_dict(d["result"]),
                   score=d["score"], token_ids=tuple(d.get("token_ids", ())), logprobs=tuple(d.get("logprobs", ())),
                   finish_reason=d.get("finish_reason", ""), generate_s=d.get("generate_s", 0.0),
                   prompt_tokens=d.get("prompt_tokens", 0), completion_tokens=d.get("completion_tokens", 0),
                   reasoning_tokens=d.get("reasoning_tokens", 0),
                   prompt_token_ids=tuple(d.get("prompt_token_ids", ())))


@dataclass(frozen=True)
class Trajectory:
    """The turns of one refinement chain on one task."""

    task_id: str
    traj_id: str
    """Unique within the task: `3` (parallel), `r1/3` (beam round 1, slot 3)."""
    turns: tuple[Turn, ...]
    inherited_turns: int = 0
    """Leading turns copied from a beam-search parent (context only: not new samples)."""
    parent: str = ""
    """traj_id of the beam-search parent, empty for a fresh trajectory."""
    round: int = 0

    @property
    def new_turns(self) -> tuple[Turn, ...]:
        return self.turns[self.inherited_turns:]

    @property
    def best_score(self) -> float:
        """The best scored turn; a turn the harness failed on (score None: no verdict on the kernel) is left
        out, and a trajectory with no scored turn is worth 0."""
        return max((t.score for t in self.turns if t.score is not None), default=0.0)

    @property
    def correct(self) -> bool:
        return any(t.result.status == CORRECT for t in self.turns)

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "traj_id": self.traj_id, "inherited_turns": self.inherited_turns,
                "parent": self.parent, "round": self.round, "turns": [t.to_dict() for t in self.turns]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trajectory":
        return cls(task_id=d["task_id"], traj_id=d["traj_id"], turns=tuple(Turn.from_dict(t) for t in d["turns"]),
                   inherited_turns=d.get("inherited_turns", 0), parent=d.get("parent", ""), round=d.get("round", 0))


def read_trajectories(path: str) -> Iterator[Trajectory]:
    """The trajectories of a JSONL log in order. A line that is not JSON is a write a crash tore (the log's next
    append starts a new line after it: `TrajectoryLog.append`) and is skipped; a JSON line that is not a
    trajectory is an error naming the file and line, never a record dropped in silence."""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError:
                continue  # torn by a crash mid-write
            try:
                yield Trajectory.from_dict(data)
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{path}:{number}: not a trajectory record: {type(e).__name__}: {e}") from None


class TrajectoryLog:
    """Append-only JSONL of finished trajectories; the resume point of an interrupted run."""

    def __init__(self, path: str):
        self.path = path
        if os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)

    def load(self) -> dict[tuple[str, str], Trajectory]:
        """Finished trajectories by (task_id, traj_id); a torn last line from a crash is ignored."""
        done: dict[tuple[str, str], Trajectory] = {}
        if not os.path.exists(self.path):
            return done
        for traj in read_trajectories(self.path):
            done[(traj.task_id, traj.traj_id)] = traj
        return done

    def append(self, traj: Trajectory) -> None:
        with open(self.path, "a+b") as f:
            torn = False
            if f.seek(0, os.SEEK_END) > 0:
                f.seek(-1, os.SEEK_END)
                torn = f.read(1) != b"\n"
            # A line torn by a crash is closed off so that it cannot swallow the next record.
            f.write((b"\n" if torn else b"") + json.dumps(traj.to_dict()).encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())


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
                 prompt_settings: PromptSettings, log_path: str = "", on_turn: TurnCallback | None = None,
                 score: Callable[[EvalResult], float | None] | None = None, streaming: bool = True):
        from rewards.score import ScoreConfig

        self.score = score or ScoreConfig().score
        """Verdict -> per-kernel score (the run's reward settings; never the harness's own number)."""
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
