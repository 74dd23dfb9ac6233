"""The sandboxed child: `python -m kernelbench.worker SCRATCH` runs the job in SCRATCH/job.json.

Modes:
- `compile`: import the candidate (its `load_inline` calls build into TORCH_EXTENSIONS_DIR) and check that
  it defines a `ModelNew` class.
- `reference`: run only the task's trusted `Model`: build the input sets from the parent's seeds, compute
  reference outputs at full precision (TF32 off), time the reference. Writes `inputs.pt` and `reference.pt`.
- `run`: load and unlink `inputs.pt`, capture the timers, install kernel-call counting, THEN import the
  candidate; build `ModelNew` after the same init seed, run every input set on clones, time it, trace the
  aten ops of one forward. Writes plain dense tensors (outputs, inputs after the call, outputs of the last
  timing round) to `outputs.pt`; the parent compares. This child never sees reference outputs.
The child writes `result.json` echoing the job's nonce; anything else it prints is only a log tail.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import traceback
import types
from typing import Any

from kernelbench import timing  # noqa: F401  (first: captures the timers before any candidate code runs)

RESULT_FILE = "result.json"
MAX_RESULT_BYTES = 4 * 1024 * 1024


PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_argv(scratch: str) -> tuple[str, ...]:
    """`python -I` (no PYTHON* variables, no user site, no cwd on sys.path) with this project importable
    whether or not it is installed."""
    boot = (f"import sys; sys.path.insert(0, {PROJECT_ROOT!r}); from kernelbench.worker import main; "
            f"sys.exit(main(['worker', {scratch!r}]))")
    return (sys.executable, "-I", "-c", boot)


def read_result(scratch: str, nonce: str = "") -> dict[str, Any]:
    """The child's result.json, or {} when it is missing, oversized, malformed or carries the wrong nonce."""
    path = os.path.join(scratch, RESULT_FILE)
    try:
        if os.path.getsize(path) > MAX_RESULT_BYTES:
            return {}
        with open(path) as f:
            result = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(result, dict) or (nonce and result.get("nonce") != nonce):
        return {}
    return result


def import_candidate(path: str) -> types.ModuleType:
    with open(path) as f:
        src = f.read()
    module = types.ModuleType("candidate")
    module.__file__ = path
    sys.modules["candidate"] = module
    exec(compile(src, "candidate.py", "exec"), module.__dict__)
    return module


def flatten_output(out: Any) -> tuple[str, list[Any], list[dict[str, Any]]]:
    """(structure, plain dense CPU tensors, per-tensor metadata) of a forward's return value."""
    import torch

    if isinstance(out, (tuple, list)):
        parts = [flatten_output(o) for o in out]
        structure = "(" + ",".join(p[0] for p in parts) + ")"
        return structure, [t for p in parts for t in p[1]], [m for p in parts for m in p[2]]
    if not isinstance(out, torch.Tensor):
        return f"<{type(out).__name__}>", [], []
    try:
        from torch._prims_common import is_non_overlapping_and_dense

        dense = bool(is_non_overlapping_and_dense(out))
    except Exception:
        dense = bool(out.is_contiguous())
    meta = {"type": type(out).__name__, "exact_tensor": type(out) is torch.Tensor, "dtype": str(out.dtype).replace("torch.", ""),
            "shape": list(out.shape), "device": out.device.type, "dense": dense, "layout": str(out.layout)}
    plain = torch.empty(tuple(out.shape), dtype=out.dtype)
    plain.copy_(out.detach())
    return "T", [plain], [meta]


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _full_precision() -> None:
    import torch

    # DESIGN.md rule 3: PyTorch lets convolutions use TF32 by default, which alone misses a 1e-4 tolerance.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def run_reference(job: dict[str, Any], scratch: str) -> dict[str, Any]:
    import torch

    from kernelbench.inputs import Seeds, clone_args, make_input_sets, to_device
    from kernelbench.problem import load_problem
    from kernelbench.task import Task

    device = job["device"]
    torch.set_num_threads(job["threads"])
    _full_precision()
    problem = load_problem(Task(**job["task"]), job["size"])
    seeds = Seeds(job["init_seed"], tuple(job["input_seeds"]), tuple(job["extra_seeds"]))
    torch.manual_seed(seeds.init_seed)
    init_inputs = list(problem.get_init_inputs())
    torch.manual_seed(seeds.init_seed)
    model = problem.Model(*init_inputs).to(device)
    sets = make_input_sets(problem.get_inputs, seeds)
    outputs, structures = [], []
    with torch.no_grad():
        for s in sets:
            structure, tensors, _ = flatten_output(model(*to_device(clone_args(s), device)))
            outputs.append(tensors)
            structures.append(structure)
    _sync(device)
    torch.save({"init_inputs": init_inputs, "sets": sets}, os.path.join(scratch, "inputs.pt"))
    torch.save({"outputs": outputs}, os.path.join(scratch, "reference.pt"))
    result: dict[str, Any] = {"ok": True, "structures": structures}
    if job["timing_trials"] > 0:
        timed = [to_device(s, device) for s in sets[: job["timing_input_sets"]]]
        st, _ = timing.measure(model, timed, device, job["warmup_trials"], job["timing_trials"],
                               job["timing_budget_s"], keep=lambda o: None)
        result["timing"] = st.to_dict()
        if job.get("time_compile"):
            compiled = torch.compile(model)
            st, _ = timing.measure(compiled, timed, device, job["warmup_trials"], job["timing_trials"],
                                   job["timing_budget_s"], keep=lambda o: None)
            result["compile_timing"] = st.to_dict()
    return result


def run_compile(job: dict[str, Any], scratch: str) -> dict[str, Any]:
    from kernelbench import builds

    builds.patch_load_inline(job["device"], job.get("pch_dir", ""))
    try:
        module = import_candidate(os.path.join(scratch, job["candidate"]))
    except BaseException as e:  # SystemExit too: whatever stops the import is the candidate's compile fault
        return {"ok": False, "phase": "import", "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
    if not isinstance(getattr(module, "ModelNew", None), type):
        return {"ok": False, "phase": "format", "error": "the candidate defines no class ModelNew"}
    return {"ok": True}


def _optional(name: str) -> Any:
    try:
        return __import__(f"kernelbench.{name}", fromlist=[name])
    except ImportError:
        return None


def run_candidate(job: dict[str, Any], scratch: str) -> dict[str, Any]:
    import torch

    from kernelbench import builds
    from kernelbench.inputs import clone_args, to_device

    device = job["device"]
    torch.set_num_threads(job["threads"])
    threads_before = threading.active_count()
    inputs_path = os.path.join(scratch, "inputs.pt")
    data = torch.load(inputs_path, weights_only=True)
    os.unlink(inputs_path)  # gone before candidate code runs
    kernel_calls, op_policy = _optional("kernel_calls"), _optional("op_policy")
    if kernel_calls is not None:
        kernel_calls.install()
    builds.patch_load_inline(device, job.get("pch_dir", ""))
    result: dict[str, Any] = {"ok": False, "phase": "import"}
    module = import_candidate(os.path.join(scratch, job["candidate"]))
    result["phase"] = "init"
    torch.manual_seed(job["init_seed"])
    model = module.ModelNew(*data["init_inputs"]).to(device)
    _sync(device)
    outputs, inputs_after, metas, structures = [], [], [], []
    result["phase"] = "forward"
    with torch.no_grad():
        for s in data["sets"]:
            args = to_device(clone_args(s), device)
            structure, tensors, meta = flatten_output(model(*args))
            _sync(device)
            outputs.append(tensors)
            metas.append(meta)
            structures.append(structure)
            inputs_after.append([flatten_output(a)[1][0] if isinstance(a, torch.Tensor) else None for a in args])
    timing_outputs: list[Any] = []
    if job["timing_trials"] > 0:
        result["phase"] = "timing"
        timed = [to_device(s, device) for s in data["sets"][: job["timing_input_sets"]]]
        st, timing_outputs = timing.measure(model, timed, device, job["warmup_trials"], job["timing_trials"],
                                            job["timing_budget_s"], keep=lambda o: flatten_output(o)[1])
        result["timing"] = st.to_dict()
    result["phase"] = "trace"
    ops: list[str] = []
    calls = -1
    if kernel_calls is not None:
        kernel_calls.reset()
    with torch.no_grad():
        args = to_device(clone_args(data["sets"][0]), device)
        if op_policy is not None:
            with op_policy.OpTracer() as tracer:
                model(*args)
                _sync(device)
            ops = list(tracer.ops)
        else:
            model(*args)
            _sync(device)
    if kernel_calls is not None:
        calls = kernel_calls.count()
    torch.save({"outputs": outputs, "inputs_after": inputs_after, "timing_outputs": timing_outputs},
               os.path.join(scratch, "outputs.pt"))
    result.update(ok=True, phase="done", structures=structures, output_meta=metas, ops=ops, kernel_calls=calls,
                  threads_before=threads_before, threads_after=threading.active_count(),
                  timer_patched=timing.timers_intact(), checks_installed=[n for n, m in
                  (("kernel_calls", kernel_calls), ("op_policy", op_policy)) if m is not None])
    return result


def _describe(e: BaseException) -> dict[str, Any]:
    text = f"{type(e).__name__}: {e}"
    oom = isinstance(e, MemoryError) or "out of memory" in text.lower()
    return {"error": text[:4000], "error_type": type(e).__name__, "oom": oom, "traceback": traceback.format_exc()[-3000:]}


MODES = {"compile": run_compile, "reference": run_reference, "run": run_candidate}


def main(argv: list[str]) -> int:
    scratch = argv[1]
    job_path = os.path.join(scratch, "job.json")
    with open(job_path) as f:
        job = json.load(f)
    os.unlink(job_path)
    nonce = job.get("nonce", "")
    try:
        result = MODES[job["mode"]](job, scratch)
    except BaseException as e:  # SystemExit / KeyboardInterrupt from candidate code are its faults, reported
        result = {"ok": False, "phase": _phase_of(e), **_describe(e)}
    result["nonce"] = nonce
    tmp = os.path.join(scratch, RESULT_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(result, f, default=str)
    os.replace(tmp, os.path.join(scratch, RESULT_FILE))
    return 0


def _phase_of(e: BaseException) -> str:
    """The phase the run child was in when `e` escaped (read from the traceback's worker frames)."""
    tb = e.__traceback__
    phase = "unknown"
    while tb is not None:
        local = tb.tb_frame.f_locals
        if tb.tb_frame.f_code.co_name == "run_candidate" and isinstance(local.get("result"), dict):
            phase = local["result"].get("phase", phase)
        tb = tb.tb_next
    return phase


if __name__ == "__main__":
    sys.exit(main(sys.argv))
