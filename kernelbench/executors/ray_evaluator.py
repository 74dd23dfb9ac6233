"""`RayEvaluator`: the `Evaluator` interface (submit -> Future, close, evaluate_many) over Ray actors.

Compile jobs go to CPU actors (`CompileWorker`, one CPU each), run jobs to actors pinned one per GPU
(`RunWorker`, `num_gpus=1`; one CPU each on a cluster without GPUs). One driver thread dispatches: a
candidate is compiled as soon as a compile actor is free and its run stage is queued the moment its build
is done, so compiles run ahead of the run stage as in the local `Evaluator` (DESIGN.md, Scale: Ray
distributes evaluation across nodes). Each actor sandboxes its work exactly as a local worker does, in
scratch folders of its own; the actors of one node share that node's build cache (flock'd, as local
workers share it). Ray is imported only here, and only when a `RayEvaluator` is made.

Builds travel with the job: a compile actor returns the cache entry's files beside the `Staged` job, and a
run actor on a node without that entry unpacks them before the run stage (`kernelbench.executors.shipment` says why
shipping beats rebuilding on the GPU node).

Faults. An actor that dies mid-job (killed, SIGKILLed, its node lost, or a candidate that took its memory)
is replaced by a fresh actor and the job requeued (from the compile stage when its build object went with
the node), at most `max_retries` times; `EvalResult.retries` records the restarts. Past the bound the job
gets a `harness_error` instead of hanging. A result that comes back `harness_error` is evaluated once more
from the compile stage; `EvalConfig.harness_error_limit` of them in a row break the evaluator
(`HarnessBroken`), as locally. A job running past its stage's own time limits plus a grace period has its actor killed,
which takes the same path. Errors the stages raise themselves (`HarnessError`: a broken task, a required
sandbox missing) fail the Future, as locally. Every job's Future is settled exactly once.

Back-pressure: with `max_in_flight` > 0, `submit` blocks while that many evaluations are unfinished (the
local `Evaluator` does the same), so the producer slows down instead of queueing without bound. Futures are
resolved on the dispatcher thread: a done callback must not call `submit` then, or it waits on itself.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

from kernelbench.harness.config import EvalConfig
from kernelbench.harness.staged import policy_of
from kernelbench.executors.evaluator import HarnessWatch
from kernelbench.executors.groups import Groups
from kernelbench.executors.ray_actors import CompileWorker, RunWorker  # noqa: F401 (re-exported)
from kernelbench.harness.feedback import render
from kernelbench.harness.result import HARNESS_ERROR, Conditions, EvalResult
from kernelbench.tasks.task import Task

# Imports inside functions: optional or GPU-only libraries (ray, imported when the Ray executor is chosen) are
# imported only where they are used, so a machine without them runs everything else.

log = logging.getLogger(__name__)

MAX_RETRIES = 2
"""Restarts of one job after its worker was lost; a candidate that kills every worker it meets stops here."""
GRACE_S = 120.0
"""Added to a stage's own time limits before its actor is presumed hung (transfers, a busy node)."""
POLL_S = 0.02
"""Longest a new submission waits for the dispatcher (an evaluation takes seconds)."""
START_FAILURES = 3
"""Actors of one stage failing to start in a row before the evaluator gives up (a broken cluster setup)."""


def ray_module() -> Any:
    try:
        import ray
    except ImportError as e:
        raise RuntimeError("the ray executor needs the `ray` package (pip install ray)") from e
    return ray


def connect(address: str = "", cpus: int = 1, **init_options: Any) -> bool:
    """Attach to Ray: the cluster at `address` (`auto`, `HOST:6379`, `ray://HOST:10001`), or a new local
    Ray when empty. Returns whether this call started or attached it (then `close` shuts it down again)."""
    ray = ray_module()
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address:
        ray.init(address=address, **init_options)
    else:  # "local": never attach to some other cluster by accident; enough logical CPUs for every actor
        init_options.setdefault("include_dashboard", False)
        init_options.setdefault("num_cpus", max(os.cpu_count() or 1, cpus))
        ray.init(address="local", **init_options)
    return True


# --- the driver side ---------------------------------------------------------------------------------

@dataclass(eq=False)
class _Job:
    task: Task
    src: str
    config: EvalConfig
    future: Future
    lost: int = 0
    """Times the worker running this job was lost."""
    shipment: Any = None
    """ObjectRef of the Shipment, once compiled."""
    harness_retried: bool = False
    """The job came back `harness_error` once and was evaluated again."""
    ticket: str = ""
    """Its group's generation (`kernelbench.executors.groups`); empty: nothing shared."""


@dataclass(eq=False)
class _Actor:
    handle: Any
    pid: int = 0
    job: _Job | None = None
    since: float = 0.0
    killed: bool = False


class _Stage:
    """The actors of one stage and the jobs waiting for them."""

    def __init__(self, name: str, make: Any, size: int):
        self.name, self.make, self.size = name, make, size
        self.actors: list[_Actor] = []
        self.idle: deque[_Actor] = deque()
        self.queue: deque[_Job] = deque()
        self.start_failures = 0

    def budget_s(self, config: EvalConfig) -> float:
        # the run stage is a reference and a run child, twice when a speedup is re-verified
        own = config.compile_timeout_s if self.name == "compile" else 4 * config.run_timeout_s
        return own + GRACE_S


class RayEvaluator:
    """Concurrent evaluation on Ray actors; the same interface and results as `kernelbench.executors.evaluator.Evaluator`."""

    def __init__(self, config: EvalConfig, compile_workers: int = 2, run_workers: int = 1, *, max_in_flight: int = 0,
                 address: str = "", max_retries: int = MAX_RETRIES, init_options: dict[str, Any] | None = None):
        if compile_workers < 1 or run_workers < 1 or max_in_flight < 0 or max_retries < 0:
            raise ValueError("compile_workers and run_workers must be >= 1, max_in_flight and max_retries >= 0")
        self.ray = ray_module()
        self._owns_ray = connect(address, compile_workers + run_workers, **(init_options or {}))
        self.config, self.max_in_flight, self.max_retries = config, max_in_flight, max_retries
        gpus = self.ray.cluster_resources().get("GPU", 0) >= 1
        run_options = {"num_cpus": 1, "num_gpus": 1} if gpus else {"num_cpus": 1}
        compile_cls = self.ray.remote(CompileWorker).options(num_cpus=1, max_restarts=0)
        run_cls = self.ray.remote(RunWorker).options(max_restarts=0, **run_options)
        self._stages = {"compile": _Stage("compile", lambda: compile_cls.remote(compile_workers), compile_workers),
                        "run": _Stage("run", run_cls.remote, run_workers)}
        self._waiting: dict[Any, tuple[str, _Actor]] = {}  # ObjectRef -> (stage, actor)
        self._cond = threading.Condition()
        self._open = 0
        self._closed = self._stop = False
        self._error: BaseException | None = None
        self.run_busy_s = 0.0  # seconds run actors held a job; against wall time: how long runs waited on compiles
        self.retried = 0  # restarts after a lost worker, over all jobs
        self.watch = HarnessWatch(config.harness_error_limit)
        self._groups = Groups(self._drop_group)
        with self._cond:
            for stage in self._stages.values():
                for _ in range(stage.size):
                    self._start_actor(stage)
        self._thread = threading.Thread(target=self._loop, name="ka-ray-dispatch", daemon=True)
        self._thread.start()

    # -- the public interface ---------------------------------------------------------------------------

    def submit(self, task: Task, candidate_src: str, config: EvalConfig | None = None, group: str = "") -> Future:
        """As `Evaluator.submit`; a group's candidates share a reference on each run actor they reach."""
        self.watch.check()
        cfg = config or self.config
        if cfg.build_cache_dir:  # actors do not share the driver's working directory
            cfg = replace(cfg, build_cache_dir=os.path.abspath(cfg.build_cache_dir))
        job = _Job(task, candidate_src, cfg, Future())
        with self._cond:
            while self.max_in_flight and self._open >= self.max_in_flight and not (self._closed or self._error):
                self._cond.wait()
            if self._error is not None:
                raise RuntimeError("RayEvaluator failed") from self._error
            if self._closed:
                raise RuntimeError("RayEvaluator is closed")
            self._open += 1
            job.ticket = self._groups.join(group)
            self._stages["compile"].queue.append(job)
        return job.future

    def evaluate_many(self, items: list[tuple[Task, str]]) -> list[EvalResult]:
        futures = [self.submit(task, src) for task, src in items]
        return [f.result() for f in futures]

    def wait_ready(self, timeout_s: float = 300.0) -> bool:
        """Block until every actor has started (benchmarks time steady state); False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            return self._cond.wait_for(lambda: all(a.pid for s in self._stages.values() for a in s.actors),
                                       max(0.0, deadline - time.monotonic()))

    def running(self) -> list[tuple[str, int, Any]]:
        """(stage, pid, actor handle) of every actor holding a job now (for monitoring, and tests that kill one)."""
        with self._cond:
            return [(s.name, a.pid, a.handle) for s in self._stages.values() for a in s.actors
                    if a.job is not None and a.pid]

    def close(self) -> None:
        """Wait for every submitted evaluation, then stop the actors (and Ray, when this evaluator started it)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._open == 0 or self._error is not None)
            self._stop = True
        self._thread.join()
        for stage in self._stages.values():
            for actor in stage.actors:
                self.ray.kill(actor.handle, no_restart=True)
            stage.actors.clear()
        if self._owns_ray:
            self.ray.shutdown()
            self._owns_ray = False

    def __enter__(self) -> "RayEvaluator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the dispatcher thread --------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while True:
                with self._cond:
                    if self._stop:
                        return
                    self._dispatch()
                    self._watch()
                    refs = list(self._waiting)
                if not refs:
                    time.sleep(POLL_S)
                    continue
                for ref in self.ray.wait(refs, num_returns=1, timeout=POLL_S)[0]:
                    self._handle(ref)
        except BaseException as e:  # a bug or Ray itself failing: fail every open job rather than hang
            log.exception("the Ray dispatcher failed")
            self._fail_all(e)

    def _start_actor(self, stage: _Stage) -> None:
        actor = _Actor(stage.make())
        stage.actors.append(actor)
        self._waiting[actor.handle.ready.remote()] = (stage.name, actor)

    def _dispatch(self) -> None:
        compile_, run = self._stages["compile"], self._stages["run"]
        while compile_.queue and compile_.idle:
            job, actor = compile_.queue.popleft(), compile_.idle.popleft()
            decided, job.shipment = actor.handle.compile.options(num_returns=2).remote(job.task, job.src, job.config)
            self._hold(compile_, actor, job, decided)
        while run.queue and run.idle:
            job, actor = run.queue.popleft(), run.idle.popleft()
            self._hold(run, actor, job, actor.handle.run.remote(job.shipment, job.ticket))

    def _hold(self, stage: _Stage, actor: _Actor, job: _Job, ref: Any) -> None:
        actor.job, actor.since = job, time.monotonic()
        self._waiting[ref] = (stage.name, actor)

    def _watch(self) -> None:
        """Kill an actor whose job outlived its stage's limits; the lost-worker path then retries the job."""
        now = time.monotonic()
        for name, actor in self._waiting.values():
            job = actor.job
            if job is not None and not actor.killed and now - actor.since > self._stages[name].budget_s(job.config):
                log.warning("%s actor pid %s held one job %.0f s: presumed hung, killing it", name, actor.pid,
                            now - actor.since)
                self.ray.kill(actor.handle, no_restart=True)
                actor.killed = True

    def _handle(self, ref: Any) -> None:
        exc = self.ray.exceptions
        value, error = None, None
        try:
            value = self.ray.get(ref)
        except exc.RayTaskError as e:  # raised by the stage itself (HarnessError ...): not a lost worker
            error = e
        except exc.RayError as e:
            error = e
        settle: list[tuple[_Job, Any]] = []
        with self._cond:
            name, actor = self._waiting.pop(ref)
            stage, job = self._stages[name], actor.job
            if job is None:  # the start-up call
                self._started(stage, actor, value, error)
            elif isinstance(error, exc.RayTaskError):
                settle.append((job, getattr(error, "cause", None) or error))
                self._release(stage, actor)
            elif error is not None:
                settle += self._lost(stage, actor, error)
            else:
                if name == "run":
                    self.run_busy_s += time.monotonic() - actor.since
                if value is not None and value.status == HARNESS_ERROR and not job.harness_retried:
                    job.harness_retried = True  # once more, from the compile stage (never cached)
                    self._stages["compile"].queue.appendleft(job)
                elif value is not None:  # a verdict, or decided before the run stage (format, checks, compile)
                    settle.append((job, replace(value, retries=job.lost + job.harness_retried)))
                else:
                    self._stages["run"].queue.append(job)
                self._release(stage, actor)
        for job, outcome in settle:
            self._settle(job, outcome)

    def _started(self, stage: _Stage, actor: _Actor, pid: Any, error: BaseException | None) -> None:
        if error is None:
            actor.pid, stage.start_failures = int(pid), 0
            stage.idle.append(actor)
            self._cond.notify_all()
            return
        stage.start_failures += 1
        stage.actors.remove(actor)
        if stage.start_failures > START_FAILURES:
            raise RuntimeError(f"{stage.name} actors fail to start: {error}")
        log.warning("a %s actor failed to start (%s); starting another", stage.name, type(error).__name__)
        self._start_actor(stage)

    def _release(self, stage: _Stage, actor: _Actor) -> None:
        actor.job = None
        stage.idle.append(actor)

    def _lost(self, stage: _Stage, actor: _Actor, error: BaseException) -> list[tuple[_Job, Any]]:
        """The actor holding `actor.job` is gone: start a fresh one and retry the job, within the bound."""
        job = actor.job
        log.warning("%s actor pid %s lost (%s); starting a fresh one", stage.name, actor.pid, type(error).__name__)
        self.ray.kill(actor.handle, no_restart=True)
        stage.actors.remove(actor)
        self._start_actor(stage)
        job.lost += 1
        if job.lost > self.max_retries:
            return [(job, self._fault(job, error))]
        self.retried += 1
        build_gone = stage.name == "compile" or isinstance(error, self.ray.exceptions.ObjectLostError)
        self._stages["compile" if build_gone else "run"].queue.appendleft(job)
        return []

    def _fault(self, job: _Job, error: BaseException) -> EvalResult:
        detail = (f"The evaluation harness lost the worker evaluating this kernel {job.lost} times "
                  f"(last: {type(error).__name__}); no verdict.")
        cond = Conditions(device=job.config.device, op_policy=policy_of(job.task, job.config), size=job.config.size)
        return EvalResult(status=HARNESS_ERROR, conditions=cond, retries=self.max_retries,
                          feedback=render(HARNESS_ERROR, detail=detail))

    def _settle(self, job: _Job, outcome: Any) -> None:
        """Resolve a job's Future (outside the lock: callbacks run here) and free its in-flight slot."""
        # before the result is out: a candidate submitted after it never joins its seeds
        self._groups.back(job.ticket, judged=isinstance(outcome, BaseException) or outcome.compiled)
        if not isinstance(outcome, BaseException):
            self.watch.record(outcome)
            outcome = self.watch.broken or outcome
        if isinstance(outcome, BaseException):
            job.future.set_exception(outcome)
        else:
            job.future.set_result(outcome)
        with self._cond:
            self._open -= 1
            self._cond.notify_all()

    def _drop_group(self, ticket: str) -> None:
        """Every candidate of `ticket` is back: each run actor frees that group's references."""
        with self._cond:
            for actor in self._stages["run"].actors:
                actor.handle.drop.remote(ticket)  # not awaited: a lost actor's references went with it

    def _fail_all(self, error: BaseException) -> None:
        with self._cond:
            self._error = error
            jobs = [j for s in self._stages.values() for j in s.queue]
            jobs += [a.job for _, a in self._waiting.values() if a.job is not None]
            for s in self._stages.values():
                s.queue.clear()
            self._waiting.clear()
            self._cond.notify_all()
        for job in jobs:
            if not job.future.done():
                self._settle(job, RuntimeError(f"the Ray executor failed: {error}"))
