"""Numerics of the update (train/precision.py): fp32 master weights under bf16 autocast, a frozen LoRA base in
its dtype, the LoRA learning-rate rule; and a LoRA warm start that saves one loadable folder."""

from __future__ import annotations

import logging

import pytest
import torch

from train import precision
from train.config import SFTConfig, TrainConfig, validate_train


def test_what_trains_loads_in_fp32_and_a_lora_base_keeps_its_dtype():
    assert precision.load_dtype("bfloat16", 0) == torch.float32
    assert precision.load_dtype("bfloat16", 64) == torch.bfloat16
    assert precision.load_dtype("float32", 64) == torch.float32
    assert precision.autocast_bf16("bfloat16", "cuda") and not precision.autocast_bf16("bfloat16", "cpu")
    with pytest.raises(ValueError, match="dtype must be one of"):
        precision.load_dtype("float16", 0)
    # why: one AdamW-sized step on a bf16 weight is rounded away, on an fp32 one it is kept
    w = torch.tensor([0.5])
    assert (w.bfloat16() - 1e-5).item() == 0.5 and (w - 1e-5).item() != 0.5


def test_grpo_loads_fp32_masters_for_full_fine_tuning(tmp_path):
    from train.grpo import load_model
    from train.tiny_model import TinyModelConfig, build_tiny

    model, tok = build_tiny(["def f(x): return x * 2"] * 4, TinyModelConfig(vocab_size=300, hidden_size=32, num_layers=1,
                                                                             num_heads=2, num_kv_heads=1, intermediate_size=64))
    model.to(torch.bfloat16).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    full, _, _ = load_model(TrainConfig(model=str(tmp_path), dtype="bfloat16", lora_rank=0))
    assert {p.dtype for p in full.parameters()} == {torch.float32}
    base, _, _ = load_model(TrainConfig(model=str(tmp_path), dtype="bfloat16", lora_rank=8, learning_rate=2e-5))
    assert {p.dtype for p in base.parameters()} == {torch.bfloat16}


def test_a_lora_run_at_the_full_rate_is_warned_of(caplog):
    with caplog.at_level(logging.WARNING):
        validate_train(TrainConfig(lora_rank=64, learning_rate=2e-6))
    assert "LoRA's best rate is ~10x" in caplog.text and "2e-05" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        validate_train(TrainConfig(lora_rank=64, learning_rate=2e-5))
        validate_train(TrainConfig(lora_rank=0, learning_rate=2e-6))
    assert "LoRA" not in caplog.text
    with pytest.raises(ValueError, match="dtype"):  # a Literal: refused when the config is built
        TrainConfig(dtype="float16")


def test_a_lora_warm_start_saves_one_merged_folder(tmp_path):
    """SFT with LoRA: the adapters are merged before saving, so the RL run and the hf backend load the folder
    as a whole model."""
    from transformers import AutoModelForCausalLM

    from train.sft import main

    out = tmp_path / "sft"
    result = main(SFTConfig(tasks=("L1/01_relu",), tiny_hidden_size=32, tiny_layers=1, tiny_heads=2, tiny_kv_heads=1,
                            tiny_intermediate_size=64, tiny_vocab_size=400, lora_rank=4, lora_alpha=8, max_steps=2,
                            target_loss=0.0, learning_rate=1e-3, max_length=4096, torch_threads=1, out=str(out)),
                  say=lambda _: None)
    assert result.steps == 2
    model = AutoModelForCausalLM.from_pretrained(out)
    names = [n for n, _ in model.named_parameters()]
    assert names and not any("lora" in n for n in names)
