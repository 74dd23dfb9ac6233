"""Kill a run, resume it, and get the uninterrupted run's parameters, optimizer state and step."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from grpo_synthetic import LowIdRollout, build_tiny_dir
from train import checkpoint as ckpt
from train import grpo
from train.config import TrainConfig
from train.metrics_log import read_metrics


class Killed(Exception):
    pass


def _config(model: str, out: str) -> TrainConfig:
    return TrainConfig(model=model, tasks="L1/01_relu,L1/03_silu,L1/08_sigmoid", steps=4, tasks_per_batch=2,
                       trajectories=4, turns=2, max_new_tokens=8, learning_rate=1e-2, grad_clip=1.0,
                       warmup_ratio=0.5, max_staleness=1, tensorboard=False, out=out, checkpoint_every=1,
                       keep_checkpoints=5, micro_batch_size=8, temperature=1.0, torch_threads=1)


def _rollout(model_dir: str) -> LowIdRollout:
    from transformers import AutoTokenizer

    return LowIdRollout(len(AutoTokenizer.from_pretrained(model_dir)), 4, 2, 8)


def _state(out: str, step: int):
    path = Path(out) / "checkpoints" / f"step_{step:06d}"
    return (torch.load(path / "model.pt"), torch.load(path / "optimizer.pt", weights_only=False),
            json.loads((path / "state.json").read_text()))


def test_resume_reproduces_the_uninterrupted_run(tmp_path):
    model = build_tiny_dir(str(tmp_path / "model"))
    full = _config(model, str(tmp_path / "full"))
    grpo.main(full, rollout=_rollout(model), say=lambda s: None)

    cut = _config(model, str(tmp_path / "cut"))

    def kill_after_step_1(step, metrics):
        if step == 1:
            raise Killed

    with pytest.raises(Killed):
        grpo.main(cut, rollout=_rollout(model), on_step=kill_after_step_1, say=lambda s: None)
    assert [p.name for p in ckpt.list_checkpoints(str(tmp_path / "cut" / "checkpoints"))] == ["step_000001", "step_000002"]
    grpo.main(cut, resume=True, rollout=_rollout(model), say=lambda s: None)

    params_a, opt_a, state_a = _state(full.out, 4)
    params_b, opt_b, state_b = _state(cut.out, 4)
    assert state_a == state_b and state_b["step"] == 4 and state_b["data_position"] == 8
    for name in params_a:
        assert torch.allclose(params_a[name], params_b[name], atol=1e-6), name
    assert opt_a["state"].keys() == opt_b["state"].keys()
    for k in opt_a["state"]:
        assert opt_a["state"][k]["step"] == opt_b["state"][k]["step"]
        assert torch.allclose(opt_a["state"][k]["exp_avg"], opt_b["state"][k]["exp_avg"], atol=1e-6)
    assert opt_a["param_groups"][0]["lr"] == opt_b["param_groups"][0]["lr"]
    # metrics of the resumed run continue without duplicate steps and match the uninterrupted run
    ma, mb = read_metrics(full.out), read_metrics(cut.out)
    assert [r["step"] for r in mb] == [0, 1, 2, 3]
    assert [r["reward/mean_score"] for r in ma] == pytest.approx([r["reward/mean_score"] for r in mb])


def test_checkpoint_save_is_atomic_and_pruned(tmp_path):
    net = torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW(net.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    for step in (1, 2, 3):
        ckpt.save(str(tmp_path), ckpt.TrainerState(step=step, data_position=step), net, opt, sched, keep=2)
    (tmp_path / ".tmp-step_000004").mkdir()  # a save killed half-way is never loaded
    assert [p.name for p in ckpt.list_checkpoints(str(tmp_path))] == ["step_000002", "step_000003"]
    with torch.no_grad():
        net.weight.zero_()
    loaded = ckpt.load_latest(str(tmp_path), net, opt, sched)
    assert loaded.state.step == 3 and float(net.weight.detach().abs().sum()) > 0
