"""Input configurations: the shapes a task's correctness is checked at, besides the one it is timed at.

A problem file may define `INPUT_CONFIGS`, a list of dicts of module-level size constants, in the style of
`CPU_SIZE`. Configuration 1 is the file's own constants at the chosen size (after `CPU_SIZE` for `cpu`); it is
the one the harness times, profiles and counts bytes and FLOPs for. Each dict adds one configuration: the same
constants with those names overridden (names it leaves out keep the size's value), drawn by the same
`get_inputs()`. The harness checks correctness on every configuration, so a kernel that hard-codes its task's
sizes is `incorrect`.

Why dicts of constants rather than `get_inputs`-style factories: the file stays a plain KernelBench problem
(KernelBench reads only `get_inputs`), every configuration's inputs come from the one `get_inputs` under the
same seeds and distributions, and listing counts the configurations with `ast` without executing the file.

A configuration changes inputs only. The model is built once, from `get_init_inputs()` at configuration 1
(as KernelBench builds it), so a configuration must leave `get_init_inputs()` unchanged: a dict that changes
a parameter's size (`in_features`, `in_channels`) is a `TaskFormatError`. Rebuilding the model per
configuration was the alternative; it would run the candidate's `__init__` (which may compile) once per
configuration and judge weights that differ between configurations, for little more coverage.
"""

from __future__ import annotations

import random
import types
from dataclasses import dataclass, replace
from typing import Any, Callable

from kernelbench.tasks.inputs import Seeds, make_input_sets
from kernelbench.tasks.task import TaskFormatError

# Imports inside functions: torch loads when inputs are drawn; the task catalog and `kernel-agent tasks` import the
# task records without it.

NAME = "INPUT_CONFIGS"
RESERVED = ("Model", "get_inputs", "get_init_inputs", "CPU_SIZE", NAME, "OP_POLICY")
"""Module names a configuration may not override: code and the task format's own settings."""


@dataclass(frozen=True)
class InputConfig:
    """One input configuration of a loaded problem."""

    index: int
    """0 for the file's own constants (the timed configuration), then 1, 2, ... in `INPUT_CONFIGS` order."""
    overrides: tuple[tuple[str, Any], ...]
    """(constant, value) pairs this configuration sets on top of the size's constants; empty for index 0."""
    get_inputs: Callable[[], list[Any]]
    """Draws this configuration's inputs (sets the constants, calls the file's `get_inputs`, restores them)."""

    def describe(self) -> str:
        """The overridden constants, e.g. `batch_size=37, dim=1531` (empty for the timed configuration)."""
        return ", ".join(f"{k}={v!r}" for k, v in self.overrides)


def _factory(module: types.ModuleType, overrides: dict[str, Any]) -> Callable[[], list[Any]]:
    """`get_inputs` under `overrides`. The constants are restored after each draw, so the reference model's
    forward (which may read module globals) always runs at configuration 1's values."""
    get_inputs = module.get_inputs
    names = module.__dict__

    def draw() -> list[Any]:
        saved = {k: names[k] for k in overrides}
        names.update(overrides)
        try:
            return list(get_inputs())
        finally:
            names.update(saved)

    return draw


def _signature(value: Any) -> Any:
    """What must agree between configurations' init inputs: tensors by dtype and shape, other values as they are."""
    import torch

    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype), tuple(value.shape))
    if isinstance(value, (list, tuple)):
        return tuple(_signature(v) for v in value)
    if type(value).__eq__ is object.__eq__:  # compared by identity: a fresh object per call would never match
        return ("object", type(value).__qualname__)
    return value


def _init_signature(module: types.ModuleType, overrides: dict[str, Any]) -> Any:
    import torch

    names = module.__dict__
    saved = {k: names[k] for k in overrides}
    names.update(overrides)
    try:
        with torch.random.fork_rng(devices=[]):  # the caller's random stream is left as it was
            return _signature(list(module.get_init_inputs()))
    finally:
        names.update(saved)


def read_configs(module: types.ModuleType, filename: str) -> tuple[InputConfig, ...]:
    """Every configuration of an executed problem module (at its chosen size), the timed one first.

    Raises TaskFormatError naming the file and the configuration when `INPUT_CONFIGS` is not a list of
    non-empty dicts of the module's own constants with values of the constants' types, or when one changes
    `get_init_inputs()`."""
    first = InputConfig(0, (), _factory(module, {}))
    declared = getattr(module, NAME, None)
    if declared is None:
        return (first,)
    if not isinstance(declared, (list, tuple)):
        raise TaskFormatError(f"{filename}: {NAME} must be a list of dicts of module constants "
                              f"(one extra input configuration each), got {type(declared).__name__}")
    configs = [first]
    base_init = None
    for i, entry in enumerate(declared):
        where = f"{filename}: {NAME}[{i}] (configuration {i + 2})"
        if not isinstance(entry, dict) or not entry:
            raise TaskFormatError(f"{where} must be a non-empty dict of module constants to override, got {entry!r}")
        for key, value in entry.items():
            if not isinstance(key, str) or key in RESERVED or key.startswith("__"):
                raise TaskFormatError(f"{where}: {key!r} is not a size constant a configuration may set")
            if key not in module.__dict__:
                raise TaskFormatError(f"{where}: names {key!r}, which the module does not define")
            current = module.__dict__[key]
            if isinstance(current, (types.FunctionType, type, types.ModuleType)) or type(value) is not type(current):
                raise TaskFormatError(f"{where}: {key}={value!r} must have the type of the module's "
                                      f"{key} ({type(current).__name__})")
        if base_init is None:
            base_init = _init_signature(module, {})
        if _init_signature(module, entry) != base_init:
            raise TaskFormatError(f"{where}: changes get_init_inputs() through {', '.join(entry)}; the model is "
                                  f"built once, so a configuration may change only what get_inputs() alone reads")
        configs.append(InputConfig(i + 1, tuple(entry.items()), _factory(module, dict(entry))))
    return tuple(configs)


def config_seed(seed: int, index: int) -> int:
    """The seed configuration `index` uses in place of `seed`: derived from the evaluation's secret seed (so as
    unpredictable) but distinct per configuration, so no configuration's draw is a prefix of another's."""
    if index == 0:
        return seed
    return random.Random(f"input config {index} {seed}").getrandbits(31)  # str seeds hash with SHA-512


def config_seeds(seeds: Seeds, index: int) -> Seeds:
    """`seeds` for configuration `index`: each correctness seed replaced by `config_seed` (timing seeds unused:
    only the first configuration is timed)."""
    if index == 0:
        return seeds
    return replace(seeds, input_seeds=tuple(config_seed(s, index) for s in seeds.input_seeds),
                   extra_seeds=tuple(config_seed(s, index) for s in seeds.extra_seeds), timing_seeds=())


def make_config_sets(configs: tuple[InputConfig, ...], seeds: Seeds) -> tuple[list[list[Any]], list[int]]:
    """The correctness sets of every configuration after the first (`make_input_sets` with each one's seeds),
    and the configuration index of each set."""
    sets: list[list[Any]] = []
    owners: list[int] = []
    for config in configs[1:]:
        more = make_input_sets(config.get_inputs, config_seeds(seeds, config.index))
        sets += more
        owners += [config.index] * len(more)
    return sets, owners


def describe_inputs(values: list[Any]) -> str:
    """Compact shapes of one input set, e.g. `float32[37, 1531], int64[37]` (no values: nothing to leak)."""
    import torch

    parts = []
    for v in values:
        if isinstance(v, torch.Tensor):
            parts.append(f"{str(v.dtype).removeprefix('torch.')}{list(v.shape)}")
        else:
            text = repr(v)
            parts.append(text if len(text) <= 20 else type(v).__name__)
    return ", ".join(parts)


def labels(configs: tuple[InputConfig, ...], sets: list[list[Any]], owners: list[int]) -> list[str]:
    """`label` of every configuration, its shapes read from its first correctness set."""
    out = []
    for config in configs:
        first = owners.index(config.index) if config.index in owners else -1
        shapes = describe_inputs(sets[first]) if first >= 0 else "(no correctness sets)"
        out.append(label(config.index, len(configs), config.describe(), shapes))
    return out


def label(index: int, count: int, config_text: str, shapes: str) -> str:
    """How feedback names a configuration: `configuration 2 of 2 (batch_size=37, dim=1531: inputs float32[37, 1531])`."""
    head = f"configuration {index + 1} of {count}"
    what = f"{config_text}: " if config_text else ("the timed one: " if index == 0 else "")
    return f"{head} ({what}inputs {shapes})"
