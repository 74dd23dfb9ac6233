"""A synthetic multi-turn environment for the GRPO tests: a tiny model, a reward on generated tokens, no harness.

The reward of a response is the share of its tokens whose id lies in the lower half of the vocabulary: a
random policy scores ~0.5 and the GRPO update, if it works, pushes the score up within a few steps.
"""

from __future__ import annotations

from typing import Sequence

from agent.policy import SamplingConfig
from agent.trajectory import Trajectory, Turn
from kernelbench.harness.result import CORRECT, EvalResult

TEXTS = ["the quick brown fox jumps over the lazy dog", "kernels make tensors fast", "import torch\nx = y + 1",
         "def forward(self, x):\n    return x * 2"] * 8


def build_tiny_dir(path: str, hidden: int = 32, layers: int = 1, seed: int = 0) -> str:
    from train.tiny_model import TinyModelConfig, build_tiny

    model, tok = build_tiny(TEXTS, TinyModelConfig(vocab_size=300, hidden_size=hidden, num_layers=layers,
                                                   num_heads=2, num_kv_heads=1, intermediate_size=2 * hidden, seed=seed))
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


class LowIdRollout:
    """`turns` turns per trajectory; turn t+1's prompt holds turn t's answer; score = share of low token ids."""

    def __init__(self, vocab: int, trajectories: int, turns: int, max_tokens: int,
                 harness_error_at: tuple[int, int] | None = None):
        self.vocab, self.trajectories, self.turns, self.max_tokens = vocab, trajectories, turns, max_tokens
        self.harness_error_at = harness_error_at
        """(trajectory, turn) of every task whose verdict is a harness failure (status `harness_error`)."""

    def score(self, ids: Sequence[int]) -> float:
        return sum(1 for i in ids if i < self.vocab // 2) / max(1, len(ids))

    def collect(self, policy, tasks, step, seed):
        trajs = []
        for k, task in enumerate(tasks):
            convs = [[{"role": "user", "content": "write"}] for _ in range(self.trajectories)]
            turns: list[list[Turn]] = [[] for _ in convs]
            for t in range(self.turns):
                outs = policy.generate(convs, SamplingConfig(temperature=1.0, max_tokens=self.max_tokens,
                                                             seed=seed + 100 * t + 7919 * k))
                for i, c in enumerate(outs):
                    s = self.score(c.token_ids)
                    # A correct verdict whose "speedup" is the low-id share: its score is 0.3 + s.
                    result, score = EvalResult(status=CORRECT, correct=True, speedup=s), 0.3 + s
                    if self.harness_error_at == (i, t):  # scored None, as `rewards.ScoreConfig.score` scores it
                        result, score = EvalResult(status="harness_error", feedback="the harness failed"), None
                    turns[i].append(Turn(index=t, prompt=convs[i], response=c.text, reasoning="", summary="",
                                         candidate="", result=result, score=score, token_ids=c.token_ids,
                                         logprobs=c.logprobs, finish_reason=c.finish_reason, generate_s=c.generate_s,
                                         prompt_token_ids=c.prompt_token_ids))
                    convs[i] = convs[i] + [{"role": "assistant", "content": c.text}, {"role": "user", "content": "again"}]
            trajs += [Trajectory(task_id=task.id, traj_id=str(i), turns=tuple(ts)) for i, ts in enumerate(turns)]
        return trajs
