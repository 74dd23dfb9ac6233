"""DIR/results.jsonl of a benchmark run: one `BenchRecord` per judged kernel, and the error a run that cannot
start raises. Shared by the agent run (`evals.runner`), the replay (`evals.replay`) and every reader of a run
(metrics, report, sweep, compare, view).

Both ends speak one frozen record with explicit (de)serialisation (STYLE.md): `BenchRecord.from_dict` is as
strict as `EvalResult.from_dict`, so a line some other writer left, or one a reader would misread, is an
error naming the field, never a verdict read with defaults.
"""

from __future__ import annotations

import dataclasses
import json
import os
import typing
from dataclasses import dataclass
from typing import Any

from kernelbench.harness.record_codec import value_of
from kernelbench.harness.result import EvalResult


class BenchError(ValueError):
    """A run that cannot start as asked (bad task spec, output folder in use, mismatched resume, a results.jsonl
    that holds something other than records)."""


@dataclass(frozen=True)
class BenchRecord:
    """One line of results.jsonl: where the kernel sits in the run, what the agent answered, and the harness's
    full verdict on it."""

    task: str
    """The task's id (`kb:L1/19_ReLU`)."""
    level: int
    """The task's KernelBench level (1-4)."""
    origin: str
    """Where the task was loaded from (`builtin`, `kernelbench:PATH`, `hf:NAME`): a replay loads it from there."""
    trajectory: str
    """The trajectory's id within its task (`0`..`N-1` for a bench run)."""
    turn: int
    """The turn's index within its trajectory, from 0."""
    candidate: str
    """The solution file submitted to the harness; empty when the answer held none (format_error)."""
    summary: str
    """The agent's own summary of its change, shown in the next turn's prompt."""
    response: str
    """The answer as generated (inline `<think>` blocks included)."""
    reasoning: str
    """Reasoning the backend returned in a separate field; empty when it returned none."""
    compile_baseline: str
    """Where `result.speedup_vs_compile` came from: `measured` (in this evaluation), `cached` (the task's cached
    `torch.compile` baseline, `evals.baselines`) or `none` (no baseline: the speedup is 0)."""
    result: EvalResult
    """The harness's verdict, conditions included (`EvalResult.from_dict` reads records older than its fields)."""

    # Optional: each is written by one kind of run only, and absent (its default, "not recorded") otherwise.
    # The agent run writes the five below; a replay, which generates nothing, writes none of them.
    finish_reason: str = ""
    """Why generation stopped (`stop`, `length`, ...); "" when not recorded (a replay, a backend that gives none)."""
    generate_s: float = 0.0
    """Wall time of the batched policy call that produced the answer; 0 when not recorded (a replay)."""
    prompt_tokens: int = 0
    """Prompt tokens of the answer's policy call; 0 when not recorded (a replay, a backend that cannot count)."""
    completion_tokens: int = 0
    """Tokens generated for the answer, reasoning included; 0 when not recorded."""
    reasoning_tokens: int = 0
    """Of `completion_tokens`, those spent reasoning; 0 when not recorded."""
    # A replay (`--backend replay --from DIR`) writes these two.
    replayed_from: str = ""
    """The run folder (absolute) whose kernel this re-evaluates; "" for a kernel the agent wrote in this run."""
    original_status: str = ""
    """`result.status` of the kernel in the replayed run; "" when not a replay."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON object results.jsonl holds, with the keys the writers wrote before records were typed, so an
        older reader reads it as before. An optional field at its default ("not recorded") is left out: a replay's
        line holds no token counts, an agent run's no replay fields (and an answer counted 0 tokens no count,
        which every reader read as 0 anyway)."""
        d: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in OPTIONAL and value == f.default:
                continue
            d[f.name] = value.to_dict() if f.name == "result" else value
        return d

    def to_json(self) -> str:
        """One results.jsonl line (no newline), keys sorted."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: Any) -> "BenchRecord":
        """The record a `to_dict` wrote, exactly: every required field present, no other key, each value of its
        type (`record_codec.value_of`: an int is read as a float where a float is due, a bool is no int); only
        `OPTIONAL` fields may be absent, and read as their defaults. `result` is read by `EvalResult.from_dict` (which reads results
        older than some of its fields). Anything else is a ValueError naming the field path."""
        if not isinstance(d, dict):
            raise ValueError(f"BenchRecord: expected an object, got {type(d).__name__}")
        missing = [name for name in FIELD_TYPES if name not in d and name not in OPTIONAL]
        unknown = sorted(str(k) for k in d if k not in FIELD_TYPES)
        if missing or unknown:
            raise ValueError(f"BenchRecord: missing fields {missing}, unknown fields {unknown}")
        values: dict[str, Any] = {}
        for name, value in d.items():
            if name == "result":
                if not isinstance(value, dict):
                    raise ValueError(f"BenchRecord.result: expected an object, got {type(value).__name__}")
                try:
                    values[name] = EvalResult.from_dict(value)
                except ValueError as e:
                    raise ValueError(f"BenchRecord.result: {e}") from None
            else:
                values[name] = value_of(FIELD_TYPES[name], value, f"BenchRecord.{name}")
        return cls(**values)


FIELD_TYPES: dict[str, Any] = typing.get_type_hints(BenchRecord)
"""Each field's type, as `from_dict` checks it (the annotations themselves are strings under `__future__`)."""

OPTIONAL = frozenset(f.name for f in dataclasses.fields(BenchRecord) if f.default is not dataclasses.MISSING)
"""The fields a line may lack: those with a default (BenchRecord's comments say which run writes which)."""


def record_key(rec: BenchRecord) -> tuple[str, str, int]:
    """Which kernel of the run a record is: (task, trajectory, turn). The first record of a key wins."""
    return rec.task, rec.trajectory, rec.turn


class ResultsLog:
    """DIR/results.jsonl: one `BenchRecord` a line, appended and fsynced as each kernel is judged."""

    def __init__(self, path: str):
        self.path = path

    def load(self) -> list[BenchRecord]:
        """Every record, for the run that appends next: a torn last line (a kill mid-write) is cut off the file so
        appends stay line-aligned. Any other line that is not a record raises BenchError naming it."""
        data = self._bytes()
        complete = data[:data.rfind(b"\n") + 1]
        if len(complete) < len(data):
            with open(self.path, "r+b") as f:
                f.truncate(len(complete))
        return self._parse(complete)

    def read(self) -> list[BenchRecord]:
        """Every record, the file left as it is: for readers of a run (compare, view, replay, sweep), which may be
        looking at a run still being written, whose last line can be half-appended. That line is not returned and
        not cut (cutting it under its writer would corrupt the line the writer finishes)."""
        data = self._bytes()
        return self._parse(data[:data.rfind(b"\n") + 1])

    def append(self, record: BenchRecord) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(record.to_json() + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _bytes(self) -> bytes:
        if not os.path.exists(self.path):
            return b""
        with open(self.path, "rb") as f:
            return f.read()

    def _parse(self, data: bytes) -> list[BenchRecord]:
        """The records of `data`, whole lines only; a line that is not one raises (never skipped: a run's
        metrics over silently fewer kernels would look like a run that did worse)."""
        records = []
        for number, line in enumerate(data.split(b"\n")[:-1], start=1):
            try:
                records.append(BenchRecord.from_dict(json.loads(line)))
            except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors too
                raise BenchError(f"{self.path}, line {number}: not a results.jsonl record: {e}") from None
        return records
