"""`kernel-agent tasks list|show`: what tasks an origin holds, their splits, and one task's source and inputs.

    kernel-agent tasks list [--source builtin|kernelbench:PATH|hf:NAME] [--split train|heldout|extra|all]
                            [--level N] [--json] [--size cpu]
    kernel-agent tasks show ID|FILE [--size cpu|gpu] [--source ...]

`list` shows how many input configurations each task declares (`INPUT_CONFIGS`; correctness is checked on
each, timing on the first); `show` prints every configuration's input shapes.

`list` never executes a problem (files are read with `ast`; a malformed one is listed with its issue).
`show` executes the one problem to report its input shapes; a malformed file exits 2 with the error.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from typing import Any

from rich.console import Console
from rich.table import Table

from cli.main import UsageError
from kernelbench.tasks.catalog import find_task, load_tasks
from kernelbench.tasks.cpu_size_records import cpu_size_of
from kernelbench.tasks.problem import load_problem
from kernelbench.tasks.splits import CHOICES, split_of
from kernelbench.tasks.task import OriginError, Task, TaskFormatError
from kernelbench.tasks.task_file import inspect_source

# Imports inside functions: each command loads what it needs when it runs: `kernel-agent --help`, a mistyped flag
# and `kernel-agent tasks` answer without torch.

SHOW_SEED = 0
"""Seed for the `get_inputs()` draw that `tasks show` reports (shapes do not depend on it)."""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("tasks", help="list tasks and their splits, or show one task")
    actions = parser.add_subparsers(dest="tasks_action", metavar="ACTION", required=True)

    lst = actions.add_parser("list", help="list the tasks of one origin")
    lst.add_argument("--source", default="builtin", help="builtin (default), kernelbench:PATH or hf:NAME")
    lst.add_argument("--split", default="all", choices=CHOICES, help="which split to list (default all)")
    lst.add_argument("--level", type=int, choices=(1, 2, 3, 4), help="only this level")
    lst.add_argument("--json", action="store_true", help="print a JSON array instead of a table")
    lst.add_argument("--size", choices=("cpu",), default=None,
                     help="cpu: add whether each task has a CPU size (its own CPU_SIZE or a recorded one) and why not")

    show = actions.add_parser("show", help="print one task's source and input shapes")
    show.add_argument("id", help="task id, e.g. L1/03_gelu, kb:L1/19_ReLU, hf:L2/12_Gemm_Multiply_LeakyReLU, "
                                 "or a problem file's path (as `eval --task` takes)")
    show.add_argument("--size", default="cpu", choices=("cpu", "gpu"), help="input size to report (default cpu)")
    show.add_argument("--source", default=None, help="origin to look the id up in (default: from the id's prefix)")


def task_record(task: Task) -> dict[str, Any]:
    """The JSON object `tasks list --json` prints for one task."""
    return {
        "id": task.id, "level": task.level, "name": task.name, "split": split_of(task),
        "origin": task.origin, "op_policy": task.op_policy, "needs_weights": task.needs_weights,
        "path": task.path, "issue": inspect_source(task.source).issue,
        "input_configs": inspect_source(task.source).input_configs,
    }


def _list(args: argparse.Namespace) -> int:
    try:
        tasks = load_tasks(args.source)
    except OriginError as e:
        hint = " (not in the local Hugging Face cache; download it first, e.g. `huggingface-cli download " \
               "--repo-type dataset NAME`)" if "Offline" in str(e) else ""
        raise UsageError(f"{e}{hint}") from None
    records = [task_record(t) for t in tasks]
    if args.size == "cpu":
        for r, t in zip(records, tasks):
            r["cpu_size"] = cpu_size_of(t)
    records = [r for r in records if (args.split == "all" or r["split"] == args.split)
               and (args.level is None or r["level"] == args.level)]
    if args.json:
        print(json.dumps(records, indent=1))
        return 0

    table = Table(title=f"{args.source}: {len(records)} tasks (split {args.split})")
    if args.size == "cpu":  # the sizes need the width: id and size only
        table.add_column("id", no_wrap=True)
        table.add_column("cpu size (reference, one thread)", overflow="fold", min_width=20)
        for r in records:
            table.add_row(r["id"], r["cpu_size"]["text"])
    else:
        for column in ("id", "level", "split", "policy", "weights", "configs"):
            table.add_column(column, no_wrap=True)
        table.add_column("issue", overflow="fold", min_width=5)
        for r in records:
            table.add_row(r["id"], str(r["level"]), r["split"], r["op_policy"],
                          "needs" if r["needs_weights"] else "", str(r["input_configs"] or "?"), r["issue"])
    Console().print(table)
    if args.size == "cpu":
        have = sum(r["cpu_size"]["has_size"] for r in records)
        in_range = sum(r["cpu_size"]["in_range"] is True for r in records)
        missing = sum(r["cpu_size"]["text"].startswith(("no: not derived", "no: the problem changed")) for r in records)
        print(f"{have}/{len(records)} tasks have a CPU size ({in_range} recorded in 1-20 ms on one thread)"
              + (f"; {missing} not derived or stale: python3 scripts/kernelbench_cpu_sizes.py "
                 f"{args.source.split(':', 1)[1]}" if missing and args.source.startswith("kernelbench:") else ""))
    return 0


def describe(value: Any) -> str:
    """One line for an input: dtype and shape for a tensor, the value for anything else."""
    import torch

    if isinstance(value, torch.Tensor):
        return f"tensor {str(value.dtype).removeprefix('torch.')} {tuple(value.shape)}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(describe(v) for v in value) + "]"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def draw_inputs(problem: Any) -> tuple[list[Any], list[Any]]:
    """(inputs, init inputs) under a fixed seed. Tensors are first built on the meta device (shapes
    without memory: a gpu-size input can be gigabytes); a problem that reads tensor values while
    building its inputs falls back to a real draw."""
    import torch

    torch.manual_seed(SHOW_SEED)
    init_inputs = list(problem.get_init_inputs())
    try:
        with torch.device("meta"):
            return list(problem.get_inputs()), init_inputs
    except Exception:
        torch.manual_seed(SHOW_SEED)
        return list(problem.get_inputs()), init_inputs


def _show(args: argparse.Namespace) -> int:
    if os.path.isfile(args.id) or args.id.endswith(".py") or args.id.startswith(("/", "./", "../", "~")):
        from cli.eval_cmd import resolve_task  # a problem file, read as `eval --task FILE` reads it

        task = resolve_task(args.id, what="FILE")
    else:
        try:
            task = find_task(args.id, args.source)
        except OriginError as e:
            raise UsageError(str(e)) from None
    split = split_of(task) if not task.origin.startswith("file:") else "none (a file)"  # splits are of origins
    print(f"# {task.id}  level {task.level}  split {split}  op_policy {task.op_policy}"
          f"{'  needs_weights' if task.needs_weights else ''}")
    print(f"# origin {task.origin}" + (f"  path {task.path}" if task.path else ""))
    print(task.source.rstrip("\n"))
    print()
    try:
        problem = load_problem(task, size=args.size)
        inputs, init_inputs = draw_inputs(problem)
    except TaskFormatError as e:
        raise UsageError(str(e)) from None
    except Exception as e:  # get_inputs itself failing is a malformed problem too
        raise UsageError(f"{task.path or task.id}: drawing inputs failed: {type(e).__name__}: {e}") from None
    print(f"# inputs at size {args.size} (seed {SHOW_SEED}):")
    for i, value in enumerate(inputs):
        print(f"#   [{i}] {describe(value)}")
    print(f"# init inputs: {describe(init_inputs)}")
    _show_configs(problem, args.size)
    return 0


def _show_configs(problem: Any, size: str) -> None:
    """The other input configurations (correctness only; the inputs above are the timed one's)."""
    configs = getattr(problem, "configs", ())
    if len(configs) < 2:
        return
    print(f"# {len(configs)} input configurations: correctness on each, timing on the first (above)")
    for config in configs[1:]:
        try:
            inputs, _ = draw_inputs(replace(problem, get_inputs=config.get_inputs))
        except Exception as e:
            raise UsageError(f"{problem.task.path or problem.task.id}: drawing configuration {config.index + 1}'s "
                             f"inputs failed: {type(e).__name__}: {e}") from None
        print(f"#   configuration {config.index + 1} ({config.describe()}): "
              + ", ".join(describe(v) for v in inputs))


def offline_hub(source: str | None) -> None:
    """`hf:NAME` reads the local Hugging Face cache only: a dataset that is not there fails at once with the
    cache's word instead of retrying the network for half a minute (the harness never downloads data)."""
    if source and source.startswith("hf:"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def run(args: argparse.Namespace) -> int:
    offline_hub(getattr(args, "source", None) or getattr(args, "id", None))
    if args.tasks_action == "list":
        return _list(args)
    return _show(args)
