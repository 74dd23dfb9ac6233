"""Undo `kernel_calls.install` between tests: the run child never needs it (it installs once and exits), so the
undo lives with the tests that install in the test process itself."""

from __future__ import annotations

from torch.utils import cpp_extension

from kernelbench.harness.child import kernel_calls


def uninstall() -> None:
    """Restore the original loaders, Triton's launch classes and cupy's kernel classes."""
    originals, wrappers = kernel_calls._originals, kernel_calls._wrappers
    for name in ("load_inline", "load"):
        if name in originals:
            setattr(cpp_extension, name, originals.pop(name))
    for cls, name, wrapper, run in [w for w in wrappers if isinstance(w[0], type)]:
        if vars(cls).get(name) is wrapper:
            setattr(cls, name, run)
        wrappers.remove((cls, name, wrapper, run))
    cupy = originals.pop("cupy", None)
    if cupy is not None:
        cupy.RawKernel, cupy.RawModule = originals.pop("cupy.RawKernel"), originals.pop("cupy.RawModule")
