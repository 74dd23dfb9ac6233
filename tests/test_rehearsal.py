"""The CPU rehearsal of the 8B preset (`scripts/rehearse_preset.py`): its LoRA, loss, batch arithmetic and TRL's
vLLM generation path (colocate, sleep mode) under two gloo processes, with a tiny model and stand-ins for
vLLM and the harness."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from grpo_synthetic import build_tiny_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_8b_preset_rehearses_two_steps_under_torchrun(tmp_path):
    model = build_tiny_dir(str(tmp_path / "model"))
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "scripts/rehearse_preset.py", "--config", "configs/qwen3-8b-8gpu.yaml", "--model", model, "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True,
                          timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))
    saved = json.load(open(out / "config.json"))
    config, batch = saved["config"], saved["trl_batch"]
    assert saved["world_size"] == 2 and config["lora_rank"] == 64 and config["loss_norm"] == "dr_grpo"
    assert (batch["tasks_per_rank"], batch["samples_per_rank"], batch["grad_accumulation"]) == (4, 256, 128)
    assert report["steps"] == 2 and report["samples_per_step"] == [512.0, 512.0]  # 8 tasks x 16 x 4 turns
    assert all(v is not None for v in report["loss"]) and all(g > 1e-4 for g in report["grad_norm"])
    # rank 0's engine: one sync per step (sleep mode on), though each step made a call per task group and turn
    assert report["weights_pushed"] == 2 * report["model_tensors"] and report["engine_calls"] >= 2 * 4
