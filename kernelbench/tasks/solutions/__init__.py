"""Hand-written reference solutions for the built-in suite, one KernelBench-format file per task and device.

Layout: `solutions/<kind>/L<level>/<task stem>.py` where kind is `cpu` (C++ with OpenMP through
`load_inline(cpp_sources=...)`), `cuda` (CUDA kernels through `load_inline(cuda_sources=...)`) or
`cpu_slow` (correct C++ solutions written to be slower than their `cpu` counterpart: the warm start
pairs them so that reinforcement learning has a faster and a slower correct kernel to move between) or
`triton` (`@triton.jit` kernels: compiled on CUDA, run by Triton's interpreter on CPU, where they are judged
for correctness only; the same file serves both devices).
The files are fixtures for the harness tests, warm-start training data and example solutions in prompts;
see README.md in this folder for the conventions every file follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SOLUTIONS_ROOT = Path(__file__).resolve().parent
KINDS = ("cpu", "cuda", "cpu_slow", "triton")
DEVICE_OF_KIND = {"cpu": "cpu", "cuda": "cuda", "cpu_slow": "cpu", "triton": "cpu"}
"""The device a kind is checked on by default (`triton` runs on `cuda` too: scripts/check_solutions.py)."""

# Tasks whose eager fp32 reference is itself further than atol = rtol = 1e-4 from the exact product when
# both operands are scaled by 3: MKL's rounding over K terms of size ~9 reaches ~1e-4 at K = 64 and several
# 1e-4 at K = 256 (measured against float64), so entries near zero fail the tolerance whatever a candidate
# computes, short of reproducing MKL's summation order bit for bit. The solutions accumulate in double (closer
# to exact than the reference); their checks use the task's own input distribution only.
SCALED_INPUTS_UNRELIABLE = frozenset({
    "L1/21_matmul_square", "L1/22_matmul_rectangular", "L1/23_batched_matmul",
    "L1/25_matmul_transposed_a", "L1/27_scaled_matmul",
})


@dataclass(frozen=True)
class Solution:
    """One reference solution file."""

    task_id: str
    """Built-in task it solves, e.g. `L1/01_relu`."""
    kind: str
    """`cpu`, `cuda`, `cpu_slow` or `triton` (see the module docstring)."""
    path: str
    """Absolute path of the file."""

    @property
    def device(self) -> str:
        """Device the solution runs on (`cpu` for both `cpu` and `cpu_slow`)."""
        return DEVICE_OF_KIND[self.kind]

    @property
    def source(self) -> str:
        return Path(self.path).read_text(encoding="utf-8")


def list_solutions(kind: str | None = None, root: str | Path | None = None) -> list[Solution]:
    """Every solution file of `kind` (all kinds when None), ordered by kind, level and task number."""
    root = Path(root) if root is not None else SOLUTIONS_ROOT
    kinds = KINDS if kind is None else (kind,)
    if any(k not in KINDS for k in kinds):
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    found = []
    for k in kinds:
        for level_dir in sorted((root / k).glob("L[0-9]")):
            for path in sorted(level_dir.glob("[0-9]*.py")):
                found.append(Solution(task_id=f"{level_dir.name}/{path.stem}", kind=k, path=str(path)))
    return found


def find_solution(task_id: str, kind: str = "cpu", root: str | Path | None = None) -> Solution | None:
    """The solution of `kind` for `task_id`, or None when none was written (absence is not an error here)."""
    from kernelbench.tasks.family import SOLUTION_KIND_ANSWER, answer_path, family_of_id

    if family_of_id(task_id):  # a family's tasks share its answers (kernelbench.tasks.family)
        answer = SOLUTION_KIND_ANSWER.get(kind)
        return Solution(task_id=task_id, kind=kind, path=answer_path(answer)) if answer else None
    root = Path(root) if root is not None else SOLUTIONS_ROOT
    path = root / kind / f"{task_id}.py"
    return Solution(task_id=task_id, kind=kind, path=str(path)) if path.is_file() else None
