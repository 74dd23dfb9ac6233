"""Putting an optimized submodule back: `kernel-agent apply RUN_DIR --into ENTRY --at PATH`, or `swap_in` in code.

RUN_DIR is an `optimize` run on a task file `hotspots --extract` wrote. Its `best.py`'s `ModelNew` is built,
checked to have the submodule's `state_dict` names and shapes, loaded with the submodule's own (trained) weights
(`strict=True`), and wrapped so that the model's call of the submodule (keywords, tuples, settings) reaches it as
the task's flat inputs (`agent.call_template`). Then the whole model runs on the example inputs with the original
submodule and with the new one, alternately: the outputs must agree within the harness's tolerances
(`kernelbench.harness.compare`), and the median forward times give the end-to-end speedup. On any failure the
original submodule is put back before the error is raised: the model is left as it was.

`best.py` runs in this process, as it does in any program that uses it: apply only kernels you mean to run.
"""

from __future__ import annotations

import json
import os
import statistics
import time
import types
from dataclasses import asdict, dataclass
from typing import Any

from agent.call_template import flatten_call, output_tensors
from kernelbench.harness.config import EvalConfig
from kernelbench.tasks.problem import exec_source
from kernelbench.tasks.task import TaskFormatError

# Imports inside functions: torch (1-2 s to import) loads when this module's work runs; importing it stays free of
# torch, and so do the modules that import it at their top.


class SwapError(ValueError):
    """Why a kernel cannot be swapped in (one line); the model is unchanged."""


@dataclass(frozen=True)
class SwapOutcome:
    path: str
    """The submodule replaced."""
    original_ms: float
    """Median time of the whole forward with the original submodule."""
    swapped_ms: float
    """Median time of the whole forward with the optimized one."""
    speedup: float
    """`original_ms / swapped_ms`: end to end, the rest of the model included."""
    max_abs_error: float
    """Largest difference between the whole model's outputs before and after."""
    repeats: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class OptimizedRun:
    """What `swap_in` needs of an optimize run: the kernel's source and its task file's namespace."""

    run_dir: str
    solution: str
    task: types.ModuleType


def read_run(run_dir: str) -> OptimizedRun:
    """`best.py` and the task file of an `optimize` run on an extracted task; SwapError otherwise."""

    if not os.path.isdir(run_dir):
        raise SwapError(f"{run_dir}: not a folder (expected an `optimize --out` folder)")
    try:
        with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as f:
            task_file = json.load(f)["file"]
    except (OSError, ValueError, KeyError, TypeError):
        raise SwapError(f"{run_dir}: no config.json naming the task file (not an `optimize --out` folder)") from None
    best = os.path.join(run_dir, "best.py")
    if not os.path.isfile(best):
        raise SwapError(f"{run_dir}: no best.py: the run found no correct kernel (see {run_dir}/report.md)")
    with open(best, encoding="utf-8") as f:
        solution = f.read()
    try:
        with open(task_file, encoding="utf-8") as f:
            task = exec_source(f.read(), task_file, "kernel_agent_swap_task")
    except OSError as e:
        raise SwapError(f"{run_dir}: its task file {task_file} cannot be read: {e.strerror}") from None
    except TaskFormatError as e:
        raise SwapError(str(e)) from None
    if getattr(task, "KEEP_STATE_DICT", False) is not True or not isinstance(getattr(task, "CALL", None), dict):
        raise SwapError(f"{task_file} was not extracted by `kernel-agent hotspots --extract` (no KEEP_STATE_DICT, CALL)")
    return OptimizedRun(run_dir=run_dir, solution=solution, task=task)


def build_kernel(run: OptimizedRun, original: Any, device: str) -> Any:
    """`ModelNew` of `run`, with `original`'s weights, called as `original` is called."""

    try:
        ns = exec_source(run.solution, os.path.join(run.run_dir, "best.py"), "kernel_agent_swap_solution")
        new = ns.ModelNew(*run.task.get_init_inputs()).to(device).eval()
    except (TaskFormatError, AttributeError) as e:
        raise SwapError(f"{run.run_dir}/best.py: {e}") from None
    want = {k: tuple(v.shape) for k, v in original.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in new.state_dict().items()}
    if want != got:
        missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        wrong = [k for k in set(want) & set(got) if want[k] != got[k]]
        raise SwapError("ModelNew's state_dict does not match the submodule's, so its weights cannot be loaded: "
                        + "; ".join(([f"missing {', '.join(missing[:4])}"] if missing else [])
                                    + ([f"unexpected {', '.join(extra[:4])}"] if extra else [])
                                    + [f"{k}: {list(got[k])} vs {list(want[k])}" for k in wrong[:4]]))
    new.load_state_dict(original.state_dict(), strict=True)
    template, base = run.task.CALL, type(new)

    def forward(self, *args, **kwargs):  # the model's call, as the task's flat inputs
        return base.forward(self, *flatten_call(template, args, kwargs))

    new.__class__ = type(f"Swapped{base.__name__}", (base,), {"forward": forward})
    return new


def _parent(model: Any, path: str) -> tuple[Any, str]:
    parent, _, name = path.rpartition(".")
    return (model.get_submodule(parent) if parent else model), name


def swap_in(model: Any, at: str, run_dir: str, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None,
            device: str = "cpu", repeats: int = 10) -> SwapOutcome:
    """Replace `model`'s submodule `at` by `run_dir`'s optimized `ModelNew` with the submodule's weights, after
    checking the whole model's outputs on `args`/`kwargs` (module docstring). Raises SwapError, model unchanged."""
    import torch

    from kernelbench.harness.compare import compare_outputs

    kwargs = kwargs or {}
    if not at:
        raise SwapError("no submodule named: give --at PATH (a path from `kernel-agent hotspots`)")
    try:
        original = model.get_submodule(at)
    except AttributeError:
        near = [p for p, _ in model.named_modules() if p and p.split(".")[-1] == at.split(".")[-1]][:3]
        raise SwapError(f"--at {at}: the model has no such submodule" + (f" (did you mean {', '.join(near)}?)" if near else "")) from None
    run = read_run(run_dir)
    new = build_kernel(run, original, device)
    parent, name = _parent(model, at)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def forward_ms(module: Any) -> tuple[float, Any]:
        setattr(parent, name, module)
        sync()
        start = time.perf_counter()
        out = model(*args, **kwargs)
        sync()
        return (time.perf_counter() - start) * 1e3, out

    times: dict[str, list[float]] = {"original": [], "swapped": []}
    try:
        with torch.no_grad():
            _, want = forward_ms(original)
            _, got = forward_ms(new)
            want_t, got_t = output_tensors(want), output_tensors(got)
            config = EvalConfig()
            c = compare_outputs([t.detach().cpu() for t in got_t], [t.detach().cpu() for t in want_t], [], device,
                                config.atol, config.rtol, config.scale_atol_by_rms) if len(want_t) == len(got_t) else None
            if c is None or not c.ok:
                raise SwapError(f"the whole model's outputs differ with {at} swapped: "
                                f"{c.reason[:300] if c is not None else 'different number of outputs'}")
            for _ in range(repeats):  # alternate, so that drifts in the machine's speed hit both alike
                for key, module in (("original", original), ("swapped", new)):
                    times[key].append(forward_ms(module)[0])
    except SwapError:
        setattr(parent, name, original)
        raise
    except Exception as e:
        setattr(parent, name, original)
        raise SwapError(f"the model fails with {at} swapped: {type(e).__name__}: {' '.join(str(e).split())[:300]}") from None
    setattr(parent, name, new)
    a, b = statistics.median(times["original"]), statistics.median(times["swapped"])
    return SwapOutcome(path=at, original_ms=a, swapped_ms=b, speedup=a / b, max_abs_error=c.max_abs_error,
                       repeats=repeats)
