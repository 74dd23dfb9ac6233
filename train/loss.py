"""The GRPO token loss: clipped ratio, constant-length normalisation, optional KL, truncated IS correction.

Per completion token with advantage A (its sample's, Kevin-32B arXiv 2507.11948) and ratio
r = π_θ / π_old:

    loss_tok = −min(r·A, clip(r, 1 − ε_low, 1 + ε_high)·A) · w_IS + β·KL_tok

- ε_low 0.2 / ε_high 0.28: the asymmetric clip of DAPO that Kevin-32B uses (TRL: `epsilon`, `epsilon_high`).
- w_IS corrects for the rollout engine's log-probabilities differing from the trainer's for the same
  weights (vLLM kernels, bf16): w = min(π_old / π_rollout, cap) per token (`token_truncate`, TRL's
  `vllm_importance_sampling_correction` with mode token_truncate), or 0 above the cap (`token_mask`), or
  one weight per sequence from the summed log-ratio (`sequence_truncate`). With a staleness bound of one
  step, π_rollout is also one optimizer version older than π_old: the same weight corrects for that.
- KL_tok is the k3 estimator exp(ref − lp) − (ref − lp) − 1 against the starting policy (β = 0 by default).
- Normalisation (TRL `loss_type` names): `dr_grpo` divides the token sum by sequences × max_new_tokens
  (Dr. GRPO, a constant, so long and short answers weigh per token alike; Kevin-32B found it delayed junk
  output); `grpo` averages per sequence then over sequences; `dapo` divides by the tokens of the mini-batch.
  The divisor is the mini-batch's, given by the caller, so micro-batches accumulate to the exact loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class LossConfig:
    eps_low: float = 0.2
    eps_high: float = 0.28
    kl_coef: float = 0.0
    loss_norm: str = "dr_grpo"
    max_completion_tokens: int = 16384
    """The constant of Dr. GRPO normalisation (the generation limit)."""
    is_mode: str = "token_truncate"
    is_cap: float = 2.0


@dataclass(frozen=True)
class LossInputs:
    """Aligned [B, C] tensors over completion tokens (see `train.samples.MicroBatch`)."""

    logprobs: torch.Tensor
    """Trainer log-probabilities under the current weights (carries the gradient)."""
    old_logprobs: torch.Tensor
    """Trainer log-probabilities before this batch's first update (detached)."""
    rollout_logprobs: torch.Tensor
    """Rollout-engine log-probabilities; NaN where the engine gave none (then no correction)."""
    advantages: torch.Tensor
    """[B]."""
    mask: torch.Tensor
    """1.0 on real completion tokens."""
    ref_logprobs: torch.Tensor | None = None
    """Reference-policy log-probabilities, only when kl_coef > 0."""


@dataclass(frozen=True)
class Normaliser:
    """Divisors of one mini-batch (all its micro-batches share them)."""

    sequences: int
    tokens: float


@dataclass(frozen=True)
class LossStats:
    """Sums over one micro-batch's tokens, to be added across micro-batches and divided by `tokens`."""

    tokens: float
    clipped_low: float
    clipped_high: float
    kl_sum: float
    is_weight_sum: float
    is_weight_max: float
    is_capped: float
    ratio_sum: float


def importance_weights(old: torch.Tensor, rollout: torch.Tensor, mask: torch.Tensor, mode: str,
                       cap: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token weights (detached) and a 0/1 tensor of where the cap acted."""
    have = ~torch.isnan(rollout)
    log_ratio = torch.where(have, old.detach() - torch.nan_to_num(rollout), torch.zeros_like(old))
    if mode == "none":
        ones = torch.ones_like(old)
        return ones, torch.zeros_like(old)
    if mode == "sequence_truncate":
        seq = (log_ratio * mask).sum(dim=1, keepdim=True).clamp(max=20.0).exp()
        w = seq.clamp(max=cap).expand_as(old)
        capped = (seq > cap).float().expand_as(old)
        return w, capped
    raw = log_ratio.clamp(max=20.0).exp()
    capped = (raw > cap).float()
    w = raw.clamp(max=cap) if mode == "token_truncate" else torch.where(raw > cap, torch.zeros_like(raw), raw)
    return w, capped


def grpo_loss(inp: LossInputs, cfg: LossConfig, norm: Normaliser) -> tuple[torch.Tensor, LossStats]:
    """This micro-batch's share of the mini-batch loss (backward it and sum over micro-batches)."""
    mask = inp.mask
    adv = inp.advantages.unsqueeze(1)
    ratio = torch.exp(inp.logprobs - inp.old_logprobs.detach())
    clipped = ratio.clamp(1.0 - cfg.eps_low, 1.0 + cfg.eps_high)
    surrogate = torch.min(ratio * adv, clipped * adv)
    w, capped = importance_weights(inp.old_logprobs, inp.rollout_logprobs, mask, cfg.is_mode, cfg.is_cap)
    per_token = -surrogate * w
    kl = torch.zeros_like(per_token)
    if cfg.kl_coef > 0 and inp.ref_logprobs is not None:
        delta = inp.ref_logprobs.detach() - inp.logprobs
        kl = torch.exp(delta) - delta - 1.0
        per_token = per_token + cfg.kl_coef * kl
    if cfg.loss_norm == "dr_grpo":
        loss = (per_token * mask).sum() / (norm.sequences * cfg.max_completion_tokens)
    elif cfg.loss_norm == "dapo":
        loss = (per_token * mask).sum() / max(norm.tokens, 1.0)
    elif cfg.loss_norm == "grpo":
        per_seq = (per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        loss = per_seq.sum() / norm.sequences
    else:
        raise ValueError(f"unknown loss_norm {cfg.loss_norm!r}")
    with torch.no_grad():
        low = ((ratio < 1.0 - cfg.eps_low) & (adv < 0)).float() * mask
        high = ((ratio > 1.0 + cfg.eps_high) & (adv > 0)).float() * mask
        stats = LossStats(tokens=float(mask.sum()), clipped_low=float(low.sum()), clipped_high=float(high.sum()),
                          kl_sum=float((kl * mask).sum()), is_weight_sum=float((w * mask).sum()),
                          is_weight_max=float((w * mask).max()) if mask.any() else 0.0,
                          is_capped=float((capped * mask).sum()), ratio_sum=float((ratio * mask).sum()))
    return loss, stats


def token_logprobs(model, batch, temperature: float) -> torch.Tensor:
    """[B, C] log-probabilities of the completion tokens under `model`, logits divided by `temperature`
    (the distribution the rollout engine sampled from, so the two are comparable)."""
    width = batch.completion_ids.shape[1]
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids,
                logits_to_keep=width + 1, use_cache=False)
    logits = out.logits[:, :-1, :].float() / max(temperature, 1e-6)
    lp = torch.log_softmax(logits, dim=-1)
    return lp.gather(-1, batch.completion_ids.unsqueeze(-1)).squeeze(-1)
