"""The run child (`run` jobs): the candidate through its phases, audited after each.

Order (each step's reason is at the step): load and unlink `inputs.pt`, install kernel-call counting and the
build refusal, snapshot every object the measurement and the checks depend on (`snapshot.Snapshot`), count
the OS threads, capture every function the phases call after candidate code has run (`Tools`), THEN import
the candidate; build `ModelNew` after the same init seed; refuse new threads and processes; run every input
set (correctness), time it; judge the aten ops and kernel calls of every call (`call_checks`: every call into
the candidate goes through `CallChecks.call`, traced and counted, and every call's inputs arrive through
`call_inputs.write_inputs` into reused buffers, so no call can be singled out as the judged one, DESIGN.md
rule 8). After every phase the snapshot is verified and restored (`timer_patched` / `harness_tampered`) and
the threads are counted again (`dynamic:threads`). Each call's output and arguments afterwards go to the
parent over its report pipe as soon as the call returns (`kernelbench.harness.child.report`); the final report
(`protocol.RunResult`) is sent by `worker.main`, the profiled call after it. This child never sees reference outputs.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import types
from dataclasses import dataclass
from typing import Any, Callable

from kernelbench.harness import protocol
from kernelbench.harness.child import build_manifest, report
from kernelbench.harness.child import call_checks, call_inputs, profiled_call, snapshot, spawn_guard, timing
from kernelbench.harness.child.call_windows import recorded
from kernelbench.harness.child.progress import UNTRUSTED, progress
from kernelbench.harness.child.result_files import INPUTS_FILE
from kernelbench.harness.child.outputs import call_record, flatten_output, sync

# Imports inside functions: the sandbox's import order: the checks load when the run job installs them, after the
# timers are captured and before any candidate code (`worker`'s docstring).


def os_threads() -> int:
    """Threads of this process as the OS sees them: Python threads and threads C++ started alike."""
    return len(os.listdir("/proc/self/task"))


def import_candidate(path: str) -> types.ModuleType:
    with open(path) as f:
        src = f.read()
    module = types.ModuleType("candidate")
    module.__file__ = path
    sys.modules["candidate"] = module
    exec(compile(src, "candidate.py", "exec"), module.__dict__)
    return module


def warm_up(device: str) -> None:
    """Let torch create its lazily started threads (pools, CUDA driver threads) before the baseline count.

    On CUDA, also call once what the phases after `refuse_new_tasks` call: the context (the driver starts its
    threads with it), a cuBLAS handle, a kernel drawing from a device generator (`call_inputs.check_inputs`),
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
    sync(device)


class RunState:
    """What the run child has recorded so far. `phase` is where an escaping exception came from
    (`worker._phase_of` reads it from `run_candidate`'s frame)."""

    def __init__(self, threads: int, os_threads_now: int):
        self.phase = "import"
        self.found: dict[str, list[str]] = {"timer_patched": [], "harness_tampered": []}
        self.threads_before, self.os_threads_before = threads, os_threads_now
        self.threads_after, self.os_threads_after = threads, os_threads_now
        self.new_tasks_refused: protocol.TaskRefusal | None = None
        self.structures: list[str] = []
        self.metas: list[list[dict[str, Any]]] = []
        self.timing: protocol.Timing | None = None
        self.timing_blocks: list[list[float]] | None = None
        self.ops: list[str] = []
        self.kernel_calls = -1
        self.call_windows_ns: list[tuple[int, int]] = []
        self.op_windows_ns: list[tuple[int, int, int, int]] = []
        self.state_dict_checked, self.state_dict_mismatch = False, ""


@dataclass(frozen=True)
class Tools:
    """Captured references: everything the phases call once candidate code has run, taken before the candidate
    is imported, so the phases call these, never a module attribute the candidate can rebind."""

    torch: Any
    checkpoint: Callable[[str], None]
    measure: Callable[..., Any]
    measurement: Any
    serve: Callable[..., Any]
    stats: Callable[..., protocol.Timing]
    refusal: Callable[..., protocol.TaskRefusal]
    flatten: Callable[..., Any]
    sync: Callable[[str], None]
    send: Callable[[str, Any], None]
    record: Callable[..., Any]
    clone_args: Callable[..., Any]
    to_device: Callable[..., Any]
    timers_intact: Callable[[], list[str]]
    no_grad: Any
    call: Callable[[Any, Any], Any]
    """`CallChecks.call` of `checks`, bound: the one function every candidate call goes through."""
    checks: call_checks.CallChecks
    write: Callable[..., list[Any]]
    fits: Callable[..., bool]
    fresh: Callable[..., list[Any]]
    compiled_functions: Callable[[], Any]
    refuse_tasks: Callable[[bool], dict[str, bool]]
    channel: timing.Channel | None
    state_dict: Callable[..., Any]
    load_state_dict: Callable[..., Any]
    """`torch.nn.Module`'s own, unbound: a `ModelNew` overriding either is still read and loaded by these."""


def run_candidate(job: protocol.RunJob, scratch: str,
                  reporter: report.Reporter) -> tuple[protocol.RunResult, Callable[[], None] | None]:
    """The phases in order; returns the final report and the step `worker.main` runs after sending it."""
    init, correctness, timed, verification, profile, result, record_calls = \
        _init, _correctness, _timing, _verification, _profile, _result, recorded  # captured: see `Tools`
    tools, data, state, profile_error = _install(job, scratch, reporter)
    module = _import(tools, job, scratch)
    tools.checkpoint("import")
    model = init(tools, job, data, state, module)
    call = record_calls(model, state.call_windows_ns)  # every judged and timed call's window (`call_windows`)
    correctness(tools, job, data, state, call)
    if job.setup.timing_trials > 0:
        timed(tools, job, data, state, call)
    verification(tools, job, data, state, call)
    after = profile(tools, job, data, model, reporter, profile_error)
    return result(state, tools.checks.trace), after


def _install(job: protocol.RunJob, scratch: str, reporter: report.Reporter) -> tuple[Tools, dict[str, Any], RunState, str]:
    """The harness's part, before any candidate code: warm-ups, the inputs, the checks, the snapshot."""
    import torch

    from kernelbench.harness.child import kernel_calls, load_inline_hook, op_policy  # imported, never probed: a check that cannot load is an error
    from kernelbench.tasks.inputs import clone_args, to_device

    device = job.setup.device
    torch.set_num_threads(job.setup.threads)
    warm_up(device)
    profile_error = profiled_call.warm_up(device) if job.setup.profile == "torch" else ""
    load_inline_hook.start_libomp_pool(job.pch_dir)  # a clang -fopenmp build's pool is not the candidate's
    state = RunState(threading.active_count(), os_threads())
    inputs_path = os.path.join(scratch, INPUTS_FILE)
    if job.paired is not None:  # started beside the reference: its inputs arrive when the reference has drawn them
        timing.await_inputs(timing.Channel(job.paired.read_fd, job.paired.write_fd))
    data = torch.load(inputs_path, weights_only=True)
    os.unlink(inputs_path)  # gone before candidate code runs
    kernel_calls.install(triton=job.triton)
    load_inline_hook.patch_load_inline(device, job.pch_dir)
    # no compiler runs here: a load must find the build the compile stage left and the parent recorded
    build_manifest.refuse_builds(job.build_manifest, os.environ.get("TORCH_EXTENSIONS_DIR", scratch))
    # this module and the entry point that imported it (`worker`): the latter by name, since importing it from
    # here would be an import circle
    own = [kernel_calls, op_policy, call_checks, call_inputs, sys.modules[__name__], sys.modules["kernelbench.harness.child.worker"]]
    taken = snapshot.Snapshot(snapshot.harness_holders(own))
    tables = call_checks.DispatchTables()  # the allowed ops' kernels, before any candidate code can register one
    audit, wrappers, active, count_threads = snapshot.audit, kernel_calls.wrappers_intact, threading.active_count, os_threads
    dispatch_changed = tables.changed

    def checkpoint(phase: str) -> None:
        audit(taken, state.found, phase, wrappers() + dispatch_changed())
        state.threads_after = max(state.threads_after, active())
        state.os_threads_after = max(state.os_threads_after, count_threads())

    paired = job.paired
    checks = call_checks.CallChecks(kernel_calls.count, trace=job.trace_ops)
    # No cyclic collection from here on, on any call: the timed blocks run without it (timing.Measurement.block),
    # and a collector enabled only outside them would tell the candidate which calls are judged.
    gc.disable()
    tools = Tools(torch=torch, checkpoint=checkpoint, measure=timing.measure, measurement=timing.Measurement,
                  serve=timing.serve_blocks, stats=timing.stats,
                  refusal=protocol.TaskRefusal, flatten=flatten_output, sync=sync,
                  send=reporter.send_tensors, record=call_record, clone_args=clone_args, to_device=to_device,
                  timers_intact=timing.timers_intact, no_grad=torch.no_grad, call=checks.call, checks=checks,
                  write=timing.write_inputs, fits=timing.fits, fresh=timing.fresh_buffers,
                  compiled_functions=kernel_calls.compiled_functions, refuse_tasks=spawn_guard.refuse_new_tasks,
                  channel=timing.Channel(paired.read_fd, paired.write_fd) if paired else None,
                  state_dict=torch.nn.Module.state_dict, load_state_dict=torch.nn.Module.load_state_dict)
    return tools, data, state, profile_error


def _import(tools: Tools, job: protocol.RunJob, scratch: str) -> types.ModuleType:
    progress(UNTRUSTED, close=True)
    return import_candidate(os.path.join(scratch, job.candidate))


def _init(tools: Tools, job: protocol.RunJob, data: dict[str, Any], state: RunState, module: types.ModuleType) -> Any:
    """`ModelNew` after the reference's init seed; then no thread or process can start."""
    state.phase = "init"
    device = job.setup.device
    tools.torch.manual_seed(job.setup.init_seed)
    model = module.ModelNew(*data["init_inputs"]).to(device)
    _weights(tools, data, state, model)
    tools.sync(device)
    tools.checkpoint("init")
    if job.triton and device == "cuda":
        # Triton compiles a kernel at its first launch and runs ptxas (and, once, a C compiler) as processes:
        # one untimed, unjudged call per input shape before new processes are refused below
        state.phase = "forward"
        seen = set()
        with tools.no_grad():
            for s in data["sets"]:
                shapes = tuple((tuple(a.shape), str(a.dtype)) if isinstance(a, tools.torch.Tensor) else repr(a) for a in s)
                if shapes not in seen:
                    seen.add(shapes)
                    values = tools.to_device(s, device)
                    tools.call(model, tools.write(tools.fresh(values), values))
                    tools.sync(device)
        tools.checkpoint("triton compile")
    # from here on no thread or process can start: import and __init__ may still run load_inline (ninja)
    # (not in the untimed child Nsight Compute profiles: its injected threads start at cudaProfilerStart, and that
    # child's verdict is thrown away)
    state.new_tasks_refused = tools.refusal(**tools.refuse_tasks(job.refuse_exec_memory)) if job.setup.profile != "ncu" else None
    return model


def _weights(tools: Tools, data: dict[str, Any], state: RunState, model: Any) -> None:
    """A task declaring `KEEP_STATE_DICT` (an extracted submodule, `agent.extract`): the candidate must hold the
    reference's parameter and buffer names and shapes, so that trained weights can be loaded into it later
    (`agent.swap`); when it does, the reference's weights are loaded into it here, so its outputs are judged with
    the reference's weights. A mismatch is reported (the parent rejects it) and nothing is loaded.
    What a candidate could fake: a `state_dict` hook that shows matching keys it does not use. That only keeps a
    verdict it earns on outputs (computed with whatever weights it really uses); it never turns wrong outputs
    into `correct`, and `agent.swap` loads the weights strictly and compares the whole model's outputs again."""
    want = data.get("state_dict")
    if want is None:
        return
    state.state_dict_checked = True
    got = {k: tuple(v.shape) for k, v in tools.state_dict(model).items()}
    shapes = {k: tuple(v.shape) for k, v in want.items()}
    missing, extra = sorted(set(shapes) - set(got)), sorted(set(got) - set(shapes))
    wrong = sorted(k for k in set(got) & set(shapes) if got[k] != shapes[k])
    if missing or extra or wrong:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + ([f"unexpected {', '.join(extra)}"] if extra else []) \
            + [f"{k} has shape {list(got[k])}, expected {list(shapes[k])}" for k in wrong]
        state.state_dict_mismatch = "; ".join(parts)[:600]
        return
    tools.load_state_dict(model, want, strict=True)


def _correctness(tools: Tools, job: protocol.RunJob, data: dict[str, Any], state: RunState, model: Any) -> None:
    """Every input set, written into reused buffers as every other call's inputs are (`call_inputs.write_inputs`):
    fresh buffers for each run of sets of one layout, as a timed block has. Each call's output and its
    arguments afterwards leave for the parent before the next candidate call: nothing the candidate runs later
    (another call, a thread, an atexit handler) can change what was judged."""
    state.phase = "forward"
    device = job.setup.device
    buffers: list[Any] | None = None
    with tools.no_grad():
        for i, s in enumerate(data["sets"]):
            values = tools.to_device(s, device)
            if buffers is None or not tools.fits(buffers, values):
                buffers = tools.fresh(values)
            args = tools.write(buffers, values)
            out = tools.call(model, args)
            tools.sync(device)
            structure, _, meta = tools.flatten(out)
            tools.send(f"forward/{i}", tools.record(out, args))
            state.metas.append(meta)
            state.structures.append(structure)
    tools.checkpoint("forward")


def _timing(tools: Tools, job: protocol.RunJob, data: dict[str, Any], state: RunState, model: Any) -> None:
    """The timed trials, with the hidden check calls and the verification round (`timing.Measurement`)."""
    state.phase = "timing"
    setup = job.setup
    timed = [tools.to_device(s, setup.device) for s in data["timing_sets"]]
    checks = [tuple(c) for c in setup.timing_checks]
    send, record, traced = tools.send, tools.record, tools.checks.bound(model)

    def emit(label: str, out: Any, buffers: list[Any]) -> None:
        send(label, record(out, buffers))

    if tools.channel is not None:  # paired: blocks on the parent's word (kernelbench.harness.paired)
        m = tools.measurement(traced, timed, setup.device, emit, checks)
        blocks = tools.serve(m, setup.warmup_trials, tools.channel)
        m.verify(leftovers=False)  # the parent knows which checks ran among the trials (`verdict.checks_asked`)
        if m.times_ms:
            state.timing = tools.stats(m.times_ms, setup.warmup_trials)
            state.timing_blocks = blocks
    else:
        st = tools.measure(traced, timed, setup.device, setup.warmup_trials, setup.timing_trials, setup.timing_budget_s,
                           emit, checks, setup.min_trials)
        state.timing = st
    tools.checkpoint("timing")


def _verification(tools: Tools, job: protocol.RunJob, data: dict[str, Any], state: RunState, model: Any) -> None:
    """The aten ops and kernel calls of every candidate call (`call_checks`), for the op policy; the public timers
    checked once more."""
    state.phase = "trace"
    state.ops = tools.checks.ops()
    state.op_windows_ns = tools.checks.tracer.windows
    state.kernel_calls = tools.checks.fewest_kernel_calls
    tools.checkpoint("trace")
    state.found["timer_patched"] += [f"{name} (public)" for name in tools.timers_intact()]
    state.phase = "done"


def _profile(tools: Tools, job: protocol.RunJob, data: dict[str, Any], model: Any, reporter: report.Reporter,
             profile_error: str) -> Callable[[], None] | None:
    """The profiled call, to run after the final report (`worker.main` sends it first): the verdict is in the
    parent's pipe before the profiled call starts."""
    kind, setup = job.setup.profile, job.setup
    if not (kind == "ncu" or (kind == "torch" and setup.timing_trials > 0)):
        return None
    first = data["timing_sets"][0] if data.get("timing_sets") else data["sets"][0]
    kernels = tools.compiled_functions()
    after, limit_s, to_device, clone_args = profiled_call.after_report, float(setup.profile_timeout_s), tools.to_device, tools.clone_args
    return lambda: after(kind, model, to_device(clone_args(first), setup.device), setup.device, reporter, kernels,
                         limit_s, profile_error)


def _result(state: RunState, traced: bool) -> protocol.RunResult:
    return protocol.RunResult(
        structures=tuple(state.structures), output_meta=state.metas, ops=tuple(state.ops),
        kernel_calls=state.kernel_calls, timer_patched=tuple(state.found["timer_patched"]),
        harness_tampered=tuple(state.found["harness_tampered"]), threads_before=state.threads_before,
        threads_after=state.threads_after, os_threads_before=state.os_threads_before,
        os_threads_after=state.os_threads_after, new_tasks_refused=state.new_tasks_refused,
        checks_installed=("kernel_calls", "op_policy") if traced else ("kernel_calls",), timing=state.timing,
        timing_blocks=state.timing_blocks, call_windows_ns=tuple(state.call_windows_ns),
        op_windows_ns=tuple(state.op_windows_ns), state_dict_checked=state.state_dict_checked,
        state_dict_mismatch=state.state_dict_mismatch)
