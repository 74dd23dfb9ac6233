"""Numerics of an update: which dtype the trainable weights live in, and the LoRA learning-rate rule.

Mixed precision with fp32 master weights. AdamW's update of a weight is about the learning rate (~1e-5 at the
rates used here) times a ratio of moments near 1; bf16 keeps 8 bits of mantissa, so a bf16 weight of
magnitude 0.01-1 does not change by less than 4e-5-4e-3: most updates round away and training stalls. So
trainable weights are loaded in fp32 and the forward and backward run under bf16 autocast (TRL's `bf16=True`,
torch.autocast): the arithmetic is bf16, the weights and their updates fp32. Under ZeRO-3 DeepSpeed casts the
model to bf16 and keeps the fp32 copy in its optimizer, the same scheme. With LoRA only the adapters train:
the frozen base stays in the checkpoint's dtype (bf16: half the memory) and peft keeps the adapters in fp32
(`autocast_adapter_dtype`, its default).

LoRA learning rate: about ten times the full fine-tuning rate. Schulman et al., "LoRA Without Regret"
(Thinking Machines Lab, 2025) found the best LoRA rate ~10× the best full fine-tuning rate across model sizes
and ranks (B starts at 0, so the adapters begin with no effect and move slowly at the full-rate step); at the
full rate (2e-6) with clip 0.05, rank-64 adapters barely move in 200 optimizer steps.
"""

from __future__ import annotations

import logging

import torch

log = logging.getLogger(__name__)

LORA_LR_MULTIPLIER = 10.0
"""LoRA's rate over full fine-tuning's (module docstring)."""
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def load_dtype(dtype: str, lora_rank: int) -> torch.dtype:
    """The dtype to load a checkpoint in: fp32 for weights that train under bf16 autocast (fp32 masters);
    the configured dtype for a frozen LoRA base or an fp32 run."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return DTYPES[dtype] if lora_rank > 0 else torch.float32


def autocast_bf16(dtype: str, device: str) -> bool:
    """TRL's `bf16` flag: bf16 autocast over fp32 (or LoRA-adapter fp32) weights, on a GPU only."""
    return dtype == "bfloat16" and device != "cpu"


def check_lora_rate(lora_rank: int, learning_rate: float, full_rate: float) -> str:
    """A warning when a LoRA run's rate is at a full fine-tuning rate (below 3× `full_rate`), else ""."""
    if lora_rank > 0 and learning_rate < 3 * full_rate:
        return (f"LoRA rank {lora_rank} at learning rate {learning_rate:g}: LoRA's best rate is ~{LORA_LR_MULTIPLIER:g}x "
                f"full fine-tuning's ({full_rate:g} -> {LORA_LR_MULTIPLIER * full_rate:g}; train/precision.py)")
    return ""
