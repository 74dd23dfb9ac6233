"""The sandboxed child: `python -m kernelbench.harness.child.worker SCRATCH` runs the job in SCRATCH/job.json.

Modes:
- `compile`: import the candidate (its `load_inline` calls build into TORCH_EXTENSIONS_DIR) and check that
  it defines a `ModelNew` class. The outcome goes to the parent over its report pipe, like the run child's.
- `reference`: run only the task's trusted `Model`: build the input sets and the timing sets from the parent's
  seeds, compute reference outputs at full precision (TF32 off), the hidden check calls' outputs, time the
  reference. Writes `inputs.pt` and `reference.pt`. With `paired` in the job (CPU), both children time in
  blocks on the parent's word over inherited pipes (`timing.serve_blocks`, `kernelbench.harness.paired`), the reference
  staying alive beside the candidate.
- `run`: load and unlink `inputs.pt`, install kernel-call counting, snapshot every object the measurement
  and the checks depend on (`Snapshot`), count the OS threads, THEN import the candidate; build `ModelNew`
  after the same init seed, run every input set on clones, time it, trace the aten ops of one forward.
  After every phase the snapshot is verified and restored (`timer_patched` / `harness_tampered`), and the
  threads are counted again (`dynamic:threads`). Each call's output and arguments afterwards (correctness,
  check and verification calls) go to the parent over its report pipe as soon as the call returns, the final
  report last (`kernelbench.harness.report`); the parent compares. This child never sees reference outputs.
The compile and run children report over the parent's pipe (`kernelbench.harness.report`), echoing the job's nonce;
the reference child, which runs only trusted task code, writes `result.json` (`read_result`). Every child
ends with `os._exit` right after reporting, whatever happened before. Anything else a child prints is only
a log tail.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import traceback
import types
from typing import Any

from kernelbench.harness.child import timing  # noqa: F401  (first: captures the timers before any candidate code runs)
from kernelbench.harness import sandbox  # noqa: E402
from kernelbench.harness import build_manifest  # noqa: E402
from kernelbench.harness.child import spawn_guard  # noqa: E402  (captures what it calls before candidate code)

RESULT_FILE = "result.json"
MAX_RESULT_BYTES = 4 * 1024 * 1024


PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


CHILD_PYTHON_ENV = "KERNEL_AGENT_CHILD_PYTHON"
"""Test hook: the interpreter the children run instead of this one. Only tests set it, to break the harness
on purpose (an interpreter the sandbox's user cannot execute) and check that it is reported as such."""


def child_argv(scratch: str) -> tuple[str, ...]:
    """`python -I` (no PYTHON* variables, no user site, no cwd on sys.path) with this project importable
    whether or not it is installed."""
    boot = (f"import sys; sys.path.insert(0, {PROJECT_ROOT!r}); from kernelbench.harness.child.worker import main; "
            f"sys.exit(main(['worker', {scratch!r}]))")
    return (os.environ.get(CHILD_PYTHON_ENV) or sys.executable, "-I", "-c", boot)


def progress(mark: str, close: bool = False) -> None:
    """Tell the parent how far this child got (`sandbox.ChildOutcome.progress`); `close` before untrusted code
    runs, so that code can neither write nor close the parent's record."""
    fd = int(os.environ.get(sandbox.PROGRESS_FD_ENV, "-1") or -1)
    if fd < 0:
        return
    try:
        os.write(fd, mark.encode())
    except OSError:
        pass
    if close:
        os.environ.pop(sandbox.PROGRESS_FD_ENV, None)
        try:
            os.close(fd)
        except OSError:
            pass


def read_result(scratch: str, nonce: str = "") -> dict[str, Any]:
    """The reference child's result.json, or {} when it is missing, oversized, malformed or carries the wrong nonce.

    For the reference only: no candidate code ever runs in that child (it imports the task's module, never a
    candidate's), and its scratch folder is out of every candidate's reach while the parent reads it: the
    run child of the same slot starts only after the parent has read it (one after the other), and in paired
    timing the reference runs as a second slot's uid in a 0700 folder (and, under bubblewrap, outside the
    candidate's private /tmp). Children that run candidate code report over the parent's pipe instead."""
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


def _discard(label: str, out: Any, buffers: list[Any]) -> None:
    """The reference's stand-in for the run child's report of a check or verification call: the same copies and
    serialisation, thrown away, so both children do the same untimed work per block (`paired.unaccounted`)."""
    _report_value(out, buffers)


def _sink(job: dict[str, Any]) -> Any:
    """The reference's stand-in reports during paired timing: the same bytes the run child sends, written into a
    pipe the parent drains and drops (`discard_fd`), so both children pay the same copies and pipe round trips
    inside their blocks (`paired.unaccounted` compares what the blocks leave unaccounted for)."""
    if "discard_fd" not in job:
        return _discard
    from kernelbench.harness import report

    out = report.Reporter(int(job["discard_fd"]))
    return lambda label, value, buffers: out.send_bytes("verify/0", _report_value(value, buffers))


def _report_value(out: Any, buffers: list[Any]) -> bytes:
    import io

    import torch

    buf = io.BytesIO()
    torch.save(_call_record(out, buffers), buf)
    return buf.getvalue()


def _call_record(out: Any, args: list[Any]) -> dict[str, Any]:
    """What the parent judges of one call: the output as plain dense tensors and the arguments after the call."""
    import torch

    return {"outputs": flatten_output(out)[1],
            "inputs_after": [flatten_output(a)[1][0] if isinstance(a, torch.Tensor) else None for a in args]}


def run_reference(job: dict[str, Any], scratch: str, reporter: Any = None) -> dict[str, Any]:
    import torch

    from kernelbench.tasks.input_configs import labels, make_config_sets
    from kernelbench.harness.child.inputs import Seeds, clone_args, make_input_sets, make_timing_sets, to_device
    from kernelbench.tasks.problem import load_problem
    from kernelbench.tasks.task import Task

    device = job["device"]
    torch.set_num_threads(job["threads"])
    _full_precision()
    problem = load_problem(Task(**job["task"]), job["size"])
    seeds = Seeds(job["init_seed"], tuple(job["input_seeds"]), tuple(job["extra_seeds"]),
                  tuple(job.get("timing_seeds", ())))
    torch.manual_seed(seeds.init_seed)
    init_inputs = list(problem.get_init_inputs())
    torch.manual_seed(seeds.init_seed)
    model = problem.Model(*init_inputs).to(device)
    sets = make_input_sets(problem.get_inputs, seeds)
    timing_sets = make_timing_sets(problem.get_inputs, seeds) if job["timing_trials"] > 0 else []
    if job["timing_trials"] > 0 and not timing_sets:  # no timing seeds (a baseline with no candidate to judge)
        timing_sets = [clone_args(s) for s in sets[: job["timing_input_sets"]]]
    # correctness on every input configuration, timing on the first (kernelbench.tasks.input_configs): the other
    # configurations' sets follow the first's in `sets`, so the run child treats them alike
    more_sets, owners = make_config_sets(problem.configs, seeds)
    set_configs, sets = [0] * len(sets) + owners, sets + more_sets
    outputs, structures, timing_outputs = [], [], []
    with torch.no_grad():
        for s in sets:
            structure, tensors, _ = flatten_output(model(*to_device(clone_args(s), device)))
            outputs.append(tensors)
            structures.append(structure)
        for s in timing_sets:
            timing_outputs.append(flatten_output(model(*to_device(clone_args(s), device)))[1])
    timed = [to_device(s, device) for s in timing_sets]
    checks = [tuple(c) for c in job.get("timing_checks", [])]
    check_outputs: list[Any] = [None] * len(checks)
    profile = job.get("profile") == "torch" and job["timing_trials"] > 0
    # as in the run child, whose profiler threads must exist before it counts threads
    profile_error = _profile_warm_up(device) if profile else ""

    def keep(label: str, out: Any, buffers: list[Any]) -> None:
        check_outputs[int(label.split("/")[1])] = flatten_output(out)[1]

    if checks:  # the expected outputs of the run child's hidden check calls: same code, same calls
        timing.Measurement(model, timed, device, keep, checks).run_checks()
    _sync(device)
    torch.save({"init_inputs": init_inputs, "sets": sets, "timing_sets": timing_sets}, os.path.join(scratch, "inputs.pt"))
    torch.save({"outputs": outputs, "timing_outputs": timing_outputs, "check_outputs": check_outputs},
               os.path.join(scratch, "reference.pt"))
    result: dict[str, Any] = {"ok": True, "structures": structures}
    if job["timing_trials"] > 0:  # speed of light: bytes and FLOPs of the timed configuration, counted here (trusted
        from kernelbench.harness.child import work  # task code only; never in the candidate's child) and reported with the rest

        result.update(work.measured(model, to_device(clone_args((timing_sets or sets)[0]), device)))
    if len(problem.configs) > 1:
        result["set_configs"] = set_configs
        result["config_labels"] = labels(problem.configs, sets, set_configs)
    if job["timing_trials"] > 0:
        if job.get("paired"):  # blocks on the parent's word, alternating with the candidate's (kernelbench.harness.paired)
            sink = _sink(job)
            m = timing.Measurement(model, timed, device, sink, checks)
            blocks = timing.serve_blocks(m, job["warmup_trials"], timing.Channel(**job["paired"]))
            if m.times_ms:
                result["timing"] = timing.stats(m.times_ms, job["warmup_trials"]).to_dict()
                result["timing_blocks"] = blocks
        else:
            st = timing.measure(model, timed, device, job["warmup_trials"], job["timing_trials"],
                                job["timing_budget_s"], _discard, checks, job.get("min_trials", timing.MIN_TRIALS))
            result["timing"] = st.to_dict()
        if profile and timed:  # after the timing: one untimed call, the same way as the candidate's (kernelbench.harness.profiling)
            result["profile"] = {"ok": False, "error": profile_error} if profile_error else \
                _profile_report(model, clone_args(timed[0]), device, ())
        if job.get("time_compile"):
            compiled = torch.compile(model)
            st = timing.measure(compiled, timed, device, job["warmup_trials"], job["timing_trials"],
                                job["timing_budget_s"], _discard, checks, job.get("min_trials", timing.MIN_TRIALS))
            result["compile_timing"] = st.to_dict()
    return result


MAX_ERROR_CHARS = 1 << 20
"""Most characters of an import error the compile child reports (a compiler log inside torch's message)."""


def run_compile(job: dict[str, Any], scratch: str, reporter: Any = None) -> dict[str, Any]:
    """Import the candidate (which builds it). The outcome is returned to `main`, which sends it over the
    parent's pipe and ends the process: the old `result.json` in this scratch folder stayed writable by the
    candidate's code (a thread, or an `atexit` handler once the child left through an exception) after it
    was written. Whether `ModelNew` is a class is read from the module's dict (no module `__getattr__`);
    an import error's message is the candidate's own code (`__str__`), read once and guarded (`_text`)."""
    from kernelbench.harness.child import load_inline_hook

    if reporter is None:
        raise RuntimeError("the compile child needs the parent's report pipe (job field report_fd)")
    load_inline_hook.patch_load_inline(job["device"], job.get("pch_dir", ""))
    progress(sandbox.UNTRUSTED, close=True)
    try:
        module = import_candidate(os.path.join(scratch, job["candidate"]))
    except BaseException as e:  # SystemExit too: whatever stops the import is the candidate's compile fault
        error = _text(e)
        return {"ok": False, "phase": "import", "error": error[:MAX_ERROR_CHARS // 2] + error[-MAX_ERROR_CHARS // 2:]
                if len(error) > MAX_ERROR_CHARS else error, "traceback": _traceback_tail()}
    if not _isinstance(module.__dict__.get("ModelNew"), type):
        return {"ok": False, "phase": "format", "error": "the candidate defines no class ModelNew"}
    return {"ok": True}


def _text(e: BaseException) -> str:
    """`Type: message` of an exception the candidate raised; its `__str__` is candidate code and may raise."""
    try:
        return f"{type(e).__name__}: {e}"
    except BaseException:
        return f"{type(e).__name__}: <the exception's message could not be read>"


def _traceback_tail() -> str:
    try:
        return traceback.format_exc()[-3000:]
    except BaseException:
        return ""


def os_threads() -> int:
    """Threads of this process as the OS sees them: Python threads and threads C++ started alike."""
    return len(os.listdir("/proc/self/task"))


def _warm_up(device: str) -> None:
    """Let torch create its lazily started threads (pools, CUDA driver threads) before the baseline count.

    On CUDA, also call once what the phases after `refuse_new_tasks` call: the context (the driver starts its
    threads with it), a cuBLAS handle, a kernel drawing from a device generator (`timing.load_perturbed`),
    a pair of timed events. A runtime that starts a helper thread on first use starts it here, before the
    thread count and the refusal, rather than inside an honest candidate's forward, where it could not."""
    import torch

    a = torch.ones(64, 64, device=device)
    torch.relu(a @ a).sum().item()
    if device == "cuda":
        generator = torch.Generator(device=device)
        generator.manual_seed(0)
        torch.rand(64, device=device, generator=generator)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a.add_(1.0)
        end.record()
        end.synchronize()
        start.elapsed_time(end)
    _sync(device)


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
        return found + [(label, name) for label, holder, names in self.closed for name in set(vars(holder)) - names]

    def restore(self) -> None:
        for _, holder, names in self.closed:
            for name in set(vars(holder)) - names:
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


def harness_holders(kernel_calls: Any, op_policy: Any) -> list[tuple[str, Any]]:
    """Everything `Snapshot` guards: the timers, the harness's own modules and classes, and the parts of
    Python and torch the worker calls to copy, trace, serialise and write its result."""
    import builtins
    import time

    import torch
    import torch.utils._python_dispatch as python_dispatch
    import torch.utils.cpp_extension as cpp_extension

    from kernelbench.harness import build_manifest, report, sandbox
    from kernelbench.harness.child import inputs, load_inline_hook

    modules = [builtins, time, os, os.path, json, threading, traceback, types, torch, torch.cuda, torch.serialization,
               python_dispatch, cpp_extension, timing, inputs, load_inline_hook, report, sandbox, spawn_guard, sys.modules[__name__]]
    modules += [build_manifest]
    modules += [kernel_calls, op_policy]
    classes = [torch.Tensor, torch.cuda.Event, python_dispatch.TorchDispatchMode, timing.Timers, Snapshot]
    classes += [v for m in modules if m.__name__.startswith("kernelbench.") for v in vars(m).values()
                if isinstance(v, type) and v.__module__ == m.__name__ and v not in classes]
    return [(m.__name__, m) for m in modules] + [(f"{c.__module__}.{c.__qualname__}", c) for c in classes]


def _is_timer(label: str, name: str) -> bool:
    return label in ("time", "kernelbench.harness.child.timing", "kernelbench.harness.child.timing.Timers", "torch.cuda.Event") \
        or label.startswith("kernelbench.harness.child.timing.") or f"{label}.{name}" in timing.PUBLIC_TIMERS


def _audit(snapshot: Snapshot, result: dict[str, Any], phase: str, extra: list[str]) -> None:
    """Record what the candidate rebound up to the end of `phase` (timer or harness), then undo it."""
    for label, name in snapshot.changed():
        key = "timer_patched" if _is_timer(label, name) else "harness_tampered"
        result.setdefault(key, []).append(f"{label}.{name} (by the end of {phase})")
    for item in extra:
        result.setdefault("harness_tampered", []).append(f"{item} (by the end of {phase})")
    snapshot.restore()


def run_candidate(job: dict[str, Any], scratch: str, reporter: Any = None) -> dict[str, Any]:
    import torch

    from kernelbench.harness.child import kernel_calls, load_inline_hook, op_policy  # imported, never probed: a check that cannot load is an error
    from kernelbench.harness.child.inputs import clone_args, to_device

    device = job["device"]
    torch.set_num_threads(job["threads"])
    _warm_up(device)
    profile_error = _profile_warm_up(device) if job.get("profile") == "torch" else ""
    load_inline_hook.start_libomp_pool(job.get("pch_dir", ""))  # a clang -fopenmp build's pool is not the candidate's
    threads_before, os_before = threading.active_count(), os_threads()
    inputs_path = os.path.join(scratch, "inputs.pt")
    data = torch.load(inputs_path, weights_only=True)
    os.unlink(inputs_path)  # gone before candidate code runs
    kernel_calls.install(triton=bool(job.get("triton")))
    load_inline_hook.patch_load_inline(device, job.get("pch_dir", ""))
    # no compiler runs here: a load must find the build the compile stage left and the parent recorded
    build_manifest.refuse_builds(job.get("build_manifest") or {}, os.environ.get("TORCH_EXTENSIONS_DIR", scratch))
    # Captured references: the phases below call these locals, never a module attribute the candidate can rebind.
    snapshot = Snapshot(harness_holders(kernel_calls, op_policy))
    audit, measure, flatten, sync, active = _audit, timing.measure, flatten_output, _sync, threading.active_count
    count_threads, timers_intact, no_grad = os_threads, timing.timers_intact, torch.no_grad
    if reporter is None:
        raise RuntimeError("the run child needs the parent's report pipe (job field report_fd)")
    send, record = reporter.send_tensors, _call_record
    measurement, serve, stats = timing.Measurement, timing.serve_blocks, timing.stats
    channel = timing.Channel(**job["paired"]) if job.get("paired") else None
    reset, count, wrappers = kernel_calls.reset, kernel_calls.count, kernel_calls.wrappers_intact
    tracer_class = op_policy.OpTracer
    result: dict[str, Any] = {"ok": False, "phase": "import", "timer_patched": [], "harness_tampered": []}
    threads_after = [threads_before, os_before]

    def checkpoint(phase: str) -> None:
        audit(snapshot, result, phase, wrappers())
        threads_after[0] = max(threads_after[0], active())
        threads_after[1] = max(threads_after[1], count_threads())

    progress(sandbox.UNTRUSTED, close=True)
    refuse_tasks = spawn_guard.refuse_new_tasks  # captured before candidate code runs, like the phases' calls
    module = import_candidate(os.path.join(scratch, job["candidate"]))
    checkpoint("import")
    result["phase"] = "init"
    torch.manual_seed(job["init_seed"])
    model = module.ModelNew(*data["init_inputs"]).to(device)
    sync(device)
    checkpoint("init")
    if job.get("triton") and device == "cuda":
        # Triton compiles a kernel at its first launch and runs ptxas (and, once, a C compiler) as processes:
        # one untimed, unjudged call per input shape before new processes are refused below
        result["phase"] = "forward"
        seen = set()
        with no_grad():
            for s in data["sets"]:
                shapes = tuple((tuple(a.shape), str(a.dtype)) if isinstance(a, torch.Tensor) else repr(a) for a in s)
                if shapes not in seen:
                    seen.add(shapes)
                    model(*to_device(clone_args(s), device))
                    sync(device)
        checkpoint("triton compile")
    # from here on no thread or process can start: import and __init__ may still run load_inline (ninja)
    # (not in the untimed child Nsight Compute profiles: its injected threads start at cudaProfilerStart, and that
    # child's verdict is thrown away)
    result["new_tasks_refused"] = refuse_tasks() if job.get("profile") != "ncu" else {}
    metas, structures = [], []
    result["phase"] = "forward"
    # Each call's output and its arguments afterwards leave for the parent before the next candidate call:
    # nothing the candidate runs later (another call, a thread, an atexit handler) can change what was judged.
    with no_grad():
        for i, s in enumerate(data["sets"]):
            args = to_device(clone_args(s), device)
            out = model(*args)
            sync(device)
            structure, _, meta = flatten(out)
            send(f"forward/{i}", record(out, args))
            metas.append(meta)
            structures.append(structure)
    checkpoint("forward")
    if job["timing_trials"] > 0:
        result["phase"] = "timing"
        timed = [to_device(s, device) for s in data["timing_sets"]]
        checks = [tuple(c) for c in job.get("timing_checks", [])]

        def emit(label: str, out: Any, buffers: list[Any]) -> None:
            send(label, record(out, buffers))

        if channel is not None:  # paired: blocks on the parent's word (kernelbench.harness.paired)
            m = measurement(model, timed, device, emit, checks)
            blocks = serve(m, job["warmup_trials"], channel)
            m.verify()
            if m.times_ms:
                result["timing"] = stats(m.times_ms, job["warmup_trials"]).to_dict()
                result["timing_blocks"] = blocks
        else:
            st = measure(model, timed, device, job["warmup_trials"], job["timing_trials"], job["timing_budget_s"],
                         emit, checks, job.get("min_trials", timing.MIN_TRIALS))
            result["timing"] = st.to_dict()
        checkpoint("timing")
    result["phase"] = "trace"
    ops: list[str] = []
    reset()
    with no_grad():
        args = to_device(clone_args(data["sets"][0]), device)
        with tracer_class() as tracer:
            model(*args)
            sync(device)
        ops = list(tracer.ops)
    calls = count()
    checkpoint("trace")
    result["timer_patched"] += [f"{name} (public)" for name in timers_intact()]
    result.update(ok=True, phase="done", structures=structures, output_meta=metas, ops=ops, kernel_calls=calls,
                  threads_before=threads_before, threads_after=threads_after[0], os_threads_before=os_before,
                  os_threads_after=threads_after[1], checks_installed=["kernel_calls", "op_policy"])
    kind = job.get("profile", "")
    if kind == "ncu" or (kind == "torch" and job["timing_trials"] > 0):
        # after the final report (main calls it): the verdict is in the parent's pipe before the profiled call
        first = data["timing_sets"][0] if data.get("timing_sets") else data["sets"][0]
        kernels = kernel_calls.compiled_functions()
        limit_s = float(job.get("profile_timeout_s", PROFILE_TIMEOUT_S))
        job[AFTER_REPORT] = lambda: _profile_after_report(kind, model, to_device(clone_args(first), device), device,
                                                          reporter, kernels, limit_s, profile_error)
    return result


AFTER_REPORT = "_after_report"
"""Job key under which the run child leaves the step main() runs after sending the report (the profiled call)."""
PROFILE_TIMEOUT_S = 30.0
"""The profiled call's default limit (`EvalConfig.profile_timeout_s`): SIGALRM at its default action ends the
child, its report already sent."""
_setitimer, _signal_handler, _SIGALRM = signal.setitimer, signal.signal, signal.SIGALRM


def _profile_warm_up(device: str) -> str:
    """Start the profiler once before timing (`profiling.warm_up`); what went wrong, or "": a profiler that cannot
    start is the harness's problem and costs only the profile, never the evaluation."""
    try:
        from kernelbench.harness import profiling

        profiling.warm_up(device)
    except Exception as e:
        return f"the profiler could not start: {type(e).__name__}: {e}"[:300]
    return ""


def _profile_report(model: Any, args: list[Any], device: str, kernels: Any) -> dict[str, Any]:
    """The profile of one untimed call as the plain report the parent reads; a failure is a report too."""
    from kernelbench.harness import profiling

    try:
        return profiling.profile_call(model, args, device, kernels)
    except BaseException as e:  # the profiler's fault or the call's: either way only the profile is lost
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}


def _profile_after_report(kind: str, model: Any, args: list[Any], device: str, reporter: Any, kernels: Any,
                          limit_s: float, error: str = "") -> None:
    """The run child's last step, after its report: the profiled call and its table as the trailer frame."""
    from kernelbench.harness import profiling, report

    _signal_handler(_SIGALRM, signal.SIG_DFL)
    _setitimer(signal.ITIMER_REAL, max(limit_s, 0.1))
    if error:
        payload = {"ok": False, "error": error}
    elif kind == "ncu":
        try:
            payload = profiling.ncu_call(model, args)
        except BaseException as e:
            payload = {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}
    else:
        payload = _profile_report(model, args, device, kernels)
    reporter.send_bytes(report.PROFILE_LABEL, json.dumps(payload, default=str).encode())


OOM_MARKERS = ("out of memory", "bad_alloc", "outofmemoryerror", "cudaerrormemoryallocation",
               "cublas_status_alloc_failed", "cannot allocate memory")
"""Lower-cased texts of allocation failures: MemoryError, C++ `std::bad_alloc` (pybind11 turns it into a
MemoryError whose message is `std::bad_alloc`), torch's CUDA OOM, cuBLAS / CUDA runtime allocation errors."""


def _describe(e: BaseException) -> dict[str, Any]:
    text = _text(e)
    oom = isinstance(e, MemoryError) or any(m in text.lower() for m in OOM_MARKERS)
    return {"error": text[:4000], "error_type": type(e).__name__, "oom": oom, "traceback": _traceback_tail()}


MODES = {"compile": run_compile, "reference": run_reference, "run": run_candidate}


_exit, _flush_out, _flush_err = os._exit, sys.stdout.flush, sys.stderr.flush
_isinstance = isinstance
"""Captured at import, before any candidate code: how the child ends, and the builtin the compile child's
format check calls (a candidate can rebind `builtins.isinstance`)."""
_refused = build_manifest.REFUSED


def main(argv: list[str]) -> int:
    """Run the job, report, and end through `os._exit` on every path: no `atexit` handler, no C++ static
    destructor and no Python finaliser of candidate code runs after the report (they once rewrote the result
    files), and nothing the candidate raises (an exception whose `__str__` raises too) lets the child fall
    through to the interpreter's normal exit, which would run them."""
    end, flush_out, flush_err = _exit, _flush_out, _flush_err  # locals: the candidate may rebind the globals
    code = 3
    try:
        code = _main(argv)
    finally:
        try:
            flush_out()
            flush_err()
        except BaseException:
            pass
        end(code)
    return code  # not reached


def _main(argv: list[str]) -> int:
    from kernelbench.harness import report

    scratch = argv[1]
    job_path = os.path.join(scratch, "job.json")
    with open(job_path) as f:
        job = json.load(f)
    os.unlink(job_path)
    progress(sandbox.STARTED, close=job.get("mode") == "reference")  # the reference runs only trusted code
    nonce = job.get("nonce", "")
    # the compile and run children's verdicts travel over the parent's pipe (kernelbench.harness.report); opened
    # (and its write function captured) before any candidate code runs
    reporter = report.Reporter(int(job["report_fd"])) if "report_fd" in job else None
    refused = _refused  # the run child's refused builds (`build_manifest`), held before candidate code runs
    try:
        result = MODES[job["mode"]](job, scratch, reporter)
    except BaseException as e:  # SystemExit / KeyboardInterrupt from candidate code are its faults, reported
        try:
            result = {"ok": False, "phase": _phase_of(e), **_describe(e)}
        except BaseException:
            result = {"ok": False, "phase": "unknown", "error": "an error whose description failed"}
    result["nonce"] = nonce
    if job.get("mode") == "run":  # refusals are reported even when the candidate caught the error
        result["build_refused"] = list(refused)
    try:
        if reporter is not None:
            reporter.send_result(result)
        else:  # the reference child (trusted code only): a file in its scratch folder (`read_result`)
            tmp = os.path.join(scratch, RESULT_FILE + ".tmp")
            with open(tmp, "w") as f:
                json.dump(result, f, default=str)
            os.replace(tmp, os.path.join(scratch, RESULT_FILE))
    except BaseException:
        return 3
    after = job.get(AFTER_REPORT)
    if callable(after):  # the profiled call (run child): nothing it does can reach the report
        try:
            after()
        except BaseException:
            pass
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
