"""Input configurations (`INPUT_CONFIGS`, kernelbench/tasks/input_configs.py): loading, malformed declarations, the
seeds each configuration draws from, listing, and the built-in suite's configurations. All in-process, no
harness run (the harness's use of them is judged in tests/test_adversarial.py: `hardcoded_shape.py`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from cli.main import main as cli_main
from kernelbench.tasks.builtin import load_builtin
from kernelbench.tasks.catalog import load_tasks
from kernelbench.tasks.task_file import inspect_source
from kernelbench.tasks.input_configs import config_seeds, labels, make_config_sets
from kernelbench.tasks.inputs import Seeds, make_input_sets
from kernelbench.tasks.problem import load_problem
from kernelbench.tasks.task import Task, TaskFormatError

CONV = '''import torch
import torch.nn as nn

CALLS = []


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)

    def forward(self, x):
        CALLS.append(height)  # a forward that reads a size constant sees configuration 1's value
        return self.conv(x)


batch_size = 16
in_channels = 32
out_channels = 64
height = 256
width = 256
CPU_SIZE = {"batch_size": 2, "in_channels": 4, "out_channels": 8, "height": 32, "width": 32}
INPUT_CONFIGS = [{"batch_size": 3, "height": 7, "width": 5}, {"width": 9}]


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
'''


def _task(source: str, name: str = "conv") -> Task:
    return Task(id=f"test/{name}", level=1, name=name, origin="test", source=source, path=f"/tasks/{name}.py")


def _shapes(problem) -> list[tuple[int, ...]]:
    return [tuple(c.get_inputs()[0].shape) for c in problem.configs]


def test_configurations_override_the_chosen_size():
    cpu = load_problem(_task(CONV), "cpu")
    assert [c.index for c in cpu.configs] == [0, 1, 2]
    # configuration 1 is the file's sized constants; a dict overrides only the names it gives
    assert _shapes(cpu) == [(2, 4, 32, 32), (3, 4, 7, 5), (2, 4, 32, 9)]
    assert cpu.configs[1].describe() == "batch_size=3, height=7, width=5" and cpu.configs[0].describe() == ""
    with torch.device("meta"):
        assert _shapes(load_problem(_task(CONV), "gpu")) == [(16, 32, 256, 256), (3, 32, 7, 5), (16, 32, 256, 9)]
    # drawing a configuration's inputs leaves the module's constants at configuration 1's values
    assert cpu.module.height == 32 and cpu.module.width == 32 and cpu.get_inputs()[0].shape == (2, 4, 32, 32)
    model = cpu.Model(*cpu.get_init_inputs())
    model(cpu.configs[1].get_inputs()[0])
    assert cpu.module.CALLS == [32]


def test_a_file_without_configurations_has_one():
    relu = next(t for t in load_builtin() if t.id == "L1/01_relu")
    single = Task(**{**relu.__dict__, "source": relu.source.replace("INPUT_CONFIGS =", "NOT_CONFIGS =")})
    problem = load_problem(single, "cpu")
    assert len(problem.configs) == 1 and problem.configs[0].get_inputs()[0].shape == (1024, 4096)
    assert inspect_source(single.source).input_configs == 1


@pytest.mark.parametrize("declaration, message", [
    ('{"batch_size": 3}', r"/tasks/conv\.py: INPUT_CONFIGS must be a list of dicts of module constants .*got dict"),
    ('[{"batch_size": 3}, 7]', r"INPUT_CONFIGS\[1\] \(configuration 3\) must be a non-empty dict"),
    ('[{}]', r"INPUT_CONFIGS\[0\] \(configuration 2\) must be a non-empty dict"),
    ('[{"depth": 3}]', r"INPUT_CONFIGS\[0\] \(configuration 2\): names 'depth', which the module does not define"),
    ('[{"height": 7.5}]', r"height=7\.5 must have the type of the module's height \(int\)"),
    ('[{"get_inputs": 1}]', r"'get_inputs' is not a size constant a configuration may set"),
    ('[{"in_channels": 6}]', r"INPUT_CONFIGS\[0\] \(configuration 2\): changes get_init_inputs\(\) .*in_channels"),
])
def test_malformed_configurations_raise_task_format_errors(declaration, message):
    source = CONV.replace('INPUT_CONFIGS = [{"batch_size": 3, "height": 7, "width": 5}, {"width": 9}]',
                          f"INPUT_CONFIGS = {declaration}")
    assert f"INPUT_CONFIGS = {declaration}" in source
    for size in ("cpu", "gpu"):
        with pytest.raises(TaskFormatError, match=message):
            load_problem(_task(source), size)


def test_listing_counts_configurations_without_executing():
    assert inspect_source(CONV).input_configs == 3 and inspect_source(CONV).issue == ""
    computed = CONV.replace('INPUT_CONFIGS = [{"batch_size": 3, "height": 7, "width": 5}, {"width": 9}]',
                            'INPUT_CONFIGS = [dict(width=w) for w in (9, 11)]')
    assert inspect_source(computed).input_configs == 0  # known once executed
    assert len(load_problem(_task(computed), "cpu").configs) == 3
    for bad in ('INPUT_CONFIGS = {"width": 9}', 'INPUT_CONFIGS = [{"width": 9}, 3]', "INPUT_CONFIGS = [{}]"):
        assert "INPUT_CONFIGS must be a list of non-empty dicts" in inspect_source(CONV + bad + "\n").issue


def test_each_configuration_draws_from_its_own_seeds():
    seeds = Seeds(init_seed=11, input_seeds=(101, 102), extra_seeds=(201,), timing_seeds=(301,))
    assert config_seeds(seeds, 0) is seeds
    one, two = config_seeds(seeds, 1), config_seeds(seeds, 2)
    assert one == config_seeds(seeds, 1), "the run child and the reference must derive the same seeds"
    assert one.init_seed == 11 and not one.timing_seeds  # one model; only configuration 1 is timed
    for derived in (one, two):
        assert not set(derived.input_seeds + derived.extra_seeds) & set(seeds.input_seeds + seeds.extra_seeds)
    assert one.input_seeds != two.input_seeds
    problem = load_problem(_task(CONV), "cpu")
    first = make_input_sets(problem.get_inputs, seeds)
    sets, owners = make_config_sets(problem.configs, seeds)
    assert owners == [1, 1, 1, 2, 2, 2] and [s[0].shape[-1] for s in sets] == [5, 5, 5, 9, 9, 9]
    # the same shape under the original seed would repeat configuration 1's leading values; the derived one does not
    assert not torch.equal(sets[3][0][0, 0, 0, :9], first[0][0][0, 0, 0, :9])
    assert sets[2][0].min() < -1.5 or sets[2][0].max() > 1.5  # an extra distribution applied (normal x3)
    text = labels(problem.configs, first + sets, [0] * len(first) + owners)
    assert text == ["configuration 1 of 3 (the timed one: inputs float32[2, 4, 32, 32])",
                    "configuration 2 of 3 (batch_size=3, height=7, width=5: inputs float32[3, 4, 7, 5])",
                    "configuration 3 of 3 (width=9: inputs float32[2, 4, 32, 9])"]
    assert "101" not in " ".join(text)


def test_builtin_levels_1_and_2_have_two_configurations_at_both_sizes():
    """Each level-1/2 task: at least two configurations at each size, each of another input shape than the timed
    one, and the reference runs on each at the cpu size (finite outputs)."""
    tasks = [t for t in load_builtin() if t.level in (1, 2)]
    assert len(tasks) >= 70
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for task in tasks:
            assert inspect_source(task.source).input_configs >= 2, task.id
            with torch.device("meta"):
                gpu = load_problem(task, "gpu")
                shapes = [[tuple(x.shape) for x in c.get_inputs()] for c in gpu.configs]
            assert len(shapes) >= 2 and all(s != shapes[0] for s in shapes[1:]), task.id
            cpu = load_problem(task, "cpu")
            assert len(cpu.configs) >= 2, task.id
            with torch.device("meta"):
                timed = [tuple(x.shape) for x in cpu.get_inputs()]
            torch.manual_seed(0)
            model = cpu.Model(*cpu.get_init_inputs())
            with torch.no_grad():
                for config in cpu.configs[1:]:
                    inputs = config.get_inputs()
                    assert [tuple(x.shape) for x in inputs] != timed, task.id
                    out = model(*inputs)
                    assert all(torch.isfinite(o).all() for o in (out if isinstance(out, tuple) else (out,))), task.id
    finally:
        torch.set_num_threads(threads)


def test_kernelbench_checkout_tasks_keep_one_configuration(tmp_path):
    from tests.test_loaders import write_kernelbench

    root = write_kernelbench(tmp_path / "kb")
    tasks = [t for t in load_tasks(f"kernelbench:{root}") if t.name in ("1_ReLU", "10_Linear")]
    assert len(tasks) == 2
    for task in tasks:
        assert inspect_source(task.source).input_configs == 1
        assert len(load_problem(task, "cpu").configs) == 1


def test_tasks_list_and_show_mention_the_configurations(capsys):
    assert cli_main(["tasks", "list", "--level", "1", "--json"]) == 0
    records = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert records["L1/01_relu"]["input_configs"] == 2
    assert cli_main(["tasks", "show", "L1/01_relu"]) == 0
    out = capsys.readouterr().out
    assert "# 2 input configurations: correctness on each, timing on the first" in out
    assert "configuration 2 (batch_size=37, dim=1531): tensor float32 (37, 1531)" in out
    assert Path(records["L1/01_relu"]["path"]).name == "01_relu.py"
