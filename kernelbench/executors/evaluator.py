"""`Evaluator`: many candidates concurrently, a compile pool running ahead of the run workers.

Compiling is CPU-bound and slow (12-90 s), running is short and wants a quiet device, so the two stages get
separate pools: `compile_workers` threads each drive a sandboxed compile child, `run_workers` threads drive
the run stage. A submitted candidate enters the compile pool at once and its run stage is queued the moment
its build is done, so with many candidates the run workers never wait on a compiler (the layout Kevin-32B's
and KernelBench's GPU evaluators leave out; DESIGN.md, Scale: CPU compile workers feed GPU run workers).
Threads suffice: the work happens in child processes.

Harness faults: a result that comes back `harness_error` is evaluated once more (`retries` = 1); after
`EvalConfig.harness_error_limit` of them in a row the evaluator is broken: that Future and every later
`submit` raise `HarnessBroken`, naming the cause, and the job stops (DESIGN.md, rule 6).

Back-pressure: with `max_in_flight` > 0, `submit` blocks while that many evaluations are unfinished, so a
producer (the policy generating candidates) cannot run arbitrarily far ahead of the harness. Do not call
`submit` from a Future's done callback then: the callback would wait on the workers it runs on.
`kernelbench.executors.ray_evaluator.RayEvaluator` offers the same interface across machines.

Groups: candidates submitted with the same non-empty `group` (a GRPO group: one task's candidates of one step
and turn) share one seed set and one reference child per task and configuration (`reference_cache`; paired
timing on CPU keeps its reference per candidate). A group closes to new candidates when one of its results
is back from a run stage (`kernelbench.executors.groups`), and its references are freed when its last is.

    with Evaluator(EvalConfig(device="cpu"), compile_workers=2) as ev:
        futures = [ev.submit(task, src) for src in candidates]
        results = [f.result() for f in futures]
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from dataclasses import replace

from kernelbench.executors.gpu_lease import GpuPool
from kernelbench.executors.groups import Groups
from kernelbench.harness import children
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.evaluate import compile_stage, run_stage
from kernelbench.harness.reference_cache import ReferenceCache, Share
from kernelbench.harness.result import HARNESS_ERROR, EvalResult
from kernelbench.tasks.task import Task


class HarnessBroken(RuntimeError):
    """The harness failed on several evaluations in a row (each retried): a job must stop, not go on scoring."""


class HarnessWatch:
    """Counts `harness_error` results in a row; past the limit, `check` raises `HarnessBroken` for good."""

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError(f"harness_error_limit must be >= 1, got {limit}")
        self.limit = limit
        self.in_row = 0
        self.broken: HarnessBroken | None = None
        self._lock = threading.Lock()

    def record(self, result: EvalResult) -> None:
        with self._lock:
            if result.status != HARNESS_ERROR:
                self.in_row = 0
                return
            self.in_row += 1
            if self.in_row >= self.limit and self.broken is None:
                # feedback: status line, the "harness failed" line, then the cause
                cause = " ".join(" ".join(result.feedback.splitlines()[2:]).split()) or "unknown cause"
                self.broken = HarnessBroken(f"the evaluation harness failed {self.in_row} times in a row "
                                            f"(each retried once); last cause: {cause[:600]}")

    def check(self) -> None:
        if self.broken is not None:
            raise self.broken


class Evaluator:
    """Concurrent evaluation; `submit` returns a Future[EvalResult] that never fails for a candidate's fault."""

    def __init__(self, config: EvalConfig, compile_workers: int = 2, run_workers: int = 1, max_in_flight: int = 0,
                 gpus: tuple[str, ...] = (), references: ReferenceCache | None = None):
        if compile_workers < 1 or run_workers < 1 or max_in_flight < 0:
            raise ValueError("compile_workers and run_workers must be >= 1, max_in_flight >= 0")
        if gpus and (config.device != "cuda" or run_workers != len(gpus)):
            raise ValueError(f"GPUs to time on ({', '.join(gpus)}) need device cuda (got {config.device!r}) and one run "
                             f"worker each (got {run_workers})")
        self.config = config
        # CUDA with a layout: each run owns one of these GPUs, machine-wide (gpu_lease)
        self._gpus = GpuPool(tuple(gpus)) if gpus else None
        self.compile_workers = compile_workers
        self.max_in_flight = max_in_flight
        self._slots = threading.BoundedSemaphore(max_in_flight) if max_in_flight else None
        self.run_busy_s = 0.0  # seconds inside the run stage; against wall time: how long runs waited on compiles
        # ninja jobs per build: share the cores between concurrent compiles instead of oversubscribing them
        self._jobs = max(1, (os.cpu_count() or 2) // compile_workers)
        self._compile_pool = ThreadPoolExecutor(compile_workers, thread_name_prefix="ka-compile")
        self._run_pool = ThreadPoolExecutor(run_workers, thread_name_prefix="ka-run")
        self._lock = threading.Lock()
        self._closed = False
        self.watch = HarnessWatch(config.harness_error_limit)
        # the groups' references (`submit(..., group=)`); pass one to set its bounds
        self.references = references if references is not None else ReferenceCache()
        self.groups = Groups(self.references.drop)
        children.prestart_warm_worker(config)  # its torch import overlaps what the caller does before submitting

    def submit(self, task: Task, candidate_src: str, config: EvalConfig | None = None, group: str = "") -> Future:
        """Evaluate `candidate_src` against `task`; candidates with the same non-empty `group` share one
        reference computation per task and configuration (see the module docstring)."""
        self.watch.check()
        cfg = config or self.config
        done: Future = Future()
        if self._slots is not None:
            self._slots.acquire()  # back-pressure: wait for one of the max_in_flight evaluations to finish
        with self._lock:
            if self._closed:
                if self._slots is not None:
                    self._slots.release()
                raise RuntimeError("Evaluator is closed")
            if self._slots is not None:
                done.add_done_callback(lambda _: self._slots.release())
            ticket = self.groups.join(group)
            staged = self._compile_pool.submit(compile_stage, task, candidate_src, cfg, self._jobs)
        staged.add_done_callback(lambda f: self._after_compile(f, done, ticket))
        return done

    def _after_compile(self, staged: Future, done: Future, ticket: str) -> None:
        if staged.exception() is not None:  # a harness fault (e.g. sandbox required but missing)
            self.groups.back(ticket, judged=False)
            done.set_exception(staged.exception())
            return
        try:
            run = self._run_pool.submit(self._timed_run, staged.result(), ticket)
        except RuntimeError as e:  # pool shut down under us
            self.groups.back(ticket, judged=False)
            done.set_exception(e)
            return
        run.add_done_callback(lambda f: _forward(f, done))

    def _timed_run(self, staged, ticket: str) -> EvalResult:
        judged = staged.decided is None
        try:
            if self._gpus is None:
                return self._run_on(staged, ticket)
            with self._gpus.lease() as gpu:  # waits for this GPU to be free of every other timing run
                return self._run_on(replace(staged, config=replace(staged.config, cuda_device=gpu)), ticket)
        finally:  # before the result is handed out (`_forward`): no later candidate joins its seeds
            self.groups.back(ticket, judged)

    def _run_on(self, staged, ticket: str) -> EvalResult:
        start = time.perf_counter()
        share = Share(self.references, ticket) if ticket else None
        try:
            result = run_stage(staged, share)
            if result.status == HARNESS_ERROR:  # once more, from the compile stage (never cached)
                again = run_stage(compile_stage(staged.task, staged.src, staged.config, self._jobs), share)
                result = replace(again, retries=result.retries + 1)
        finally:
            with self._lock:
                self.run_busy_s += time.perf_counter() - start
        self.watch.record(result)
        self.watch.check()
        return result

    def evaluate_many(self, items: list[tuple[Task, str]]) -> list[EvalResult]:
        futures = [self.submit(task, src) for task, src in items]
        return [f.result() for f in futures]

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._compile_pool.shutdown(wait=True)
        self._run_pool.shutdown(wait=True)
        self.references.clear()

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _forward(src: Future, dst: Future) -> None:
    if src.exception() is not None:
        dst.set_exception(src.exception())
    else:
        dst.set_result(src.result())
