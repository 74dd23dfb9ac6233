"""The config mechanism (train/config.py; docs/architecture.md, "Configuration"): presets, flags and config.json
validated by pydantic into the commands' frozen dataclasses, each error naming its source and key."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import pytest
from pydantic import TypeAdapter

from agent.optimize import OptimizeConfig
from evals.runner import BenchConfig, config_dict
from kernelbench.harness.result import CORRECT, EvalResult
from rewards import ScoreConfig
from kernelbench.config_files import ConfigError, load_saved, save_config, to_dict, updated
from train.config import PipelineConfig, SFTConfig, TrainConfig
from train.presets import CONFIGS_DIR, RENAMED, Preset, load_config, load_preset


def write(tmp_path, text: str) -> str:
    path = tmp_path / "p.yaml"
    path.write_text("# kernel-agent train --config p.yaml\n" + text)
    return str(path)


@pytest.mark.parametrize("path", sorted(CONFIGS_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_preset_loads(path):
    assert path.read_text().startswith("# kernel-agent ") or "accelerate launch" in path.read_text().splitlines()[0]
    preset = load_preset(str(path))
    assert isinstance(preset, Preset)
    assert (type(preset.sft), type(preset.train), type(preset.pipeline)) == (SFTConfig, TrainConfig, PipelineConfig)
    assert preset.train.eval.device == preset.train.prompt.device == preset.train.device


def test_an_unknown_key_fails_naming_the_file_and_its_path(tmp_path):
    path = write(tmp_path, "train:\n  sampling:\n    temprature: 0.5\nsft:\n  max_step: 3\n")
    with pytest.raises(ConfigError) as e:
        load_preset(path)
    assert str(e.value).startswith(f"{path}: ")
    assert "train.sampling.temprature: unknown setting" in str(e.value)
    assert "sft.max_step: unknown setting" in str(e.value)  # every error at once, not the first alone
    with pytest.raises(ConfigError, match=r"bench: unknown setting"):  # sections are sft, train, pipeline
        load_preset(write(tmp_path, "bench:\n  turns: 2\n"))


@pytest.mark.parametrize("text, key", [
    ("train:\n  eval:\n    timing_trials: many\n", "train.eval.timing_trials"),
    ("train:\n  eval:\n    timing_trials: '20'\n", "train.eval.timing_trials"),  # strict: no quoted numbers
    ("train:\n  steps: 2.5\n", "train.steps"),
    ("train:\n  tensorboard: 1\n", "train.tensorboard"),
    ("train:\n  eval:\n    profile: off\n", "train.eval.profile"),  # YAML's `off` is False, not "off"
    ("train:\n  sampling: 0.7\n", "train.sampling"),
    ("sft:\n  solution_kinds: cpu\n", "sft.solution_kinds"),
])
def test_a_mistyped_value_fails_naming_its_key(tmp_path, text, key):
    with pytest.raises(ConfigError, match=rf"p.yaml: {key}: "):
        load_preset(write(tmp_path, text))


@pytest.mark.parametrize("key, value", [("loss_norm", "ppo"), ("is_mode", "token"), ("vllm_mode", "remote"),
                                        ("device", "gpu"), ("backend", "openai"), ("optimizer", "adam"),
                                        ("dtype", "float16"), ("return_mode", "mean")])
def test_modes_are_literals(tmp_path, key, value):
    with pytest.raises(ConfigError, match=rf"train.{key}: Input should be .* \(got '{value}'\)"):
        load_preset(write(tmp_path, f"train:\n  {key}: {value}\n"))
    for section, key, value in (("eval", "size", "big"), ("executor", "kind", "slurm"), ("layout", "sharding", "zero2"),
                                ("prompt", "style", "short"), ("prompt", "language", "rust")):
        with pytest.raises(ConfigError, match=rf"train.{section}.{key}: Input should be"):
            load_preset(write(tmp_path, f"train:\n  {section}:\n    {key}: {value}\n"))


def test_a_flat_name_of_before_names_its_new_place(tmp_path):
    path = write(tmp_path, "train:\n  max_new_tokens: 64\n  speedup_cap: 4\n")
    with pytest.raises(ConfigError) as e:
        load_preset(path)
    assert "train.max_new_tokens: `max_new_tokens` is now `sampling.max_tokens` (nested: `sampling: {max_tokens: ...}`)" \
        in str(e.value)
    assert "train.speedup_cap: `speedup_cap` is now `score.speedup_cap`" in str(e.value)
    assert all(new.split(".")[0] in TrainConfig.__dataclass_fields__ for new in RENAMED.values())


def test_a_section_keeps_its_commands_defaults(tmp_path):
    """A section in a preset is laid over the command's own defaults: train samples 16k tokens, whatever
    `SamplingConfig` alone says."""
    train = load_preset(write(tmp_path, "train:\n  device: cuda\n  sampling:\n    temperature: 0.5\n")).train
    assert (train.sampling.temperature, train.sampling.max_tokens) == (0.5, TrainConfig().sampling.max_tokens) == (0.5, 16384)
    assert train.eval.device == train.prompt.device == "cuda"  # the nested device is the config's own


def test_the_score_settings_are_the_train_sections_score(tmp_path):
    from train.multiturn_rollout import scoring_of

    train = load_preset(write(tmp_path, "train:\n  score:\n    speedup_cap: 2\n    correctness_weight: 0.5\n")).train
    fast = EvalResult(status=CORRECT, compiled=True, correct=True, speedup=5.0, runtime_ms=1.0, ref_runtime_ms=5.0)
    assert train.score == ScoreConfig(correctness_weight=0.5, speedup_cap=2.0)
    assert scoring_of(train).score(fast) == pytest.approx(2.5)
    with pytest.raises(ConfigError, match=r"train.score.speedup_cap: Input should be greater than 0"):
        load_preset(write(tmp_path, "train:\n  score:\n    speedup_cap: 0\n"))
    assert BenchConfig(score=ScoreConfig(speedup_cap=3.0)).score.speedup_cap == 3.0


def test_config_json_round_trips(tmp_path):
    train = updated(load_config(TrainConfig, "qwen3-8b-8gpu", "train"), {"score": {"speedup_cap": 8}})
    for config in (train, load_config(SFTConfig, "cpu-tiny", "sft"), load_config(PipelineConfig, "cpu-tiny", "pipeline")):
        path = save_config(config, str(tmp_path / type(config).__name__), world_size=4)
        assert json.load(open(path))["config"] == to_dict(config)
        assert load_saved(path, (SFTConfig, TrainConfig, PipelineConfig)) == config
    bench = BenchConfig(device="cuda", trajectories=2, eval=BenchConfig().eval, score=ScoreConfig(speedup_cap=2.0))
    assert json.loads(json.dumps(config_dict(bench))) == config_dict(bench)
    assert TypeAdapter(BenchConfig).validate_python(config_dict(bench)) == bench and bench.eval.size == "gpu"
    opt = OptimizeConfig(file="m.py", device="cpu", strategy="beam")
    assert TypeAdapter(OptimizeConfig).validate_python(TypeAdapter(OptimizeConfig).dump_python(opt, mode="json")) == opt


def test_replace_validates_and_rederives():
    config = TrainConfig()
    assert replace(config, device="cuda").eval.device == "cuda"
    with pytest.raises(ValueError, match="loss_norm"):
        replace(config, loss_norm="ppo")
    with pytest.raises(ValueError, match="max_in_flight"):
        replace(config.executor, max_in_flight=-1)


def test_flags_are_validated_as_a_preset_is():
    from cli.bench_cmd import _add_run_options, config_from
    from cli.main import UsageError
    from cli.train_cmd import _load

    with pytest.raises(UsageError, match=r"command line: train.executor.kind: Input should be 'local' or 'ray'"):
        _load(TrainConfig, "cpu-tiny", "train", {"executor": {"kind": "slurm"}})
    assert _load(TrainConfig, "cpu-tiny", "train", {"steps": 3, "out": None}).steps == 3
    parser = argparse.ArgumentParser()
    _add_run_options(parser)
    with pytest.raises(UsageError, match=r"command line: bench.price_out: Input should be greater than or equal to 0"):
        config_from(parser.parse_args(["--price-out", "-1"]))
    cfg = config_from(parser.parse_args(["--device", "cuda", "--timing-trials", "20"]), trajectories=3)
    assert (cfg.eval.timing_trials, cfg.eval.size, cfg.trajectories) == (20, "gpu", 3)


def test_a_section_device_apart_from_its_commands_is_refused_and_the_default_follows(tmp_path):
    """`eval.device` and `prompt.device` are set from the command's `device` (one place): a preset that sets one
    to something else fails naming it, where it used to be overwritten without a word; one that sets only
    `device` moves both sections with it."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("# kernel-agent train --preset bad.yaml\ntrain:\n  device: cuda\n  eval: {device: cpu}\n")
    with pytest.raises(ConfigError, match=r"train\.eval\.device is set from `train\.device` \('cuda'\), got 'cpu'"):
        load_config(TrainConfig, str(bad), "train")
    good = tmp_path / "good.yaml"
    good.write_text("# kernel-agent train --preset good.yaml\ntrain:\n  device: cuda\n  eval: {timing_trials: 20}\n")
    config = load_config(TrainConfig, str(good), "train")
    assert (config.eval.device, config.prompt.device, config.eval.timing_trials) == ("cuda", "cuda", 20)
    same = tmp_path / "same.yaml"
    same.write_text("# kernel-agent train --preset same.yaml\ntrain:\n  device: cuda\n  prompt: {device: cuda}\n")
    assert load_config(TrainConfig, str(same), "train").prompt.device == "cuda"
    with pytest.raises(ConfigError, match=r"command line: train\.prompt\.device is set from"):
        load_config(TrainConfig, str(good), "train", {"prompt": {"device": "cpu"}})
