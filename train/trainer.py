"""TRL's `GRPOTrainer`, with what a multi-turn batch needs (a subclass), and the callback that writes one
metrics row per step."""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable

import torch

from kernelbench.config_files import to_dict

from train.config import TrainConfig
from train.metrics_log import MetricsLogger

TRL_RENAMES = {"loss": "loss/policy", "grad_norm": "loss/grad_norm", "learning_rate": "loss/lr",
               "entropy": "loss/entropy", "kl": "loss/kl", "reward": "reward/trl_mean_return",
               "reward_std": "reward/trl_return_std", "frac_reward_zero_std": "rollout/zero_std_group_share_trl"}
"""TRL's log keys in our namespaces (STYLE.md); every other TRL key is kept under `trl/`."""


def make_trainer_class():
    from trl import GRPOTrainer

    class KernelGRPOTrainer(GRPOTrainer):
        """GRPOTrainer whose `rollout_func` sees the batch's rows, and which logs what a multi-turn batch needs.

        Why a subclass: TRL 1.16 passes `rollout_func` only the prompts, not the other dataset columns, and
        the multi-turn rollout needs each row's task id (the prompt is a stand-in; each turn's real context
        is built by the episode). It also records the advantages TRL computed (their share of exact zeros,
        and the test that they equal `rewards/`'s) and the gap between the trainer's and the rollout's
        log-probabilities whenever TRL recomputed old log-probs.

        The project's own metrics (`reward/`, `rollout/`, `perf/`, `eval/`) reach the step's log through `record`
        and `log` (Trainer's public method for what a log row holds), never through TRL's private `_metrics`.
        """

        rollout_inputs: list | None = None
        last_advantages: torch.Tensor | None = None
        recorded: dict[str, list[float]] | None = None
        """The project's metric values since the last training log row (`record`)."""

        def record(self, name: str, value: float) -> None:
            """One value of a metric for the next training log row (several are averaged, as TRL's are)."""
            if self.recorded is None:
                self.recorded = {}
            self.recorded.setdefault(name, []).append(float(value))

        def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
            if self.recorded and self.model.training and "train_runtime" not in logs:
                logs = {**logs, **{k: sum(v) / len(v) for k, v in self.recorded.items()}}
                self.recorded = {}
            super().log(logs, *args, **kwargs)

        def _generate_and_score_completions(self, inputs):
            self.rollout_inputs = inputs
            try:
                out = super()._generate_and_score_completions(inputs)
            finally:
                self.rollout_inputs = None
            adv = out.get("advantages")
            if adv is not None:
                self.last_advantages = adv.detach().cpu()
            old, sampled = out.get("old_per_token_logps"), out.get("sampling_per_token_logps")
            if old is not None and sampled is not None:
                mask = out["completion_mask"].float() * (~torch.isnan(sampled)).float()  # NaN: log-prob unknown
                gap = (torch.nan_to_num(old - sampled).abs() * mask).sum() / mask.sum().clamp(min=1)
                self.record("rollout/logprob_gap_mean", float(self.accelerator.gather(gap.reshape(1)).mean()))
            return out

    return KernelGRPOTrainer


def make_callbacks(config: TrainConfig, out_dir: str, eval_fn: Callable[[Any], None] | None,
                   say: Callable[[str], None] = print):
    from transformers import TrainerCallback

    g = config.grad_steps_per_batch

    class StepMetrics(TrainerCallback):
        """One metrics.jsonl row (and TensorBoard scalars) per step, from the main process only; the run's
        closing summary (TRL's train_runtime etc.) goes to train_summary.json instead of a row."""

        def __init__(self):
            self.logger: MetricsLogger | None = None
            self.last_row_at = time.perf_counter()

        def on_train_begin(self, args, state, control, **kw):
            self.last_row_at = time.perf_counter()
            if state.is_world_process_zero:
                self.logger = MetricsLogger(out_dir, tensorboard=config.tensorboard, trackers=config.trackers,
                                            run_config=to_dict(config))
                self.logger.truncate_after(state.global_step // g - 1)

        def on_step_end(self, args, state, control, **kw):
            if state.global_step >= state.max_steps:
                control.should_save = True  # a checkpoint at the end, whatever checkpoint_every says
            if eval_fn and config.eval_every and state.global_step % (config.eval_every * g) == 0:
                eval_fn(state)

        def on_log(self, args, state, control, logs=None, **kw):
            if self.logger is None or not logs:
                return
            if "train_runtime" in logs:
                with open(os.path.join(out_dir, "train_summary.json"), "w", encoding="utf-8") as f:
                    json.dump(logs, f, indent=1)
                return
            row = {}
            for k, v in logs.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and v is not None:
                    key = k if "/" in k and k.split("/")[0] in ("reward", "rollout", "perf", "loss", "eval") else \
                        TRL_RENAMES.get(k, f"trl/{k}")
                    row[key] = float(v)
            now = time.perf_counter()  # the whole step: sync, rollout, update, and a held-out evaluation if due
            row["perf/step_s"], self.last_row_at = now - self.last_row_at, now
            self.logger.log(state.global_step // g - 1, row)
            say(f"step {state.global_step // g - 1}: score {row.get('reward/mean_score', 0):.3f} "
                f"correct {row.get('reward/correct_share', 0):.2f} loss {row.get('loss/policy', 0):.4g} "
                f"rollout {row.get('perf/rollout_s', 0):.1f}s")

        def on_train_end(self, args, state, control, **kw):
            if self.logger is not None:
                self.logger.close()

    return [StepMetrics()]
