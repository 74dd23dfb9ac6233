"""Resumable checkpoints: weights, optimizer, scheduler, RNG states, step and data position.

`checkpoints/step_NNNNNN/` holds the trainable parameters (all of them, or the LoRA adapter), the
optimizer and scheduler states, every RNG state, the rollout weights a staleness bound still needs, and
`state.json` (step, data position, the base model's usual openings). A folder is written under a
temporary name and renamed when complete, so a run killed mid-save leaves the previous checkpoint intact.
`--resume` loads the newest complete one and continues from the same step: the data order is a function
of (seed, step), and so are the sampling seeds, so the resumed run sees the batches it would have seen.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

PREFIX = "step_"


@dataclass(frozen=True)
class TrainerState:
    """What, besides tensors, a resumed run needs."""

    step: int
    """Steps completed (the resumed run starts at this step index)."""
    data_position: int
    """Tasks consumed from the seeded task order (step × tasks_per_batch)."""
    openings: tuple[str, ...] = ()
    """The base model's usual first words, recorded at step 0."""
    extra: dict[str, Any] = field(default_factory=dict)


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Parameters that train (all for full fine-tuning; the adapter for LoRA), detached CPU copies."""
    return {n: p.detach().to("cpu", copy=True) for n, p in model.named_parameters() if p.requires_grad}


def load_trainable(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    params = dict(model.named_parameters())
    missing = [n for n in state if n not in params]
    if missing:
        raise KeyError(f"checkpoint holds parameters the model lacks: {missing[:3]}")
    with torch.no_grad():
        for n, t in state.items():
            params[n].copy_(t.to(params[n].device, params[n].dtype))


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save(root: str, state: TrainerState, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
         scheduler: Any, rollout_weights: dict[str, torch.Tensor] | None = None, keep: int = 2) -> str:
    """Write checkpoint `state.step` under `root`; delete all but the newest `keep`. Returns its folder."""
    final = Path(root) / f"{PREFIX}{state.step:06d}"
    tmp = Path(root) / f".tmp-{PREFIX}{state.step:06d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    torch.save(trainable_state(model), tmp / "model.pt")
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    torch.save(rng_state(), tmp / "rng.pt")
    if rollout_weights is not None:
        torch.save(rollout_weights, tmp / "rollout_weights.pt")
    (tmp / "state.json").write_text(json.dumps({"step": state.step, "data_position": state.data_position,
                                                "openings": list(state.openings), "extra": state.extra}))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    for old in list_checkpoints(root)[:-max(1, keep)]:
        shutil.rmtree(old, ignore_errors=True)
    return str(final)


def list_checkpoints(root: str) -> list[Path]:
    """Complete checkpoint folders, oldest first."""
    path = Path(root)
    if not path.is_dir():
        return []
    found = [p for p in path.iterdir() if p.name.startswith(PREFIX) and (p / "state.json").exists()]
    return sorted(found, key=lambda p: int(p.name[len(PREFIX):]))


@dataclass
class Loaded:
    state: TrainerState
    rollout_weights: dict[str, torch.Tensor] | None


def load_latest(root: str, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any) -> Loaded | None:
    """Restore the newest checkpoint into the given objects (and the RNGs); None when there is none."""
    found = list_checkpoints(root)
    if not found:
        return None
    path = found[-1]
    load_trainable(model, torch.load(path / "model.pt", map_location="cpu"))
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location="cpu", weights_only=False))
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=False))
    set_rng_state(torch.load(path / "rng.pt", weights_only=False))
    rollout = torch.load(path / "rollout_weights.pt") if (path / "rollout_weights.pt").exists() else None
    meta = json.loads((path / "state.json").read_text())
    state = TrainerState(step=meta["step"], data_position=meta["data_position"],
                         openings=tuple(meta.get("openings", ())), extra=meta.get("extra", {}))
    return Loaded(state=state, rollout_weights=rollout)
