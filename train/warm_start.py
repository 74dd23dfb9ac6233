"""The warm start of an RL run: the preset's SFT stage, trained once and cached by its config's hash."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from kernelbench.config_files import to_dict
from train import sft
from train.config import SFTConfig, TrainConfig
from train.presets import load_config

WARM_START_CACHE = os.path.expanduser("~/.cache/kernel-agent/warm-start")


KEY_SOURCES = tuple(str(Path(__file__).with_name(name)) for name in ("sft.py", "tiny_model.py", "family_examples.py", "solution_text.py"))
"""The code that trains a warm start (the SFT stage, the tiny model and its tokenizer): part of its key."""


def warm_start_key(sft_config: SFTConfig) -> str:
    """The cache key of a warm start: its SFT settings, the examples it learns from (prompt and answer), and
    the code that trains it (`KEY_SOURCES`).

    Why the examples: a task file or a reference solution that changes (a comment, a new `INPUT_CONFIGS` line)
    changes every prompt the tiny model was trained on, and a warm start trained on the old text answers the new
    prompt with noise: the pipeline then probed 0 fast and 0 slow answers of 16 and every RL reward was 0.
    Why the code: a changed tiny model, tokenizer or check would otherwise hand back a model (and a
    `done.json`) made by the code of before."""

    examples = [[e.prompt, e.answer] for e in sft.load_examples(replace(sft_config, out=""))]
    code = [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in KEY_SOURCES]
    blob = json.dumps({"config": to_dict(replace(sft_config, out="")), "examples": examples, "code": code},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def ensure_warm_start(preset: str, config: TrainConfig, say=print) -> TrainConfig:
    """`config` with `model` set to the preset's SFT output, trained once and cached by `warm_start_key`."""

    sft_config = load_config(SFTConfig, preset, "sft")
    key = warm_start_key(sft_config)
    out = os.path.join(WARM_START_CACHE, key)
    os.makedirs(WARM_START_CACHE, exist_ok=True)

    # One trainer at a time: under torchrun every rank gets here before the process group exists; the
    # first trains, the others wait on the lock and then reuse its output.
    with open(out + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (Path(out) / "done.json").exists():
            say(f"warm start: training {sft_config.model} on {sft_config.data} -> {out}")
            if int(os.environ.get("WORLD_SIZE", "1")) > 1:
                result = _train_alone(preset, out, say)
            else:
                result = sft.main(replace(sft_config, out=out), say=say).__dict__
            (Path(out) / "done.json").write_text(json.dumps(result))
        else:
            say(f"warm start: reusing {out}")
    return replace(config, model=out)


DISTRIBUTED_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "MASTER_ADDR",
                   "MASTER_PORT", "TORCHELASTIC_RUN_ID", "ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP")


def _train_alone(preset: str, out: str, say) -> dict:
    """The SFT stage in a process of its own, outside the launch's process group.

    Why: under torchrun one rank trains the warm start while the others wait on the lock; trained in that
    rank's process, the SFT trainer read the launch's WORLD_SIZE, waited for the other ranks to join its
    process group, and they waited for the lock: a deadlock on every 2-process run whose warm start was not
    cached yet."""
    env = {k: v for k, v in os.environ.items() if k not in DISTRIBUTED_ENV}
    code = ("import json, sys; from dataclasses import replace; from train import sft; "
            "from train.config import SFTConfig; from train.presets import load_config; "
            "r = sft.main(replace(load_config(SFTConfig, sys.argv[1], 'sft'), out=sys.argv[2])); "
            "print('WARM_START_RESULT ' + json.dumps(r.__dict__))")
    root = str(Path(__file__).resolve().parents[1])
    proc = subprocess.Popen([sys.executable, "-u", "-c", code, preset, out], cwd=root, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    result, tail = {}, []
    for line in proc.stdout:  # its progress as it comes
        line = line.rstrip("\n")
        if line.startswith("WARM_START_RESULT "):
            result = json.loads(line.partition(" ")[2])
        else:
            say(line)
            tail = (tail + [line])[-40:]
    if proc.wait() != 0 or not result:
        raise RuntimeError(f"warm start training failed (exit {proc.returncode}):\n" + "\n".join(tail))
    return result
