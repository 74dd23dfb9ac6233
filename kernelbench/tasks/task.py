"""The task record shared by every loader, and the errors of a malformed problem file or origin."""

from __future__ import annotations

from dataclasses import dataclass


class TaskFormatError(ValueError):
    """A problem file that cannot serve as a task; the message names the file and what is wrong."""


class OriginError(ValueError):
    """An origin string that names nothing loadable; the message says which and why."""


@dataclass(frozen=True)
class Task:
    """One KernelBench-format problem.

    The source text is kept verbatim: listing a task never executes it. Executing happens only when a
    problem is loaded for evaluation (see `kernelbench.tasks.problem.load_problem`).
    """

    id: str
    """Stable identifier, unique within an origin: `L1/03_gelu` (builtin), `kb:L1/19_ReLU`, `hf:L2/12_Gemm_Add`."""
    level: int
    """KernelBench level 1-4 (1: single ops, 2: fusions, 3: architectures, 4: Hugging Face models)."""
    name: str
    """Human name, e.g. `19_ReLU` or `03_gelu`."""
    origin: str
    """Where it came from: `builtin`, `kernelbench:PATH` or `hf:DATASET`."""
    source: str
    """The problem file's text (`Model`, size constants, `get_inputs`, `get_init_inputs`)."""
    path: str = ""
    """File it was read from, or empty for tasks that live only in a dataset."""
    needs_weights: bool = False
    """Level-4 problems load Hugging Face models; they are listed but need those weights to run."""
    op_policy: str = "strict"
    """Default op policy for candidates: `strict` (no PyTorch compute in forward) or `partial`."""
    prompt_source: str = ""
    """What prompts show of the problem when it is not all of `source` (a task family may keep a fact, such as
    the input's memory layout, out of the agent's sight so that only a measurement reveals it); empty: `source`."""

    @property
    def shown_source(self) -> str:
        """The problem text prompts show: `prompt_source`, else `source`."""
        return self.prompt_source or self.source
