"""The run child's audit of itself: a `Snapshot` of every object its measurement and checks depend on, taken
before the candidate is imported, verified and restored after every phase (`audit`): what the candidate
rebound is reported as `timer_patched` (a timer) or `harness_tampered` (anything else of the harness)."""

from __future__ import annotations

import builtins
import dataclasses
import json
import os
import sys
import threading
import time
import traceback
import types
from typing import Any

import torch
import torch.utils._python_dispatch as python_dispatch

from kernelbench.harness import protocol, record_codec
from kernelbench.harness.child import (build_flags, build_manifest, load_inline_hook, outputs, profiled_call,
                                       progress, reference, report, spawn_guard, timing)
from kernelbench.tasks import inputs

# Imports inside functions: torch.utils.cpp_extension (0.16 s to import) loads only when a build needs it: a warm
# `kernel-agent eval` pays every import.


class Snapshot:
    """Identity of every function, class and module the run child's measurement and checks depend on.

    Taken after the harness is installed and BEFORE the candidate is imported: the candidate shares this
    process, so it can rebind anything (`sys.modules["kernelbench.harness.child.timing"]._perf_counter`, a tracer method,
    `kernel_calls.count`, a function's `__code__`). `changed()` lists what differs from the capture;
    `restore()` puts the captured objects back so the remaining phases measure and trace honestly (the
    candidate is rejected either way). Holders: module dicts (callables, classes, modules, and callables in
    dicts they hold) and class dicts (every entry); functions also keep their code and defaults.
    """

    SKIP = {"__dict__", "__weakref__", "__doc__", "__module__", "__annotations__", "_abc_impl"}
    NEW_NAMES_ALLOWED = {"__warningregistry__"}
    """Names Python itself adds to a harness module: the warnings machinery's record of a warning the harness's
    code gave (a candidate that used up `vm.max_map_count` made one in `call_inputs`): a fault the candidate
    caused there is judged by what it broke, not as tampering."""

    def __init__(self, holders: list[tuple[str, Any]]):
        self.entries: list[tuple[str, Any, Any, Any, tuple[Any, ...]]] = []
        # The harness's own modules and classes get no new names either (a planted `_perf_counter`).
        self.closed = [(label, holder, set(vars(holder))) for label, holder in holders if label.startswith("kernelbench.")]
        for label, holder in holders:
            is_class = isinstance(holder, type)
            for name, value in list(vars(holder).items()):
                if name in self.SKIP:
                    continue
                if is_class or callable(value) or isinstance(value, types.ModuleType):
                    self.entries.append((label, holder, name, value, self._inner(value)))
                elif isinstance(value, dict) and holder.__name__.startswith("kernelbench."):
                    for key, item in list(value.items()):
                        if callable(item):
                            self.entries.append((f"{label}.{name}", value, key, item, self._inner(item)))

    @staticmethod
    def _inner(value: Any) -> tuple[Any, ...]:
        if isinstance(value, types.FunctionType):
            return (value.__code__, value.__defaults__, value.__kwdefaults__)
        return ()

    @staticmethod
    def _get(holder: Any, name: str) -> Any:
        return holder.get(name) if isinstance(holder, dict) else vars(holder).get(name)

    @staticmethod
    def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
        return len(a) == len(b) and all(x is y for x, y in zip(a, b))

    def changed(self) -> list[tuple[str, str]]:
        """(holder label, name) of every captured entry rebound or altered since the capture."""
        found = [(label, name) for label, holder, name, value, inner in self.entries
                 if self._get(holder, name) is not value or not self._same(self._inner(value), inner)]
        return found + [(label, name) for label, holder, names in self.closed for name in self._new(holder, names)]

    def _new(self, holder: Any, names: set[str]) -> set[str]:
        return set(vars(holder)) - names - self.NEW_NAMES_ALLOWED

    def restore(self) -> None:
        for _, holder, names in self.closed:
            for name in self._new(holder, names):
                try:
                    delattr(holder, name)
                except (AttributeError, TypeError):
                    continue
        for _, holder, name, value, inner in self.entries:
            try:
                if isinstance(holder, dict):
                    holder[name] = value
                elif vars(holder).get(name) is not value:
                    setattr(holder, name, value)
                if inner and not self._same(self._inner(value), inner):
                    value.__code__, value.__defaults__, value.__kwdefaults__ = inner
            except (AttributeError, TypeError):
                continue


def harness_holders(own: list[types.ModuleType]) -> list[tuple[str, Any]]:
    """Everything `Snapshot` guards: the timers, the harness's own modules and classes, and the parts of
    Python and torch the worker calls to copy, trace, serialise and write its result. `own`: the run child's
    modules that import this one (its phases, its entry point) and its checks, passed in by the caller rather
    than imported here (no import circle)."""

    import torch.utils.cpp_extension as cpp_extension

    modules = [builtins, time, os, os.path, json, threading, traceback, types, dataclasses, torch, torch.cuda,
               torch.serialization, python_dispatch, cpp_extension, timing, inputs, load_inline_hook, report, progress,
               spawn_guard]
    modules += [build_flags, build_manifest, protocol, record_codec, sys.modules[__name__], outputs, profiled_call, reference]
    modules += [m for m in own if m not in modules]
    classes = [torch.Tensor, torch.cuda.Event, python_dispatch.TorchDispatchMode, timing.Timers, Snapshot]
    classes += [v for m in modules if m.__name__.startswith("kernelbench.") for v in vars(m).values()
                if isinstance(v, type) and v.__module__ == m.__name__ and v not in classes]
    return [(m.__name__, m) for m in modules] + [(f"{c.__module__}.{c.__qualname__}", c) for c in classes]


def is_timer(label: str, name: str) -> bool:
    return label in ("time", "kernelbench.harness.child.timing", "kernelbench.harness.child.timing.Timers", "torch.cuda.Event") \
        or label.startswith("kernelbench.harness.child.timing.") or f"{label}.{name}" in timing.PUBLIC_TIMERS


def audit(snapshot: Snapshot, result: dict[str, Any], phase: str, extra: list[str]) -> None:
    """Record what the candidate rebound up to the end of `phase` (timer or harness), then undo it."""
    for label, name in snapshot.changed():
        key = "timer_patched" if is_timer(label, name) else "harness_tampered"
        result.setdefault(key, []).append(f"{label}.{name} (by the end of {phase})")
    for item in extra:
        result.setdefault("harness_tampered", []).append(f"{item} (by the end of {phase})")
    snapshot.restore()
