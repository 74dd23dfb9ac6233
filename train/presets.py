"""Preset files: `configs/<name>.yaml`, one section per command (`sft:`, `train:`, `pipeline:`), read and
validated as a whole through the one config mechanism (`kernelbench.config_files`): unknown keys, mistyped
values and modes outside their `Literal` fail naming the file and the key's path, and a flat name of before
names its new place (`RENAMED`). The first line of a preset is a comment naming the command that launches it."""

from __future__ import annotations

import json
import os
from dataclasses import field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic.dataclasses import dataclass

from kernelbench.config_files import ConfigError, updated
from train.config import PipelineConfig, SFTConfig, STRICT, TrainConfig

C = TypeVar("C")
CONFIGS_DIR = Path(__file__).resolve().parent.parent / "configs"


RENAMED = {"temperature": "sampling.temperature", "max_new_tokens": "sampling.max_tokens",
           "prompt_token_budget": "prompt.token_budget", "prompt_style": "prompt.style",
           "hardware": "prompt.hardware", "language": "prompt.language", "eval_size": "eval.size",
           "eval_timing_trials": "eval.timing_trials", "eval_correctness_trials": "eval.correctness_trials",
           "eval_warmup_trials": "eval.warmup_trials", "eval_extra_distribution_trials": "eval.extra_distribution_trials",
           "build_cache_dir": "eval.build_cache_dir", "compile_workers": "executor.compile_workers",
           "run_workers": "executor.run_workers", "ray_address": "executor.ray_address",
           "max_in_flight": "executor.max_in_flight", "correctness_weight": "score.correctness_weight",
           "speedup_cap": "score.speedup_cap"}
"""TrainConfig's flat names of before and their nested places: a preset that still uses one fails (an unknown
key, as any other) with its new place in the message (`kernelbench.config_files.describe`)."""
RENAMED_PATHS = {f"train.{old}": new for old, new in RENAMED.items()}


@dataclass(frozen=True, config=STRICT)
class Preset:
    """A preset file: one section per command, each validated as that command's config."""

    sft: SFTConfig = field(default_factory=SFTConfig)
    """`kernel-agent sft` (and the warm start of `train`)."""
    train: TrainConfig = field(default_factory=TrainConfig)
    """`kernel-agent train`."""
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    """`kernel-agent train --pipeline`."""


def preset_path(name_or_path: str) -> Path:
    """A preset name (`cpu-tiny`) resolves to `configs/<name>.yaml`; anything else is a file path."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml", ".json") or os.sep in name_or_path:
        return path
    return CONFIGS_DIR / f"{name_or_path}.yaml"


def load_sections(name_or_path: str) -> dict[str, Any]:
    """A preset file as written (YAML or JSON), not yet validated; an empty section reads as `{}`."""
    path = preset_path(name_or_path)
    if not path.is_file():
        names = sorted(p.stem for p in CONFIGS_DIR.glob("*.yaml"))
        raise FileNotFoundError(f"no preset {name_or_path!r} (known: {', '.join(names)})")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(text)
    else:
        data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a preset is a mapping of sections (sft, train, pipeline), got {data!r}")
    return {k: {} if v is None else v for k, v in data.items()}


def load_preset(name_or_path: str) -> Preset:
    """A preset file validated as a whole, laid over each command's defaults (`Preset`, `updated`);
    `ConfigError` names the file and each key at fault."""
    return updated(Preset(), load_sections(name_or_path), str(preset_path(name_or_path)), renamed=RENAMED_PATHS)


def load_config(cls: type[C], name_or_path: str, section: str, overrides: dict[str, Any] | None = None) -> C:
    """One section of a preset as `cls`, with `overrides` (e.g. from command-line flags, `updated`) applied last."""
    config = getattr(load_preset(name_or_path), section)
    if not isinstance(config, cls):
        raise TypeError(f"section {section!r} holds a {type(config).__name__}, not a {cls.__name__}")
    return updated(config, overrides, "command line", section, RENAMED_PATHS) if overrides else config
