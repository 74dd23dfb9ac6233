"""Seeds and input sets: drawn by the parent, built by the reference child, never chosen by the candidate.

DESIGN.md rule 2-3: inputs come from seeds the candidate cannot predict (the parent draws them with
`secrets` per evaluation), and besides fresh `get_inputs()` draws some trials use other distributions of the
same shapes and dtypes, so a kernel cannot lean on `torch.rand`'s non-negative values (KernelBench v0.1
moved most problems to `torch.rand`; "identity passing on non-negative inputs" is a known hack).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Callable

# Imports inside functions: torch loads when inputs are drawn; the task catalog and `kernel-agent tasks` import the
# task records without it.

EXTRA_DISTRIBUTIONS = ("normal_x3", "negated", "uniform_pm1")
"""Signed normal scaled by 3, the negated `get_inputs()` draw, uniform in [-1, 1] (floating tensors only)."""


@dataclass(frozen=True)
class Seeds:
    """Every seed of one evaluation."""

    init_seed: int
    """Both models are built after torch.manual_seed(init_seed)."""
    input_seeds: tuple[int, ...]
    """One per `get_inputs()` correctness set."""
    extra_seeds: tuple[int, ...]
    """One per other-distribution set."""
    timing_seeds: tuple[int, ...] = ()
    """One per timing base set (`make_timing_sets`): sets no correctness call ever saw."""

    def to_dict(self) -> dict[str, Any]:
        return {"init_seed": self.init_seed, "input_seeds": list(self.input_seeds), "extra_seeds": list(self.extra_seeds),
                "timing_seeds": list(self.timing_seeds)}


def draw_seeds(correctness_trials: int, extra_trials: int, timing_sets: int = 0) -> Seeds:
    """Fresh, unpredictable seeds (31 bits: torch.manual_seed accepts them on every platform)."""
    return Seeds(init_seed=secrets.randbits(31),
                 input_seeds=tuple(secrets.randbits(31) for _ in range(correctness_trials)),
                 extra_seeds=tuple(secrets.randbits(31) for _ in range(extra_trials)),
                 timing_seeds=tuple(secrets.randbits(31) for _ in range(timing_sets)))


def _redistribute(x: Any, kind: str) -> Any:
    import torch

    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        return x  # integer tensors are indices / targets: another distribution would change their meaning
    if kind == "normal_x3":
        return torch.randn(x.shape, dtype=x.dtype, device=x.device) * 3
    if kind == "negated":
        return -x
    if kind == "uniform_pm1":
        return torch.rand(x.shape, dtype=x.dtype, device=x.device) * 2 - 1
    raise ValueError(f"unknown distribution {kind!r}")


def make_input_sets(get_inputs: Callable[[], list[Any]], seeds: Seeds) -> list[list[Any]]:
    """`len(input_seeds)` draws of `get_inputs()`, then one other-distribution set per extra seed."""
    import torch

    sets = []
    for seed in seeds.input_seeds:
        torch.manual_seed(seed)
        sets.append(list(get_inputs()))
    for i, seed in enumerate(seeds.extra_seeds):
        torch.manual_seed(seed)
        base = list(get_inputs())
        kind = EXTRA_DISTRIBUTIONS[i % len(EXTRA_DISTRIBUTIONS)]
        sets.append([_redistribute(x, kind) for x in base])
    return sets


def make_timing_sets(get_inputs: Callable[[], list[Any]], seeds: Seeds) -> list[list[Any]]:
    """The timing base sets: one `get_inputs()` draw per timing seed. Why not the correctness sets: a candidate
    has seen those (and may have cached what it computed on them); a timed call's input is one of these,
    perturbed element by element with fresh factors (`kernelbench.harness.child.timing`), so it is never a correctness set
    nor a scalar multiple of one."""
    import torch

    sets = []
    for seed in seeds.timing_seeds:
        torch.manual_seed(seed)
        sets.append(list(get_inputs()))
    return sets


def to_device(values: list[Any], device: str) -> list[Any]:
    import torch

    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def clone_args(values: list[Any]) -> list[Any]:
    """Fresh copies for one call, so a kernel that writes its inputs cannot change the next trial's."""
    import torch

    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]
