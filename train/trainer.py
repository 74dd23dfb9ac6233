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
from train.metrics_log import MetricsLogger, PendingMetrics

# Imports inside functions: transformers and trl (0.1-1 s each to import) load when the trainer is built, not when
# this module is imported for its records and helpers.

TRL_RENAMES = {"loss": "loss/policy", "grad_norm": "loss/grad_norm", "learning_rate": "loss/lr",
               "entropy": "loss/entropy", "kl": "loss/kl", "reward": "reward/trl_mean_return",
               "reward_std": "reward/trl_return_std", "frac_reward_zero_std": "rollout/zero_std_group_share_trl"}
"""TRL's log keys in our namespaces (STYLE.md); every other TRL key is kept under `trl/`."""


def make_trainer_class():
    from trl import GRPOTrainer

    class KernelGRPOTrainer(GRPOTrainer):
        """GRPOTrainer that also measures the gap between the trainer's and the rollout's log-probabilities.

        Why a subclass: the old log-probs TRL recomputes before the update and the rollout's own reach only the
        loss's inputs, so this overrides `compute_loss` (transformers' public method for subclasses) to read
        them, and then calls TRL's. Everything else is public API without a subclass: the task ids reach the
        rollout in the prompts themselves (`train.multiturn_rollout.task_prompt`), rewards as a rollout field a
        reward function passes through, and the project's metrics as values in `metrics`
        (`train.metrics_log.PendingMetrics`) that the step callback adds to the `logs` of TRL's `Trainer.log`.
        """

        def __init__(self, *args: Any, metrics: PendingMetrics, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.metrics = metrics
            self.engine_weights = None  # the rollouts' own account of the vLLM engine (train.generation.EngineWeights)

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            old, sampled = inputs.get("old_per_token_logps"), inputs.get("sampling_per_token_logps")
            if old is not None and sampled is not None:  # TRL recomputed old log-probs for this batch
                mask = inputs["completion_mask"].float() * (~torch.isnan(sampled)).float()  # NaN: log-prob unknown
                gap = (torch.nan_to_num(old - sampled).abs() * mask).sum() / mask.sum().clamp(min=1)
                # every process computes the loss of every micro-batch, so the gather is matched on all of them
                self.metrics.record("rollout/logprob_gap_mean", float(self.accelerator.gather(gap.reshape(1)).mean()))
            return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)

    return KernelGRPOTrainer


def make_callbacks(config: TrainConfig, out_dir: str, eval_fn: Callable[[Any], None] | None,
                   metrics: PendingMetrics, say: Callable[[str], None] = print):
    from transformers import TrainerCallback

    g = config.grad_steps_per_batch

    class StepMetrics(TrainerCallback):
        """One metrics.jsonl row (and TensorBoard scalars) per step, from the main process only; the run's
        closing summary (TRL's train_runtime etc.) goes to train_summary.json instead of a row. The project's
        own metrics (`metrics`) join TRL's in the `logs` of each training log call, extended in place so that
        every callback after this one sees them too; every process empties its buffer there."""

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
            if logs is None:
                return
            if "train_runtime" in logs:
                if self.logger is not None:
                    with open(os.path.join(out_dir, "train_summary.json"), "w", encoding="utf-8") as f:
                        json.dump(logs, f, indent=1)
                return
            logs.update(metrics.take())
            if self.logger is None:
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
