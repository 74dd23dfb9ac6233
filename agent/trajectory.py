"""A trajectory's records (`Turn`, `Trajectory`) and their JSONL log: appended one finished trajectory at a time
and fsynced, so a crash loses at most what was in flight (`agent.episode` writes it; SFT, the pipeline's stats
and bench's resume read it)."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Iterator

from agent.policy import Conversation
from agent.prompts import Attempt
from kernelbench.harness.result import CORRECT, EvalResult

log = logging.getLogger(__name__)


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
            except ValueError:  # torn by a crash mid-write: the trajectory it held runs again
                log.warning("%s:%d: a torn write (not JSON), skipped", path, number)
                continue
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
