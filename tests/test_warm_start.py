"""The warm start's cache key covers what it learns from, not only its settings."""

from __future__ import annotations

import os
import re

from train import sft
from train.config import SFTConfig
from train.warm_start import warm_start_key

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_key_changes_with_the_examples_and_with_the_settings(monkeypatch):
    prompt = [{"role": "user", "content": "task source"}]
    one = [sft.Example("L1/03_silu", "cpu", prompt, "answer")]
    edited = [sft.Example("L1/03_silu", "cpu", [{"role": "user", "content": "task source\nINPUT_CONFIGS = []"}],
                          "answer")]
    monkeypatch.setattr(sft, "load_examples", lambda config: one)
    base = warm_start_key(SFTConfig())
    assert warm_start_key(SFTConfig()) == base  # the same data and settings: the cached model is reused
    assert warm_start_key(SFTConfig(max_steps=SFTConfig().max_steps + 1)) != base
    monkeypatch.setattr(sft, "load_examples", lambda config: edited)
    assert warm_start_key(SFTConfig()) != base  # a task file that changed: trained anew


def test_key_changes_with_the_code_that_trains_it(monkeypatch, tmp_path):
    from train import warm_start

    code = tmp_path / "sft.py"
    code.write_text("STEP = 1\n")
    monkeypatch.setattr(sft, "load_examples", lambda config: [])
    monkeypatch.setattr(warm_start, "KEY_SOURCES", (str(code),))
    base = warm_start_key(SFTConfig())
    code.write_text("STEP = 2\n")
    assert warm_start_key(SFTConfig()) != base  # edited training code: the cached model is not reused


def test_key_of_the_cpu_tiny_preset_reads_its_real_examples():
    from train.presets import load_config

    config = load_config(SFTConfig, "cpu-tiny", "sft")
    assert sft.load_examples(config)  # the key hashes these prompts and answers
    assert len(warm_start_key(config)) == 16


def test_a_rank_of_a_launch_trains_the_warm_start_outside_the_launchs_process_group(monkeypatch, tmp_path):
    """Under torchrun the rank that takes the lock trains the warm start; in its own process the SFT trainer
    read WORLD_SIZE 2 and waited for a peer that waited on the lock (a deadlock). Trained in a process of its
    own, without the launch's variables, it finishes and the folder is marked done."""
    from train import warm_start
    from train.config import TrainConfig

    text = open(os.path.join(ROOT, "configs", "cpu-tiny.yaml")).read()
    sft = text[text.index("sft:"):text.index("train:")]
    # Whatever the preset's own step count: a few steps show the process runs and finishes.
    sft = re.sub(r"max_steps: \d+", "max_steps: 3", sft)
    sft = re.sub(r"check_samples: \d+", "check_samples: 0", sft)
    preset = tmp_path / "tiny.yaml"
    preset.write_text(sft)
    monkeypatch.setattr(warm_start, "WARM_START_CACHE", str(tmp_path / "cache"))
    for k, v in {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "9"}.items():
        monkeypatch.setenv(k, v)
    lines: list[str] = []
    config = warm_start.ensure_warm_start(str(preset), TrainConfig(), say=lines.append)
    assert os.path.exists(os.path.join(config.model, "done.json")) and os.path.exists(os.path.join(config.model, "config.json"))
    assert any("sft: 3 steps" in line for line in lines), lines[-5:]
