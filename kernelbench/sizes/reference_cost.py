"""What a problem's reference costs at a given size: counted on the meta device, timed on one thread.

The size search (`kernelbench.sizes.size_probe`) reads these inside the sandbox. `meta_cost` runs one forward
on the `meta` device (shapes only: no memory, no arithmetic) and counts its FLOPs, bytes moved and ops, so a
first real run is chosen from an estimate (`estimate_ms`) and a GPU size is never run; `measure` times real
forwards on the calling thread's CPU clock (`time.thread_time`), which stays put while other processes
share the core.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from kernelbench.tasks import cpu_size_records
from kernelbench.tasks.problem import exec_source

# Imports inside functions: torch (1-2 s to import) loads when this module's work runs; importing it stays free of
# torch, and so do the modules that import it at their top.

RUNS = 5
RUN_CAP_MS = 400.0
"""Never time a configuration whose calibrated estimate exceeds this (nor one whose first call does)."""
EST_FLOP_S, EST_BYTE_S, EST_OP_S = 2e10, 4e9, 4e-6
"""Nominal one-core rates, for the first guess only: every later guess is calibrated on a measurement."""


def _exec(source: str, filename: str, overrides: dict[str, Any]):
    module = exec_source(source, filename)
    cpu_size_records.apply_overrides(module, overrides)
    return module


def meta_cost(source: str, filename: str, overrides: dict[str, Any]) -> tuple[float, float, int] | str:
    """(FLOPs, bytes written and read, ops) of one forward on the meta device, or the error that stopped it."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    class Traffic(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.bytes, self.ops = 0.0, 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            self.ops += 1
            if not any(r.alias_info is not None for r in func._schema.returns):  # views move nothing
                for t in _tensors((out, args, kwargs)):
                    self.bytes += t.numel() * t.element_size()
            return out

    try:
        module = _exec(source, filename, overrides)
        torch.manual_seed(0)
        with torch.device("meta"), torch.no_grad():
            model = module.Model(*module.get_init_inputs()).eval()
            inputs = module.get_inputs()
            with FlopCounterMode(display=False) as flops, Traffic() as traffic:
                model(*inputs)
        return float(flops.get_total_flops()), traffic.bytes, traffic.ops
    except Exception as e:  # any failure means "not runnable like this on meta"; the caller decides why
        return f"{type(e).__name__}: {str(e)[:200]}"


def _tensors(value: Any, depth: int = 0):
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 3 and isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v, depth + 1)


def estimate_ms(cost: tuple[float, float, int]) -> float:
    flops, nbytes, ops = cost
    return 1e3 * (flops / EST_FLOP_S + nbytes / EST_BYTE_S + ops * EST_OP_S)


def measure(source: str, filename: str, overrides: dict[str, Any], runs: int = RUNS) -> tuple[float, float]:
    """(median thread-CPU ms, median wall ms) of the reference forward, built as the harness builds it."""
    import torch

    module = _exec(source, filename, overrides)
    torch.manual_seed(0)
    with torch.no_grad():
        model = module.Model(*module.get_init_inputs()).eval()
        inputs = module.get_inputs()
        cpu, wall = [], []
        for i in range(runs + 1):  # the first call warms caches and allocator; it is not counted
            c0, w0 = time.thread_time(), time.perf_counter()
            model(*inputs)
            c1, w1 = time.thread_time(), time.perf_counter()
            if i == 0 and (c1 - c0) * 1e3 > RUN_CAP_MS:
                return (c1 - c0) * 1e3, (w1 - w0) * 1e3
            if i:
                cpu.append((c1 - c0) * 1e3)
                wall.append((w1 - w0) * 1e3)
    return statistics.median(cpu), statistics.median(wall)
