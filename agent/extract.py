"""`kernel-agent hotspots ENTRY --extract N --out DIR`: the top submodules as KernelBench-format task files.

Down the hot-spot table (slowest first), each submodule is captured on one forward (its first call's arguments
and output), written as a task file (`agent.task_writer`), and checked before it is kept: the file executes,
its `Model` has the submodule's `state_dict` names and shapes, with the submodule's weights loaded it gives the
captured output on the captured arguments, and it runs on its own `get_inputs()`. A submodule that fails any step
is listed with the reason and nothing is written for it: a task file is never half-working. A submodule of the
same class called with the same arguments as one already written is listed as served by that file (one kernel
serves every layer of a stack). Stops once N files are written.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import asdict, dataclass
from typing import Any

from agent.call_template import make_template, output_tensors, plain_output, Unextractable
from agent.entry import Entry
from agent.hotspots import describe_call, Hotspots
from agent.task_writer import task_source
from agent.user_code import as_a_child_sees, import_plan, ImportPlan
from kernelbench.harness.config import EvalConfig
from kernelbench.tasks.problem import exec_source
from kernelbench.tasks.task import TaskFormatError

# Imports inside functions: torch (1-2 s to import) loads when this module's work runs; importing it stays free of
# torch, and so do the modules that import it at their top.


@dataclass(frozen=True)
class Extracted:
    path: str
    """The submodule's path in the model."""
    file: str
    """The task file written."""
    share: float


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


@dataclass(frozen=True)
class Extraction:
    written: tuple[Extracted, ...]
    skipped: tuple[Skipped, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _capture(model: Any, paths: list[str], entry: Entry) -> dict[str, tuple[Any, Any, Any]]:
    """path -> (args, kwargs, output) of each submodule's first call in one forward (copies, detached)."""
    import torch

    detach = lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else \
        (type(v)(detach(x) for x in v) if type(v) in (tuple, list) else v)  # noqa: E731
    found: dict[str, tuple[Any, Any, Any]] = {}
    handles = []
    for path in paths:
        def hook(module, args, kwargs, output, path=path):
            if path not in found:
                found[path] = (detach(args), {k: detach(v) for k, v in kwargs.items()}, detach(output))
        handles.append(model.get_submodule(path).register_forward_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            entry.forward()
    finally:
        for h in handles:
            h.remove()
    return found


def _check(source: str, module: Any, call: tuple[Any, Any, Any], tensors: list[Any], device: str,
           plan: ImportPlan) -> None:
    """The written file works as a task (module docstring), imported as a harness child would import it
    (`agent.user_code.as_a_child_sees`); raises Unextractable saying which step failed."""
    with as_a_child_sees(list(plan.sources)):
        _check_here(source, module, call, tensors, device)


def _check_here(source: str, module: Any, call: tuple[Any, Any, Any], tensors: list[Any], device: str) -> None:
    import torch

    from kernelbench.harness.compare import compare_outputs

    try:
        ns = exec_source(source, "<extracted task>", "kernel_agent_extracted")
    except TaskFormatError as e:
        raise Unextractable(f"the task file does not execute: {str(e).removeprefix('<extracted task>: ')}") from None
    try:
        torch.manual_seed(0)
        model = ns.Model(*ns.get_init_inputs()).to(device).eval()
    except Exception as e:
        raise Unextractable(f"Model() fails in the task file: {type(e).__name__}: {str(e)[:200]}") from None
    want = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if want != got:
        raise Unextractable(f"the rebuilt submodule's state_dict differs: {sorted(set(want) ^ set(got))[:4]}")
    model.load_state_dict(module.state_dict())
    config = EvalConfig()
    try:
        with torch.no_grad():
            out = model(*tensors)
            again = model(*[t.to(device) for t in ns.get_inputs()])
    except Exception as e:
        raise Unextractable(f"the rebuilt submodule fails on its inputs: {type(e).__name__}: {str(e)[:200]}") from None
    plain_output(again)
    c = compare_outputs([t.cpu() for t in output_tensors(out)], [t.cpu() for t in output_tensors(call[2])], [],
                        device, config.atol, config.rtol, config.scale_atol_by_rms)
    if not c.ok:
        raise Unextractable(f"rebuilt alone it does not reproduce its output in the model (state or data-dependent "
                            f"behaviour?): {c.reason[:200]}")


def extract_hotspots(entry: Entry, hotspots: Hotspots, n: int, out_dir: str, device: str) -> Extraction:
    """Write the top `n` extractable submodules of `hotspots` to `out_dir` (module docstring)."""
    if n < 1:
        raise ValueError(f"--extract must be at least 1, got {n}")
    os.makedirs(out_dir, exist_ok=True)
    rows = list(hotspots.modules)
    calls = _capture(entry.model, [r.path for r in rows], entry)
    written: list[Extracted] = []
    skipped: list[Skipped] = []
    served: dict[tuple[str, str], str] = {}
    for row in rows:
        if len(written) >= n:
            break
        module = entry.model.get_submodule(row.path)
        try:
            if row.path not in calls:
                raise Unextractable("it was not called in the capture forward")
            args, kwargs, output = calls[row.path]
            key = (f"{type(module).__module__}.{type(module).__qualname__}", describe_call(args, kwargs))
            if key in served:
                raise Unextractable(f"same class and arguments as {served[key]}: its task file serves both")
            plain_output(output)
            template, tensors = make_template(args, kwargs)
            plan = import_plan(module)
            source = task_source(entry=entry.spec, path=row.path, module=module, share=row.share,
                                 device=device, template=template, tensors=tensors, plan=plan)
            _check(source, module, calls[row.path], tensors, device, plan)
        except Unextractable as e:
            skipped.append(Skipped(row.path, str(e)))
            continue
        name = f"{len(written) + 1:02d}_{row.path.replace('.', '_') or 'model'}.py"
        target = os.path.join(out_dir, name)
        fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(source)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)  # a file appears whole or not at all
        served[key] = row.path
        written.append(Extracted(row.path, target, row.share))
    return Extraction(tuple(written), tuple(skipped))
