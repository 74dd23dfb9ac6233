"""Re-evaluate the kernels of an earlier run without a model (`kernel-agent bench --backend replay --from DIR`).

Uses: measure one model's kernels on another GPU, re-time a run after a harness change, or check that a
run's statuses reproduce. Every record of DIR/results.jsonl keeps its task, trajectory and turn; its
candidate is submitted to the harness again (all at once: the evaluator's compile pool runs ahead of
its run workers). An answer the agent found no usable code in is judged the same way the agent judged
it (`agent.parsing.check_candidate`), since there is no kernel to run. The tasks are loaded again from
the origins the records name, so a task file edited since then is evaluated as it is now.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass
from typing import Any, Callable

from agent.parsing import check_candidate, format_error_result, ParsedResponse
from evals import baselines as bl
from evals.results_log import BenchError, BenchRecord, record_key, ResultsLog
from kernelbench.harness.result import EvalResult
from kernelbench.tasks.catalog import load_tasks
from kernelbench.tasks.task import OriginError, Task

# Imports inside functions: the evaluator imports torch; a replay's records load without it.


@dataclass(frozen=True)
class ReplaySource:
    """The run being replayed."""

    out_dir: str
    records: tuple[BenchRecord, ...]
    """Its results.jsonl records, first per (task, trajectory, turn)."""
    trajectories: int
    turns: int
    config: dict[str, Any]


def load_source(from_dir: str) -> ReplaySource:
    path = os.path.join(from_dir or "", "results.jsonl")
    if not from_dir or not os.path.exists(path):
        raise BenchError(f"--backend replay needs --from DIR holding results.jsonl (not found: {path})")
    seen, records = set(), []
    for rec in ResultsLog(path).read():  # another run's folder: read, never repaired
        if record_key(rec) not in seen:
            seen.add(record_key(rec))
            records.append(rec)
    if not records:
        raise BenchError(f"{path} holds no kernels to replay")
    config: dict[str, Any] = {}
    cfg_path = os.path.join(from_dir, "config.json")
    if os.path.exists(cfg_path):
        with open(cfg_path, encoding="utf-8") as f:
            config = json.load(f)
    bench = config.get("bench", {})
    trajectories = int(bench.get("trajectories") or 0) or 1 + max(
        (int(r.trajectory) for r in records if r.trajectory.isdigit()), default=0)
    turns = int(bench.get("turns") or 0) or 1 + max(r.turn for r in records)
    return ReplaySource(from_dir, tuple(records), trajectories, turns, config)


def source_tasks(source: ReplaySource, level: int = 0, limit: int = 0) -> list[Task]:
    """The run's tasks, in the order they first appear, loaded again from their origins."""

    order: list[tuple[str, str]] = []
    for rec in source.records:
        key = (rec.origin, rec.task)
        if key not in order:
            order.append(key)
    loaded: dict[str, dict[str, Task]] = {}
    tasks = []
    for origin, task_id in order:
        if origin not in loaded:
            try:
                loaded[origin] = {t.id: t for t in load_tasks(origin)}
            except OriginError as e:
                raise BenchError(f"replay: cannot load the tasks of {origin}: {e}") from None
        task = loaded[origin].get(task_id)
        if task is None:
            raise BenchError(f"replay: task {task_id} is no longer in {origin}")
        if not level or task.level == level:
            tasks.append(task)
    return tasks[:limit] if limit > 0 else tasks


def records_for(source: ReplaySource, tasks: list[Task]) -> list[BenchRecord]:
    ids = {t.id for t in tasks}
    return [r for r in source.records if r.task in ids]


def agent_verdict(rec: BenchRecord) -> EvalResult | None:
    """The format_error the agent gives an answer without usable code, or None when there is code to run."""

    error = check_candidate(rec.candidate)
    if not error:
        return None
    return format_error_result(ParsedResponse(code=rec.candidate, summary=rec.summary, answer="", error=error))


def run_replay(config, tasks: list[Task], todo: list[BenchRecord], evaluator,
               baselines: dict[str, bl.Baseline], on_record: Callable[[BenchRecord], None]) -> None:
    """Submit every candidate of `todo`; append each new record to the run's results.jsonl as it is judged."""
    log = ResultsLog(os.path.join(config.out, "results.jsonl"))
    by_id = {t.id: t for t in tasks}

    def emit(rec: BenchRecord, result: EvalResult) -> None:
        task = by_id[rec.task]
        result, source = bl.apply_compile_baseline(result, baselines.get(task.id))
        # Nothing was generated now: the agent's answer is carried over, its token counts are not (no cost).
        new = BenchRecord(task=task.id, level=task.level, origin=task.origin, trajectory=rec.trajectory,
                          turn=rec.turn, candidate=rec.candidate, summary=rec.summary, response=rec.response,
                          reasoning=rec.reasoning, compile_baseline=source, result=result,
                          replayed_from=os.path.abspath(config.from_dir), original_status=rec.result.status)
        log.append(new)
        on_record(new)

    pending = {}
    for rec in todo:
        early = agent_verdict(rec)
        if early is not None:
            emit(rec, early)
        else:
            pending[evaluator.submit(by_id[rec.task], rec.candidate)] = rec
    while pending:
        finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
        for fut in finished:
            rec = pending.pop(fut)
            emit(rec, _result_of(fut))


def _result_of(fut) -> EvalResult:
    """The harness's verdict; a harness failure on one kernel is recorded, not fatal to the replay."""
    from kernelbench.executors.evaluator import HarnessBroken

    try:
        return fut.result()
    except HarnessBroken:  # the judge is broken: the replay stops
        raise
    except Exception as e:
        return EvalResult(status="harness_error",
                          feedback=f"The evaluation harness failed: {type(e).__name__}: {e}"[:500])
