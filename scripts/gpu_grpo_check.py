"""Two GRPOTrainer steps of a freshly built tiny Qwen3 on CUDA (transformers generation), the GPU half of
the training path: the multi-turn rollout_func, TRL's update on the GPU, metrics and a checkpoint.

    python3 scripts/gpu_grpo_check.py OUT_DIR        (scripts/gpu_check.sh runs it; --cpu: a dry run on CPU)
"""

from __future__ import annotations

import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]


def main(out: str, device: str = "cuda") -> int:
    import torch

    from grpo_synthetic import LowIdRollout, build_tiny_dir
    from agent.policy import SamplingConfig
    from train import grpo
    from train.config import TrainConfig
    from train.layout import LayoutConfig
    from train.metrics_log import read_metrics

    assert device == "cpu" or torch.cuda.is_available(), "no CUDA device"
    model_dir = build_tiny_dir(os.path.join(out, "tiny"), hidden=64, layers=2)
    from transformers import AutoTokenizer

    vocab = len(AutoTokenizer.from_pretrained(model_dir))
    cfg = TrainConfig(model=model_dir, tasks="L1/01_relu,L1/03_silu", steps=2, tasks_per_batch=2, trajectories=8,
                      turns=2, sampling=SamplingConfig(temperature=1.0, max_tokens=16), learning_rate=1e-2,
                      grad_clip=1.0, warmup_ratio=0.0, device=device, dtype="float32", tensorboard=True,
                      out=os.path.join(out, "run"), checkpoint_every=1, micro_batch_size=8,
                      # one GPU trains and would time: the layout's one-GPU check mode, its results marked
                      layout=LayoutConfig(gpus_per_node=1, eval_gpus=1, share_timing_gpu=device == "cuda"))
    t0 = time.perf_counter()
    grpo.main(cfg, rollout=LowIdRollout(vocab, 8, 2, 16))
    rows = read_metrics(cfg.out)
    saved = json.load(open(os.path.join(cfg.out, "config.json")))
    ok = [r["step"] for r in rows] == [0, 1] and os.path.isdir(os.path.join(cfg.out, "checkpoints", "checkpoint-4")) \
        and (device == "cpu" or saved["layout"]["shared_timing"] is True)
    summary = {"ok": ok, "steps": [r["step"] for r in rows], "wall_s": time.perf_counter() - t0,
               "mean_score": [r["reward/mean_score"] for r in rows], "grad_norm": [r.get("loss/grad_norm") for r in rows],
               "logprob_gap": [r.get("rollout/logprob_gap_mean") for r in rows],
               "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "layout": saved["layout"]}
    print("SUMMARY", json.dumps(summary))
    return 0 if ok else 1


if __name__ == "__main__":
    # `--cpu` runs the same check on the CPU (a dry run of the script where no GPU is available).
    args = [a for a in sys.argv[1:] if a != "--cpu"]
    sys.exit(main(args[0] if args else "gpu-grpo-check", "cpu" if "--cpu" in sys.argv else "cuda"))
