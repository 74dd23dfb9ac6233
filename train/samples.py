"""Trajectories → training samples: one sample per turn, with its return and its task-group advantage.

Kevin-32B (arXiv 2507.11948) trains on every refinement turn: turn t of a trajectory is credited with
`R_t = Σ_{i≥t} γ^(i−t) S_i` and its advantage is R_t normalised over all samples of the same task in the
batch (all trajectories × all turns). Returns and advantages come from `rewards/`; this module only
pairs them with token ids, so the loss sees typed inputs and never recomputes rewards.

Inherited turns of a beam-search parent are context, not samples (they were trained on, if at all, when
they were generated).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from agent.episode import Trajectory
from kernelbench.result import STATUSES
from rewards import advantages_by_task, discounted_returns


@dataclass(frozen=True)
class TurnSample:
    """One turn as the trainer sees it."""

    task_id: str
    traj_id: str
    turn_index: int
    prompt_ids: tuple[int, ...]
    """The rendered prompt (chat template with the assistant header), tokenised."""
    completion_ids: tuple[int, ...]
    """The generated tokens (end-of-turn token included)."""
    rollout_logprobs: tuple[float, ...]
    """Per-token log-probabilities reported by the rollout engine (empty when it gave none)."""
    score: float
    """Per-kernel score of this turn's kernel."""
    ret: float
    """Discounted return R_t of this turn."""
    advantage: float
    """R_t normalised within its task's group."""
    status: str
    """Harness status of this turn's kernel."""


@dataclass(frozen=True)
class MicroBatch:
    """Padded tensors of a few samples: prompts left-padded to width P, completions right-padded to C, so
    every completion starts at column P (the logits of columns P-1 … P+C-2 predict them)."""

    input_ids: torch.Tensor
    """[B, P + C] token ids."""
    attention_mask: torch.Tensor
    """[B, P + C] 1 on real tokens."""
    position_ids: torch.Tensor
    """[B, P + C] positions counted over real tokens only (what generation used)."""
    completion_mask: torch.Tensor
    """[B, C] float, 1 on real completion tokens."""
    completion_ids: torch.Tensor
    """[B, C] the completion tokens (0 on padding)."""
    rollout_logprobs: torch.Tensor
    """[B, C] rollout-engine log-probabilities; NaN where none were reported."""
    advantages: torch.Tensor
    """[B] one advantage per sample, broadcast over its tokens."""
    index: tuple[int, ...]
    """Positions of these samples in the batch's sample list."""


def trajectory_returns(traj: Trajectory, gamma: float, mode: str) -> list[float]:
    """R_t of each new turn (returns see the whole trajectory, inherited turns included)."""
    returns = discounted_returns([t.score for t in traj.turns], gamma=gamma, mode=mode)
    return returns[traj.inherited_turns:]


def build_samples(trajectories: Sequence[Trajectory], encode_prompt: Callable[[Any], list[int]],
                  encode_text: Callable[[str], list[int]], *, gamma: float = 0.4, return_mode: str = "sum",
                  advantage_scale: str = "std") -> list[TurnSample]:
    """Every new turn of every trajectory as a sample, advantages normalised per task.

    `encode_prompt(conversation)` must give the ids the rollout engine saw (the chat template with the
    assistant header); `encode_text` tokenises a response whose ids the backend did not return.
    """
    rows: list[tuple[Trajectory, Any, float]] = []
    for traj in trajectories:
        for turn, ret in zip(traj.new_turns, trajectory_returns(traj, gamma, return_mode)):
            if turn.result.status != "harness_error":  # no verdict on the kernel: never a sample (rule 6)
                rows.append((traj, turn, ret))
    advantages = advantages_by_task([(traj.task_id, ret) for traj, _, ret in rows], scale=advantage_scale)
    cache: dict[str, tuple[int, ...]] = {}
    samples = []
    for (traj, turn, ret), adv in zip(rows, advantages):
        key = repr(turn.prompt)
        if key not in cache:
            cache[key] = tuple(encode_prompt(turn.prompt))
        ids = tuple(turn.token_ids) or tuple(encode_text(turn.response))
        lps = tuple(turn.logprobs) if len(turn.logprobs) == len(ids) else ()
        samples.append(TurnSample(task_id=traj.task_id, traj_id=traj.traj_id, turn_index=turn.index,
                                  prompt_ids=cache[key], completion_ids=ids, rollout_logprobs=lps,
                                  score=turn.score, ret=ret, advantage=adv, status=turn.result.status))
    return samples


def collate(samples: Sequence[TurnSample], index: Sequence[int], pad_id: int) -> MicroBatch:
    """Pad a few samples into one `MicroBatch` (see its docstring for the layout)."""
    chosen = [samples[i] for i in index]
    p_width = max(len(s.prompt_ids) for s in chosen)
    c_width = max(1, max(len(s.completion_ids) for s in chosen))
    n = len(chosen)
    input_ids = torch.full((n, p_width + c_width), pad_id, dtype=torch.long)
    attention = torch.zeros((n, p_width + c_width), dtype=torch.long)
    comp_mask = torch.zeros((n, c_width))
    comp_ids = torch.zeros((n, c_width), dtype=torch.long)
    rollout = torch.full((n, c_width), float("nan"))
    for row, s in enumerate(chosen):
        p, c = len(s.prompt_ids), len(s.completion_ids)
        input_ids[row, p_width - p:p_width] = torch.tensor(s.prompt_ids, dtype=torch.long)
        attention[row, p_width - p:p_width + c] = 1
        if c:
            input_ids[row, p_width:p_width + c] = torch.tensor(s.completion_ids, dtype=torch.long)
            comp_ids[row, :c] = torch.tensor(s.completion_ids, dtype=torch.long)
            comp_mask[row, :c] = 1.0
        if s.rollout_logprobs:
            rollout[row, :c] = torch.tensor(s.rollout_logprobs, dtype=torch.float)
    position_ids = (attention.cumsum(dim=1) - 1).clamp(min=0)
    advantages = torch.tensor([s.advantage for s in chosen], dtype=torch.float)
    return MicroBatch(input_ids=input_ids, attention_mask=attention, position_ids=position_ids,
                      completion_mask=comp_mask, completion_ids=comp_ids, rollout_logprobs=rollout,
                      advantages=advantages, index=tuple(index))


def status_shares(samples: Sequence[TurnSample]) -> dict[str, float]:
    """Share of samples per harness status (every status present, zeros included)."""
    n = max(1, len(samples))
    return {s: sum(1 for x in samples if x.status == s) / n for s in STATUSES}
