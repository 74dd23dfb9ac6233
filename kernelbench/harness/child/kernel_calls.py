"""Counting calls into the candidate's compiled kernels, so a ghost kernel (compiled, never run) is caught.

Call `install()` in the run child before the candidate module is imported, `reset()` just before the
forward to judge and `count()` after it (`op_policy.judge_ops` takes the number).

What is wrapped: the module `torch.utils.cpp_extension.load_inline` / `load` return has each of its
functions (pybind `builtin_function_or_method`s) replaced in place by a counting wrapper, so every route to
the module object (the returned value, a second load of the same name) sees the wrapper; with cupy present,
`cupy.RawModule` and `cupy.RawKernel` are replaced by subclasses whose kernels count launches; for a Triton
candidate (`install(triton=True)`), the `run` method every `kernel[grid](...)` launch goes through is wrapped on
both classes `triton.jit` returns (compiled and interpreted: `launch_classes`).
What is covered: a candidate that binds `load_inline` by any import form after `install()`, calls kernels
through the module or stored references to its functions, or reloads the module. The wrapper has no
`__wrapped__`, and reaching its closure needs dunder access, which the static checks reject.
What is not: functions bound before `install()` (the harness installs first), ops the extension registers
with TORCH_LIBRARY and calls through `torch.ops`, a `.so` loaded by path (`torch.ops.load_library`, ctypes),
methods of pybind classes, and cupy kernels from `ElementwiseKernel`/`ReductionKernel`. The static checks
reject the spellings of all of these, so they show up as `static:` flags rather than miscounts.
Cost: one Python call frame and an integer add per kernel call (measured in tests/test_op_policy.py).
"""

from __future__ import annotations

import importlib.util
import inspect
import types
from typing import Any, Callable

import torch.utils.cpp_extension as cpp_extension

# Imports inside functions: optional or GPU-only libraries (triton's runtime, cupy: only when a candidate uses them)
# are imported only where they are used, so a machine without them runs everything else.

_calls = 0
_originals: dict[str, Callable[..., Any]] = {}
_MARK = "_kernel_agent_counting"
_wrappers: list[tuple[Any, str, Callable[..., Any], Callable[..., Any]]] = []
"""(module, name, wrapper, wrapped function) of every counting wrapper made, for `wrappers_intact`."""


def count() -> int:
    """Kernel calls since the last `reset()`."""
    return _calls


def reset() -> None:
    global _calls
    _calls = 0


def _counting(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A wrapper that counts and forwards; not functools.wraps, whose `__wrapped__` would hand back `fn`."""
    def call(*args: Any, **kwargs: Any) -> Any:
        global _calls
        _calls += 1
        return fn(*args, **kwargs)
    call.__name__ = call.__qualname__ = getattr(fn, "__name__", "kernel")
    call.__doc__ = getattr(fn, "__doc__", None)
    setattr(call, _MARK, True)
    return call


def wrappers_intact() -> list[str]:
    """Names of counting wrappers that were rebound, given other code, or made to call something else
    (empty: intact). The run child checks this after every phase: the wrappers are made after its snapshot."""
    bad = []
    for module, name, wrapper, fn in list(_wrappers):
        cells = wrapper.__closure__ or ()
        if wrapper.__code__ is not _CALL_CODE or len(cells) != 1 or cells[0].cell_contents is not fn \
                or vars(module).get(name) is not wrapper:
            bad.append(f"kernel_calls wrapper {getattr(module, '__name__', '?')}.{name}")
    return bad


_CALL_CODE = _counting(len).__code__


def wrap_module(module: Any) -> Any:
    """Replace each compiled function of an extension module by a counting wrapper, in place; returns it."""
    if not isinstance(module, types.ModuleType):
        return module  # load_inline(is_python_module=False) returns a path: nothing callable to wrap
    for name, value in list(vars(module).items()):
        if isinstance(value, types.BuiltinFunctionType) and not name.startswith("__") \
                and not getattr(value, _MARK, False):
            wrapper = _counting(value)
            setattr(module, name, wrapper)
            _wrappers.append((module, name, wrapper, value))
    return module


def _wrap_loader(loader: Callable[..., Any]) -> Callable[..., Any]:
    def load(*args: Any, **kwargs: Any) -> Any:
        return wrap_module(loader(*args, **kwargs))
    load.__name__ = load.__qualname__ = loader.__name__
    load.__doc__ = loader.__doc__
    # torch's signature for introspection (load_inline_hook.patch_load_inline binds arguments by name); not `__wrapped__`,
    # which would hand the candidate the uncounted loader
    load.__signature__ = inspect.signature(loader)
    setattr(load, _MARK, True)
    return load


def install(triton: bool = False) -> None:
    """Wrap the loaders (idempotent). Imports cupy only when it is installed, and only here; triton only when
    the candidate is a Triton one (`triton`: importing it costs a second per run child)."""
    for name in ("load_inline", "load"):
        current = getattr(cpp_extension, name)
        if not getattr(current, _MARK, False):
            _originals[name] = current
            setattr(cpp_extension, name, _wrap_loader(current))
    if "cupy" not in _originals and importlib.util.find_spec("cupy") is not None:
        import cupy

        install_cupy(cupy)
    if triton:
        install_triton()


def launch_classes() -> list[Any]:
    """The classes whose `run` launches a kernel: `JITFunction` (compiled) and `InterpretedFunction` (the
    interpreter), the two things `triton.jit` returns. `Autotuner` and `Heuristics` launch through them."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    return [JITFunction, InterpretedFunction]


def install_triton() -> None:
    """Count every Triton launch: `run` of each launch class replaced by a counting wrapper (checked by
    `wrappers_intact` like the extension modules' functions)."""
    for cls in launch_classes():
        run = vars(cls)["run"]
        if not getattr(run, _MARK, False):
            wrapper = _counting(run)
            setattr(cls, "run", wrapper)
            _wrappers.append((cls, "run", wrapper, run))


class _CountingKernel:
    """Launch-counting stand-in for a kernel `RawModule.get_function` returns; attributes pass through."""

    def __init__(self, kernel: Any):
        object.__setattr__(self, "_kernel", kernel)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        global _calls
        _calls += 1
        return self._kernel(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kernel, name)


def install_cupy(cupy: Any) -> None:
    """Replace `cupy.RawKernel` and `cupy.RawModule` by counting subclasses. Both are Cython extension types
    whose methods cannot be reassigned, so subclasses stand in for them in the `cupy` namespace."""
    raw_kernel, raw_module = cupy.RawKernel, cupy.RawModule

    class RawKernel(raw_kernel):  # type: ignore[misc, valid-type]
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            global _calls
            _calls += 1
            return super().__call__(*args, **kwargs)

    class RawModule(raw_module):  # type: ignore[misc, valid-type]
        def get_function(self, name: str) -> Any:
            return _CountingKernel(super().get_function(name))

    _originals.update({"cupy": cupy, "cupy.RawKernel": raw_kernel, "cupy.RawModule": raw_module})
    cupy.RawKernel, cupy.RawModule = RawKernel, RawModule


def compiled_functions() -> list[tuple[str, Callable[..., Any]]]:
    """(name, compiled function) of every extension function wrapped so far: the profiler names their calls
    (`kernelbench.harness.child.profiler.profile_call`)."""
    return [(name, fn) for _, name, _, fn in _wrappers]
