"""The user's model and its example inputs, from an ENTRY: `pkg.module:build` or `path/to/script.py:build`.

`build()` takes no arguments and returns `(model, inputs)`: an `nn.Module` and what its forward is called with,
a tuple or list of positional arguments, a dict of keyword arguments, or one tensor. `kernel-agent hotspots` and
`kernel-agent apply` both start here; every way an ENTRY can be wrong is one `EntryError` line.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import Any

# Imports inside functions: torch (1-2 s to import) loads when this module's work runs; importing it stays free of
# torch, and so do the modules that import it at their top.


class EntryError(ValueError):
    """An ENTRY that does not name a usable factory; the message is one line naming ENTRY and what is wrong."""


@dataclass(frozen=True)
class Entry:
    """A built model, in eval mode on its device, and the arguments of its example forward."""

    spec: str
    """The ENTRY as given."""
    model: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def forward(self) -> Any:
        return self.model(*self.args, **self.kwargs)


def split_spec(spec: str) -> tuple[str, str]:
    """(module or file, function name) of `pkg.mod:build` / `dir/script.py:build`."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise EntryError(f"ENTRY {spec!r}: expected MODULE:FUNCTION or path/to/script.py:FUNCTION")
    return where, name


def _import(spec: str, where: str) -> Any:
    if where.endswith(".py") or os.sep in where:
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise EntryError(f"ENTRY {spec}: no file {where}")
        folder = os.path.dirname(path)
        if folder not in sys.path:  # the script's sibling modules import as they do when it runs
            sys.path.insert(0, folder)
        name = "kernel_agent_entry_" + os.path.splitext(os.path.basename(path))[0]
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module  # dataclasses and pickling look the module up by name
        loader = module_spec.loader
        run = lambda: loader.exec_module(module)  # noqa: E731
    else:
        if os.getcwd() not in sys.path and "" not in sys.path:  # `python -m` semantics: the working folder first
            sys.path.insert(0, os.getcwd())
        run = lambda: importlib.import_module(where)  # noqa: E731
        module = None
    try:
        found = run()
    except Exception as e:  # whatever the user's module raises while importing is the user's to see, in one line
        raise EntryError(f"ENTRY {spec}: importing {where} failed: {type(e).__name__}: {_line(e)}") from None
    return module if module is not None else found


def _line(e: BaseException) -> str:
    return " ".join(str(e).split())[:300]


def load_entry(spec: str, device: str = "cpu") -> Entry:
    """Import ENTRY, call its factory, check what it returned, and put the model (eval mode) and the tensor
    inputs on `device`. Raises EntryError with one line for every way this fails."""
    import torch

    where, name = split_spec(spec)
    module = _import(spec, where)
    factory = getattr(module, name, None)
    if not callable(factory):
        raise EntryError(f"ENTRY {spec}: {where} defines no function {name}")
    try:
        built = factory()
    except Exception as e:
        raise EntryError(f"ENTRY {spec}: {name}() raised {type(e).__name__}: {_line(e)}") from None
    if not (isinstance(built, (tuple, list)) and len(built) == 2 and isinstance(built[0], torch.nn.Module)):
        raise EntryError(f"ENTRY {spec}: {name}() must return (model, inputs) with model an nn.Module; "
                         f"got {_kind(built)}")
    model, inputs = built
    if isinstance(inputs, torch.Tensor):
        args, kwargs = (inputs,), {}
    elif isinstance(inputs, dict) and all(isinstance(k, str) for k in inputs):
        args, kwargs = (), dict(inputs)
    elif isinstance(inputs, (tuple, list)):
        args, kwargs = tuple(inputs), {}
    else:
        raise EntryError(f"ENTRY {spec}: {name}()'s inputs must be a tuple or list of positional arguments, a dict "
                         f"of keyword arguments or one tensor; got {type(inputs).__name__}")
    model = model.to(device).eval()
    move = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v  # noqa: E731
    return Entry(spec=spec, model=model, args=tuple(move(a) for a in args),
                 kwargs={k: move(v) for k, v in kwargs.items()})


def _kind(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} ({', '.join(type(v).__name__ for v in value[:3])})"
    return type(value).__name__
