"""DIR/results.jsonl of a benchmark run: one record per judged kernel, and the error a run that cannot
start raises. Shared by the agent run (`evals.runner`) and the replay (`evals.replay`)."""

from __future__ import annotations

import json
import os
from typing import Any

from kernelbench.harness.result import EvalResult
from kernelbench.tasks.task import Task


class BenchError(ValueError):
    """A run that cannot start as asked (bad task spec, output folder in use, mismatched resume)."""


class ResultsLog:
    """DIR/results.jsonl: one JSON record per evaluated kernel, appended and fsynced as each finishes."""

    def __init__(self, path: str):
        self.path = path

    def load(self) -> list[dict[str, Any]]:
        """Every complete record; a torn last line is cut off the file so appends stay line-aligned."""
        if not os.path.exists(self.path):
            return []
        with open(self.path, "rb") as f:
            data = f.read()
        if data and not data.endswith(b"\n"):
            data = data[:data.rfind(b"\n") + 1]
            with open(self.path, "r+b") as f:
                f.truncate(len(data))
        records = []
        for line in data.decode("utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
        return records

    def append(self, record: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())


def record_key(rec: dict[str, Any]) -> tuple[str, str, int]:
    return rec["task"], str(rec["trajectory"]), int(rec["turn"])


def make_record(task: Task, traj_id: str, turn_index: int, result: EvalResult, *, candidate: str, summary: str = "",
                response: str = "", reasoning: str = "", compile_baseline: str = "none", **extra: Any) -> dict[str, Any]:
    """One results.jsonl line: where the kernel sits, what it was, and the harness's full verdict."""
    return {"task": task.id, "level": task.level, "origin": task.origin, "trajectory": traj_id, "turn": turn_index,
            "candidate": candidate, "summary": summary, "response": response, "reasoning": reasoning,
            "compile_baseline": compile_baseline, "result": result.to_dict(), **extra}
