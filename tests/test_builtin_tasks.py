"""Every built-in task file (all levels) loads, runs at its CPU size, and follows the task format.

The run test executes the reference forward on one CPU thread at the `cpu` size: outputs must be finite,
identical across two builds from the same seed, and quick. The structural tests read the file with `ast`
only. The gpu-size check builds inputs and parameters on the meta device, so no memory is allocated.
Measured timings at either size come from `scripts/task_sizes.py`.
"""

from __future__ import annotations

import ast
import re
import time
from pathlib import Path

import pytest
import torch

from kernelbench.tasks.problem import load_problem
from kernelbench.tasks.task import Task

TASKS_DIR = Path(__file__).resolve().parent.parent / "kernelbench" / "tasks" / "builtin_tasks"
TASK_FILES = sorted(TASKS_DIR.glob("level*/*.py"))
STEM = re.compile(r"^\d\d_[a-z0-9]+(_[a-z0-9]+)*$")
POSITIVE_NOTE = re.compile(r"#\s*positive inputs:\s*\S")
CPU_FORWARD_LIMIT_S = 0.25  # loose bound against accidental huge sizes; the target is 1-20 ms
GPU_SET_LIMIT_BYTES = 256 * 2**20
"""A gpu-size input set, and the output it gives, each at most this (docs/tasks.md, "Sizes"): one evaluation holds
about a dozen input sets in the reference child, a file and the run child, and draws each on the CPU."""
GPU_PARAMETER_LIMIT_BYTES = 2 * 2**30


def _level(path: Path) -> int:
    return int(path.parent.name.removeprefix("level"))


def _op_policy(tree: ast.Module) -> str:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "OP_POLICY" for t in node.targets):
            return ast.literal_eval(node.value)
    return "strict"


def _task(path: Path) -> Task:
    text = path.read_text()
    level = _level(path)
    return Task(id=f"L{level}/{path.stem}", level=level, name=path.stem, origin="builtin", source=text,
                path=str(path), op_policy=_op_policy(ast.parse(text)))


def _ids(paths) -> list[str]:
    return [f"L{_level(p)}/{p.stem}" for p in paths]


def _module_constants(tree: ast.Module) -> dict[str, object]:
    """Module-level `name = <literal>` assignments (the size constants)."""
    constants = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                constants[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return constants


def _build_and_run(task: Task):
    """Seeded build at the cpu size and two forwards on the same inputs, no reseeding in between.

    Returns (first output, second output, fastest forward in seconds). Reseeding only before the build
    means a forward that draws random numbers gives two different outputs.
    """
    problem = load_problem(task, "cpu")
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs())
    inputs = problem.get_inputs()
    outs, times_s = [], []
    with torch.no_grad():
        for _ in range(2):
            start = time.perf_counter()
            outs.append(model(*inputs))
            times_s.append(time.perf_counter() - start)
    return outs[0], outs[1], min(times_s)


def _as_tensors(out) -> list[torch.Tensor]:
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    assert items, "forward returned an empty sequence"
    for item in items:
        assert isinstance(item, torch.Tensor), f"forward returned {type(item).__name__}, not a tensor"
    return items


def test_suite_has_enough_level1_tasks():
    assert len([p for p in TASK_FILES if _level(p) == 1]) >= 30


def test_task_numbers_unique_within_level():
    seen: dict[tuple[int, str], str] = {}
    for path in TASK_FILES:
        key = (_level(path), path.stem[:2])
        assert key not in seen, f"{path.stem} and {seen[key]} share number {key[1]} in level {key[0]}"
        seen[key] = path.stem


@pytest.mark.parametrize("path", TASK_FILES, ids=_ids(TASK_FILES))
def test_task_structure(path: Path):
    text = path.read_text()
    tree = ast.parse(text)
    assert STEM.match(path.stem), f"{path.name}: name must be NN_snake_name.py"
    assert (ast.get_docstring(tree) or "").strip(), "module docstring missing"
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    assert "Model" in classes and {"get_inputs", "get_init_inputs"} <= functions.keys()
    assert _op_policy(tree) in ("strict", "partial")

    constants = _module_constants(tree)
    cpu_size = constants.get("CPU_SIZE")
    assert isinstance(cpu_size, dict) and cpu_size, "CPU_SIZE must be a non-empty dict literal"
    for key, value in cpu_size.items():
        assert key in constants and key != "CPU_SIZE", f"CPU_SIZE key {key!r} is not a module constant"
        assert type(value) is type(constants[key]), f"CPU_SIZE[{key!r}] has a different type from the constant"

    configs = constants.get("INPUT_CONFIGS", [])
    if _level(path) <= 2:  # a second shape to check correctness at (tests/test_input_configs.py runs them)
        assert isinstance(configs, list) and configs, "levels 1-2 declare INPUT_CONFIGS, a list of dict literals"
    for entry in configs:
        assert isinstance(entry, dict) and entry and set(entry) <= set(constants), f"INPUT_CONFIGS entry {entry!r}"

    body = ast.get_source_segment(text, functions["get_inputs"]) or ""
    assert "randn" in body or POSITIVE_NOTE.search(text), (
        "get_inputs must draw signed values (torch.randn) or say why not with '# positive inputs: <reason>'")


@pytest.mark.parametrize("path", TASK_FILES, ids=_ids(TASK_FILES))
def test_task_runs_at_cpu_size(path: Path):
    task = _task(path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        first, repeat, first_s = _build_and_run(task)
        second, _, second_s = _build_and_run(task)
    finally:
        torch.set_num_threads(threads)
    a, b, c = _as_tensors(first), _as_tensors(second), _as_tensors(repeat)
    assert len(a) == len(b) == len(c)
    for x, y, z in zip(a, b, c):
        assert torch.isfinite(x).all(), "output has NaN or Inf"
        assert x.shape == y.shape and x.dtype == y.dtype and torch.equal(x, y), "output differs between seeded builds"
        assert torch.equal(x, z), "forward gave a different output on the same inputs (random numbers in forward?)"
    assert min(first_s, second_s) < CPU_FORWARD_LIMIT_S, f"cpu-size forward took {min(first_s, second_s):.3f} s"


@pytest.mark.parametrize("path", TASK_FILES, ids=_ids(TASK_FILES))
def test_gpu_size_fits_an_evaluation(path: Path):
    """At the gpu size one input set and its output each stay under 256 MiB, parameters under 2 GiB (meta
    tensors: nothing is allocated). Why: a 2 GiB ReLU input made every evaluation on an H200 outlast 190 s,
    drawing a dozen sets on one CPU thread and passing them through a file (docs/gpu-runs.md, 2026-12-04)."""
    problem = load_problem(_task(path), "gpu")
    with torch.device("meta"):
        model = problem.Model(*problem.get_init_inputs())
        inputs = problem.get_inputs()
        out = model(*inputs)
    outputs = list(out) if isinstance(out, (tuple, list)) else [out]

    def size(tensors: list) -> int:
        return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))

    set_bytes, out_bytes = size(inputs), size(outputs)
    params = size(list(model.parameters()) + list(model.buffers()))
    assert 0 < set_bytes <= GPU_SET_LIMIT_BYTES, f"a gpu-size input set takes {set_bytes / 2**20:.0f} MiB"
    assert 0 < out_bytes <= GPU_SET_LIMIT_BYTES, f"a gpu-size output takes {out_bytes / 2**20:.0f} MiB"
    assert params <= GPU_PARAMETER_LIMIT_BYTES, f"gpu-size parameters take {params / 2**30:.2f} GiB"
