"""Where a user's model spends its forward: `kernel-agent hotspots ENTRY`.

Every submodule's calls are wrapped in a `torch.profiler` user annotation named after its path (`layers.3.mlp`),
opened by a forward pre-hook and closed by a forward hook, and the forward runs `repeats` times under the
profiler after one untimed warm-up call (which also records each submodule's input shapes and call count).
A submodule's time includes its own submodules' (the profiler's total time of its annotation): rows nest, and
the shares of a module and of its children do not add up. On CPU the time is the annotation's CPU time; on
CUDA its device time (the kernels its calls launched), since launches return before the work is done.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable

from agent.entry import Entry

# Imports inside functions: torch (1-2 s to import) loads when this module's work runs; importing it stays free of
# torch, and so do the modules that import it at their top.

LABEL = "hotspot::"
"""Prefix of the profiler annotations this module opens (`hotspot::layers.3.mlp`; the whole forward: `hotspot::`)."""


@dataclass(frozen=True)
class ModuleTime:
    """One submodule's part of the forward."""

    path: str
    """Its name in `model.named_modules()`, e.g. `model.layers.3.mlp`."""
    kind: str
    """Its class name."""
    total_ms: float
    """Time per forward inside its calls, its own submodules' included."""
    share: float
    """`total_ms` over the whole forward's time (0..1)."""
    calls: int
    """Calls per forward."""
    inputs: str
    """Its first call's arguments: tensors as dtype[shape], other values by type or value."""


@dataclass(frozen=True)
class Hotspots:
    """A profile of one ENTRY's forward."""

    entry: str
    device: str
    forward_ms: float
    """Mean time of one forward under the profiler (its annotation's total over `repeats`)."""
    repeats: int
    """Forwards profiled (after one untimed warm-up)."""
    modules: tuple[ModuleTime, ...]
    """Every submodule that ran, the root excepted, slowest first."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def describe(value: Any) -> str:
    """A short description of one argument: `f32[2, 64, 128]`, `[f32[2, 64], f32[2, 64]]`, `None`, `bool True`."""
    import torch

    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.").replace("float", "f").replace("int", "i")
        return f"{dtype}{list(value.shape)}"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(describe(v) for v in value) + "]"
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    return type(value).__name__


def describe_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    parts = [describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in kwargs.items() if v is not None]
    return ", ".join(parts)


class _Annotations:
    """The hooks: one profiler annotation around each call of each submodule; the first call's inputs."""

    def __init__(self, model: Any):
        self.paths = {id(m): p for p, m in model.named_modules() if p}
        self.open: dict[str, list[Any]] = {}
        self.calls: dict[str, int] = {}
        self.inputs: dict[str, str] = {}
        self.annotate = False
        self.handles = []
        for path, module in model.named_modules():
            if path:
                self.handles.append(module.register_forward_pre_hook(self._pre, with_kwargs=True))
                self.handles.append(module.register_forward_hook(self._post, always_call=True))

    def _pre(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        import torch

        path = self.paths[id(module)]
        if not self.annotate:  # the warm-up call: count calls, record the first call's inputs
            self.calls[path] = self.calls.get(path, 0) + 1
            self.inputs.setdefault(path, describe_call(args, kwargs))
            return
        annotation = torch.autograd.profiler.record_function(LABEL + path)
        annotation.__enter__()
        self.open.setdefault(path, []).append(annotation)

    def _post(self, module: Any, args: Any, output: Any) -> None:
        stack = self.open.get(self.paths[id(module)])
        if self.annotate and stack:
            stack.pop().__exit__(None, None, None)

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def profile_hotspots(entry: Entry, device: str, repeats: int = 5,
                     on_progress: Callable[[int, int], None] | None = None) -> Hotspots:
    """Profile `entry`'s forward `repeats` times (after one warm-up) and attribute its time to submodules."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    hooks = _Annotations(entry.model)
    try:
        with torch.no_grad():
            entry.forward()
            sync()
            hooks.annotate = True
            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
            with profile(activities=activities) as prof:
                for i in range(repeats):
                    with torch.autograd.profiler.record_function(LABEL):
                        entry.forward()
                        sync()
                    if on_progress:
                        on_progress(i + 1, repeats)
    finally:
        hooks.remove()
    totals: dict[str, float] = {}
    for event in prof.key_averages():
        if event.key.startswith(LABEL):
            us = event.device_time_total if device == "cuda" else event.cpu_time_total
            totals[event.key[len(LABEL):]] = us / 1e3 / repeats
    forward_ms = totals.pop("", 0.0)
    if forward_ms <= 0:
        raise RuntimeError("the profiler recorded no time for the forward")
    kinds = {p: type(m).__name__ for p, m in entry.model.named_modules()}
    rows = [ModuleTime(path=p, kind=kinds[p], total_ms=ms, share=min(ms / forward_ms, 1.0),
                       calls=hooks.calls.get(p, 0), inputs=hooks.inputs.get(p, "")) for p, ms in totals.items()]
    rows.sort(key=lambda r: (-r.total_ms, r.path))
    return Hotspots(entry=entry.spec, device=device, forward_ms=forward_ms, repeats=repeats, modules=tuple(rows))
