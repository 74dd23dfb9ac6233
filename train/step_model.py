"""A discrete-event model of one training step: how long it takes, and who waits on whom.

What it models is the code's own schedule, not an idealised one:
- each training process (rank) runs `agent.episode.EpisodeRunner` over its share of the batch's tasks, one
  policy call at a time; while a rank generates, evaluations run. Streamed turns (`streaming`, the default):
  a trajectory's next turn is ready as soon as its own verdict is back, and a call takes every ready one.
  Lockstep: one call per (task group, turn), a group's next turn ready when all its trajectories' verdicts
  of this turn are back;
- an evaluation is a compile on a compile worker, then a run stage on a run slot (`harness_error` and
  compile failures skip the run; a format error skips both). Compile workers are each rank's own (the local
  executor) or one pool (Ray); run slots are the node's timing GPUs, shared by every rank
  (`kernelbench.executors.gpu_lease`), or each rank's own run workers on CPU;
- a step is one weight sync, the slowest rank's rollout (the update is a collective: every rank waits for the
  last), then the update.
Latencies are drawn from `Latencies` (measured samples, from a run's trajectory logs, or stated assumptions).

Outputs are the quantities the run logs (docs/metrics.md): `perf/rollout_s`, `perf/eval_wait_share` (the
share of the rollout not spent generating, as `train/multiturn_rollout.py` computes it), and the training
GPUs' idle share (neither generating nor updating nor syncing).
"""

from __future__ import annotations

import heapq
import random
import statistics
from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Latencies:
    """Samples (seconds) the model draws from, uniformly; a list of one value is a constant."""

    compile_s: tuple[float, ...]
    run_s: tuple[float, ...]
    generate_call_s: tuple[float, ...] = ()
    """Whole policy calls, whatever their size (a decode-bound batch lasts about as long as one sequence).
    Empty: from `completion_tokens` and `decode_tokens_per_s` (a batched call lasts as long as its longest
    completion) plus `call_overhead_s`."""
    completion_tokens: tuple[float, ...] = ()
    decode_tokens_per_s: float = 0.0
    """Tokens per second of one sequence while the engine decodes a batch."""
    call_overhead_s: float = 0.0
    update_s: tuple[float, ...] = (0.0,)
    sync_s: tuple[float, ...] = (0.0,)
    format_error_share: float = 0.0
    """Completions with no kernel to evaluate (nothing compiled or run)."""
    no_run_share: float = 0.0
    """Evaluations that stop after the compile (a compile error, a static rejection)."""
    novel_share: float = 1.0
    """Evaluated completions whose kernel text the process's evaluator has not seen (compiled and run); the
    rest reuse a verdict (`reuse_identical_results`)."""
    same_call_share: float = 0.0
    """Evaluated completions that repeat a text first sent in the same policy call: they wait for its
    verdict. The rest of the reused ones repeat an earlier call's text and are answered at once."""


@dataclass(frozen=True)
class StepShape:
    """The batch and the evaluation capacity (from a preset and its layout)."""

    ranks: int
    tasks_per_rank: int
    trajectories: int
    turns: int
    compile_workers: int
    """Per rank (local executor), or in all when `shared_compile`."""
    run_slots: int
    """In all when `shared_run`, else per rank."""
    shared_compile: bool = False
    shared_run: bool = True
    streaming: bool = True
    """Streamed turns (`TrainConfig.streaming_turns`); False: lockstep."""


@dataclass(frozen=True)
class StepTime:
    """One simulated step."""

    step_s: float
    rollout_s: float
    generate_s: float
    eval_wait_share: float
    train_gpu_idle_share: float
    run_slot_busy_share: float
    evaluations: int


@dataclass
class _Rank:
    turns: list[list[int]]
    """Turns done per (group, trajectory)."""
    waiting: list[int]
    """Lockstep: verdicts of the current turn not back yet, per group."""
    ready: deque = field(default_factory=deque)
    """(group, trajectory) pairs whose next turn can be generated."""
    busy_until: float = 0.0
    generating: bool = False
    gen_s: float = 0.0
    done_at: float = 0.0
    finished: int = 0


def simulate(shape: StepShape, lat: Latencies, rng: random.Random) -> StepTime:
    """One step: events in time order (generation ends, compiles end, runs end)."""
    draw = lambda xs: xs[rng.randrange(len(xs))]  # noqa: E731
    events: list[tuple[float, int, str, tuple]] = []
    seq = 0

    def at(t: float, kind: str, *args) -> None:
        nonlocal seq
        heapq.heappush(events, (t, seq, kind, args))
        seq += 1

    waiters: dict[int, list[tuple[int, int]]] = {}  # evaluation id -> reused completions waiting for it
    ranks = [_Rank(turns=[[0] * shape.trajectories for _ in range(shape.tasks_per_rank)],
                   waiting=[0] * shape.tasks_per_rank) for _ in range(shape.ranks)]
    compile_free = [shape.compile_workers] * (1 if shape.shared_compile else shape.ranks)
    run_free = [shape.run_slots] * (1 if shape.shared_run else shape.ranks)
    compile_queue = [deque() for _ in compile_free]
    run_queue = [deque() for _ in run_free]
    run_busy_s, evaluations = 0.0, 0
    t0 = draw(lat.sync_s)

    def call_s(n: int) -> float:
        if lat.generate_call_s:
            return draw(lat.generate_call_s)
        longest = max(draw(lat.completion_tokens) for _ in range(n))
        return lat.call_overhead_s + longest / max(1e-9, lat.decode_tokens_per_s)

    def start_generation(r: int, now: float) -> None:
        rank = ranks[r]
        if rank.generating or not rank.ready:
            return
        if shape.streaming:  # every ready trajectory
            batch = list(rank.ready)
            rank.ready.clear()
        else:  # the first ready group's trajectories
            g, batch = rank.ready[0][0], []
            while rank.ready and rank.ready[0][0] == g:
                batch.append(rank.ready.popleft())
        d = call_s(len(batch))
        rank.generating, rank.gen_s = True, rank.gen_s + d
        at(now + d, "generated", r, tuple(batch))

    def start_pool(free: list, queue: list, i: int, now: float, kind: str) -> None:
        nonlocal run_busy_s
        while free[i] and queue[i]:
            free[i] -= 1
            r, gs, e = queue[i].popleft()
            d = draw(lat.compile_s if kind == "compiled" else lat.run_s)
            if kind == "ran":
                run_busy_s += d
            at(now + d, kind, r, gs, i, e)

    def verdict(r: int, gs: tuple[int, int], e: int, now: float) -> None:
        """Evaluation `e` is judged: its completion and every reused one waiting for it are recorded."""
        for rw, gw in [(r, gs)] + waiters.pop(e, []):
            record(rw, gw, now)

    def record(r: int, gs: tuple[int, int], now: float) -> None:
        """A verdict for trajectory `gs` = (group, trajectory) of rank `r`: which turns become ready."""
        rank = ranks[r]
        g, s = gs
        rank.turns[g][s] += 1
        if shape.streaming:
            advance(r, [gs], now)
            return
        rank.waiting[g] -= 1
        if rank.waiting[g] == 0:
            advance(r, [(g, k) for k in range(shape.trajectories)], now)

    def advance(r: int, pairs: list[tuple[int, int]], now: float) -> None:
        rank = ranks[r]
        for g, s in pairs:
            if rank.turns[g][s] < shape.turns:
                rank.ready.append((g, s))
            else:
                rank.finished += 1
                if rank.finished == shape.tasks_per_rank * shape.trajectories:
                    rank.done_at = now
        start_generation(r, now)

    for r, rank in enumerate(ranks):
        rank.ready.extend((g, s) for g in range(shape.tasks_per_rank) for s in range(shape.trajectories))
        start_generation(r, t0)
    while events:
        now, _, kind, args = heapq.heappop(events)
        if kind == "generated":
            r, batch = args
            if not shape.streaming:
                ranks[r].waiting[batch[0][0]] = len(batch)
            ci = 0 if shape.shared_compile else r
            this_call: list[int] = []
            # still generating while the call's answers are sorted: the next call takes every one that is
            # ready by then (a format error's trajectory included), as the runner's does
            for gs in batch:
                u = rng.random()
                if rng.random() < lat.format_error_share:
                    record(r, gs, now)
                elif u < lat.novel_share:
                    evaluations += 1
                    this_call.append(evaluations)
                    compile_queue[ci].append((r, gs, evaluations))
                elif u < lat.novel_share + lat.same_call_share and this_call:
                    waiters.setdefault(this_call[rng.randrange(len(this_call))], []).append((r, gs))
                else:  # an earlier call's text: its verdict is there already
                    record(r, gs, now)
            ranks[r].generating = False
            start_pool(compile_free, compile_queue, ci, now, "compiled")
            start_generation(r, now)
        elif kind == "compiled":
            r, gs, ci, e = args
            compile_free[ci] += 1
            if rng.random() < lat.no_run_share:
                verdict(r, gs, e, now)
            else:
                ri = 0 if shape.shared_run else r
                run_queue[ri].append((r, gs, e))
                start_pool(run_free, run_queue, ri, now, "ran")
            start_pool(compile_free, compile_queue, ci, now, "compiled")
        else:  # ran
            r, gs, ri, e = args
            run_free[ri] += 1
            verdict(r, gs, e, now)
            start_pool(run_free, run_queue, ri, now, "ran")
    rollout = max(rank.done_at for rank in ranks) - t0
    gen = max(rank.gen_s for rank in ranks)
    update = draw(lat.update_s)
    step = t0 + rollout + update
    idle = statistics.fmean((rollout - rank.gen_s) / step for rank in ranks)
    slots = shape.run_slots * (1 if shape.shared_run else shape.ranks)
    return StepTime(step_s=step, rollout_s=rollout, generate_s=gen,
                    eval_wait_share=max(0.0, rollout - gen) / rollout if rollout > 0 else 0.0,
                    train_gpu_idle_share=idle, run_slot_busy_share=run_busy_s / max(1e-9, slots * step),
                    evaluations=evaluations)


def simulate_steps(shape: StepShape, lat: Latencies, steps: int, seed: int = 0) -> list[StepTime]:
    rng = random.Random(seed)
    return [simulate(shape, lat, rng) for _ in range(steps)]
