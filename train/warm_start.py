"""The warm start of an RL run: the preset's SFT stage, trained once and cached by its config's hash."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path

from train.config import SFTConfig, TrainConfig, load_config, to_dict

WARM_START_CACHE = os.path.expanduser("~/.cache/kernel-agent/warm-start")


KEY_SOURCES = tuple(str(Path(__file__).with_name(name)) for name in ("sft.py", "tiny_model.py"))
"""The code that trains a warm start (the SFT stage, the tiny model and its tokenizer): part of its key."""


def warm_start_key(sft_config: SFTConfig) -> str:
    """The cache key of a warm start: its SFT settings, the examples it learns from (prompt and answer), and
    the code that trains it (`KEY_SOURCES`).

    Why the examples: a task file or a reference solution that changes (a comment, a new `INPUT_CONFIGS` line)
    changes every prompt the tiny model was trained on, and a warm start trained on the old text answers the new
    prompt with noise: the pipeline then probed 0 fast and 0 slow answers of 16 and every RL reward was 0.
    Why the code: a changed tiny model, tokenizer or check would otherwise hand back a model (and a
    `done.json`) made by the code of before."""
    from train import sft

    examples = [[e.prompt, e.answer] for e in sft.load_examples(replace(sft_config, out=""))]
    code = [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in KEY_SOURCES]
    blob = json.dumps({"config": to_dict(replace(sft_config, out="")), "examples": examples, "code": code},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def ensure_warm_start(preset: str, config: TrainConfig, say=print) -> TrainConfig:
    """`config` with `model` set to the preset's SFT output, trained once and cached by `warm_start_key`."""
    from train import sft

    sft_config = load_config(SFTConfig, preset, "sft")
    key = warm_start_key(sft_config)
    out = os.path.join(WARM_START_CACHE, key)
    os.makedirs(WARM_START_CACHE, exist_ok=True)
    import fcntl

    # One trainer at a time: under torchrun every rank gets here before the process group exists; the
    # first trains, the others wait on the lock and then reuse its output.
    with open(out + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (Path(out) / "done.json").exists():
            say(f"warm start: training {sft_config.model} on {sft_config.data} -> {out}")
            result = sft.main(replace(sft_config, out=out), say=say)
            (Path(out) / "done.json").write_text(json.dumps(result.__dict__))
        else:
            say(f"warm start: reusing {out}")
    return replace(config, model=out)
