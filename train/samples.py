"""Trajectories → training samples: one sample per turn, with its reward (the turn's discounted return).

Kevin-32B (arXiv 2507.11948) trains on every refinement turn: turn t of a trajectory is credited with
`R_t = Σ_{i≥t} γ^(i−t) S_i` and its advantage is R_t normalised over all samples of the same task in the
batch (all trajectories × all turns). Scores and returns come from `rewards/` under the run's settings;
TRL's GRPOTrainer normalises the returns within each group of `num_generations` = trajectories × turns
samples. `advantage` here is the same normalisation computed by `rewards/`, kept for the metrics and for
the test that the trainer's advantages equal ours.

Inherited turns of a beam-search parent are context, not samples (they were trained on, if at all, when
they were generated).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from agent.trajectory import Trajectory
from rewards import ScoreConfig, advantages_by_task, turn_returns
from rewards.score import HARNESS_ERROR, is_harness_error


@dataclass(frozen=True)
class TurnSample:
    """One turn as the trainer sees it."""

    group: int
    """Position of the task's group in the batch (a task drawn twice forms two groups)."""
    task_id: str
    traj_id: str
    turn_index: int
    prompt: tuple[dict[str, str], ...]
    """The turn's context as chat messages (chain of thought already stripped by the prompt builder)."""
    prompt_ids: tuple[int, ...]
    """The rendered prompt (chat template with the assistant header), tokenised as the policy saw it."""
    completion_ids: tuple[int, ...]
    """The generated tokens (end-of-turn token included)."""
    logprobs: tuple[float, ...]
    """Per-token log-probabilities from generation (one per completion token)."""
    score: float | None
    """Per-kernel score of this turn under the run's reward settings; None when the harness failed."""
    reward: float | None
    """Discounted return R_t of this turn (the reward the trainer normalises); None when unknown."""
    advantage: float
    """R_t normalised within its group by `rewards.advantages_by_task` (0 for an unknown reward)."""
    status: str
    """Harness status of this turn's kernel (`harness_error` when the harness failed on it)."""
    finish_reason: str = ""
    response: str = ""


def build_samples(groups: Sequence[Sequence[Trajectory]], encode_prompt, *, scoring: ScoreConfig,
                  gamma: float = 0.4, return_mode: str = "sum", eps: float = 1e-4) -> list[list[TurnSample]]:
    """Every new turn of every trajectory as a sample, per group (one group per task slot of the batch).

    `encode_prompt(conversation)` gives the ids the policy saw when a completion does not carry them.
    Advantages use `eps` = 1e-4 and the sample std, as TRL's GRPOTrainer does.
    """
    out: list[list[TurnSample]] = []
    for g, trajs in enumerate(groups):
        rows = []
        for traj in trajs:
            scores = [scoring.reward(t.result) for t in traj.turns]
            returns = turn_returns(scores, gamma=gamma, mode=return_mode)[traj.inherited_turns:]
            rows += [(traj, turn, r) for turn, r in zip(traj.new_turns, returns)]
        known = [(0, r) for _, _, r in rows if r is not None]
        adv = iter(advantages_by_task(known, eps=eps))
        samples = []
        for traj, turn, r in rows:
            ids = tuple(turn.prompt_token_ids) or tuple(encode_prompt(turn.prompt))
            status = HARNESS_ERROR if is_harness_error(turn.result) else turn.result.status
            samples.append(TurnSample(group=g, task_id=traj.task_id, traj_id=traj.traj_id, turn_index=turn.index,
                                      prompt=tuple(turn.prompt), prompt_ids=ids, completion_ids=tuple(turn.token_ids),
                                      logprobs=tuple(turn.logprobs), score=scoring.reward(turn.result),
                                      reward=r, advantage=0.0 if r is None else next(adv), status=status,
                                      finish_reason=turn.finish_reason, response=turn.response))
        out.append(samples)
    return out
