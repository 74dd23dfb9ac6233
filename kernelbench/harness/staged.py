"""A candidate between the harness's stages: `Staged` is what the compile stage hands to the run stage (and
what the executors ship between machines), and `policy_of` the op policy it is judged under."""

from __future__ import annotations

from dataclasses import dataclass

from kernelbench.harness.build import builder
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.result import EvalResult
from kernelbench.tasks.task import Task


@dataclass(frozen=True)
class Staged:
    """A candidate past the compile stage, ready for the run stage (or already decided)."""

    task: Task
    src: str
    config: EvalConfig
    build: builder.BuildOutcome | None
    decided: EvalResult | None = None
    """Set when the candidate failed before the run stage (format, static check, compile)."""
    manifest: dict[str, dict[str, str]] | None = None
    """The build folder as the parent recorded it after the compile stage (`build_manifest.record`): all
    the run child may load. None: recorded when the run stage starts."""


def policy_of(task: Task, config: EvalConfig) -> str:
    return config.op_policy or task.op_policy or "strict"
