"""`final/` (train/saving.py): gathered through the accelerator on every rank, LoRA adapters merged into the
gathered weights, one folder transformers loads. Under ZeRO-3 and FSDP2 the gather is accelerate's; those
cannot run here (no DeepSpeed, and FSDP2 under accelerate needs GPUs), so the tests hold the merge exact
against peft's and the whole path in a real single-process LoRA GRPO run."""

from __future__ import annotations

import os

import torch

from grpo_synthetic import LowIdRollout, build_tiny_dir
from test_grpo import _config, _vocab
from train import grpo
from train.saving import merge_lora


def test_merging_the_gathered_state_equals_peft_merge(tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    path = build_tiny_dir(str(tmp_path / "tiny"))
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(path),
                           LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)  # B starts at 0: give the adapters an effect to merge
    merged = merge_lora({k: v.clone() for k, v in model.state_dict().items()}, 8 / 4)
    want = model.merge_and_unload().state_dict()
    assert set(merged) == set(want)
    assert all(torch.allclose(merged[k], want[k], atol=1e-6) for k in want)


def test_a_lora_run_saves_a_merged_final_folder(tmp_path):
    from transformers import AutoModelForCausalLM

    tiny = build_tiny_dir(str(tmp_path / "tiny"))
    cfg = _config(tiny, str(tmp_path / "run"), steps=1, lora_rank=4, lora_alpha=8, learning_rate=5e-2)
    result = grpo.main(cfg, rollout=LowIdRollout(_vocab(tiny), 8, 2, 1), say=lambda s: None)
    model = AutoModelForCausalLM.from_pretrained(result.final_dir)
    base = AutoModelForCausalLM.from_pretrained(tiny)
    names = [n for n, _ in model.named_parameters()]
    assert names == [n for n, _ in base.named_parameters()] and not any("lora" in n for n in names)
    # the update reached the saved weights (merged adapters), and the folder has its tokenizer
    moved = [n for n, p in model.named_parameters() if not torch.equal(p, dict(base.named_parameters())[n])]
    assert moved and all("proj" in n for n in moved)
    assert os.path.isfile(os.path.join(result.final_dir, "tokenizer.json"))
