"""The warm start's cache key covers what it learns from, not only its settings."""

from __future__ import annotations

from train import sft
from train.config import SFTConfig
from train.warm_start import warm_start_key


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
    from train.config import load_config

    config = load_config(SFTConfig, "cpu-tiny", "sft")
    assert sft.load_examples(config)  # the key hashes these prompts and answers
    assert len(warm_start_key(config)) == 16
