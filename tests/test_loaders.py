"""Task loaders: built-in suite, a KernelBench-format checkout, and the dataset form, all offline."""

from __future__ import annotations

import os

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # before `datasets` is imported anywhere: never download
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import re
from pathlib import Path

import pytest

from kernelbench.tasks.builtin import load_builtin
from kernelbench.tasks.catalog import find_task, load_tasks
from kernelbench.tasks.task_file import inspect_source
from kernelbench.tasks.problem import load_problem
from kernelbench.tasks.task import OriginError, TaskFormatError

RELU = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


batch_size = 8192
dim = 8192
CPU_SIZE = {"batch_size": 4, "dim": 16}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''

LINEAR = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(3, 5)]


def get_init_inputs():
    return [5, 7]
'''

PARTIAL = LINEAR + '\nOP_POLICY = "partial"\n'
SYNTAX_ERROR = "import torch\nclass Model(:\n    pass\n"
NO_INPUTS = "import torch.nn as nn\n\n\nclass Model(nn.Module):\n    pass\n\n\ndef get_init_inputs():\n    return []\n"
WEIGHTS = '''import torch
from transformers import AutoModelForCausalLM, AutoConfig


class Model(torch.nn.Module):
    def __init__(self, model_name, config):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(model_name, config=config)

    def forward(self, x):
        return self.model(x).logits


model_name = "gpt2"
config = AutoConfig.from_pretrained(model_name)


def get_inputs():
    return [torch.randint(0, 100, (1, 8))]


def get_init_inputs():
    return [model_name, config]
'''

# (level, file name, source): a few problems per level, a level-4 one and two malformed ones.
PROBLEMS = [
    (1, "1_ReLU.py", RELU),
    (1, "2_Broken_syntax.py", SYNTAX_ERROR),
    (1, "10_Linear.py", LINEAR),
    (2, "1_Linear_ReLU.py", LINEAR),
    (2, "2_No_inputs.py", NO_INPUTS),
    (3, "1_Small_MLP.py", PARTIAL),
    (4, "1_gpt2_bs1_seq8.py", WEIGHTS),
]


def write_kernelbench(root: Path, problems=PROBLEMS) -> Path:
    """A KernelBench-format checkout: ROOT/KernelBench/level{N}/<id>_<Name>.py plus files that are not problems."""
    for level, name, source in problems:
        folder = root / "KernelBench" / f"level{level}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(source)
    (root / "KernelBench" / "level1" / "README.md").write_text("not a problem")
    (root / "KernelBench" / "level1" / "__init__.py").write_text("")
    (root / "README.md").write_text("checkout root")
    return root


def dataset_columns(problems=PROBLEMS) -> dict[str, list]:
    """Columns as the hub dataset has them: name is the file name, problem_id its number."""
    return {
        "code": [src for _, _, src in problems],
        "level": [lvl for lvl, _, _ in problems],
        "name": [name for _, name, _ in problems],
        "problem_id": [int(name.split("_")[0]) for _, name, _ in problems],
    }


@pytest.fixture
def kb_root(tmp_path) -> Path:
    return write_kernelbench(tmp_path / "kb")


def test_kernelbench_checkout_lists_every_problem_with_levels(kb_root):
    tasks = load_tasks(f"kernelbench:{kb_root}")
    assert [t.id for t in tasks] == [
        "kb:L1/1_ReLU", "kb:L1/2_Broken_syntax", "kb:L1/10_Linear", "kb:L2/1_Linear_ReLU",
        "kb:L2/2_No_inputs", "kb:L3/1_Small_MLP", "kb:L4/1_gpt2_bs1_seq8",
    ]
    assert [t.level for t in tasks] == [1, 1, 1, 2, 2, 3, 4]
    assert [t.needs_weights for t in tasks] == [False] * 6 + [True]
    assert all(t.origin == f"kernelbench:{kb_root}" and Path(t.path).is_file() for t in tasks)
    assert tasks[0].source == RELU
    assert {t.name: t.op_policy for t in tasks}["1_Small_MLP"] == "partial"
    assert tasks[0].op_policy == "strict"


def test_kernelbench_path_may_be_the_problems_folder(kb_root):
    from_root = [t.id for t in load_tasks(f"kernelbench:{kb_root}")]
    from_inner = [t.id for t in load_tasks(f"kernelbench:{kb_root / 'KernelBench'}")]
    assert from_root == from_inner and len(from_root) == len(PROBLEMS)


def test_bad_kernelbench_paths_name_the_path(tmp_path):
    with pytest.raises(OriginError, match="no such directory"):
        load_tasks(f"kernelbench:{tmp_path / 'missing'}")
    with pytest.raises(OriginError, match="no level1..level4"):
        load_tasks(f"kernelbench:{tmp_path}")
    with pytest.raises(OriginError, match="needs a path"):
        load_tasks("kernelbench:")
    with pytest.raises(OriginError, match="unknown task source"):
        load_tasks("github:foo")


def test_listing_never_executes_a_problem(tmp_path):
    marker = tmp_path / "executed"
    trap = f"open({str(marker)!r}, 'w').write('ran')\n" + LINEAR
    root = write_kernelbench(tmp_path / "kb", [(1, "1_Trap.py", trap)])
    (task,) = load_tasks(f"kernelbench:{root}")
    assert inspect_source(task.source).issue == ""
    assert not marker.exists()
    load_problem(task)  # executing is load_problem's job, and it does run the file
    assert marker.exists()


def test_malformed_files_are_listed_with_an_issue_and_fail_to_load_naming_the_file(kb_root):
    tasks = {t.name: t for t in load_tasks(f"kernelbench:{kb_root}")}
    assert inspect_source(tasks["2_Broken_syntax"].source).issue.startswith("syntax error on line 2")
    assert inspect_source(tasks["2_No_inputs"].source).issue == "missing get_inputs"
    assert inspect_source(tasks["1_ReLU"].source).issue == ""
    with pytest.raises(TaskFormatError, match=r"2_Broken_syntax\.py: syntax error"):
        load_problem(tasks["2_Broken_syntax"])
    with pytest.raises(TaskFormatError, match=r"2_No_inputs\.py: missing get_inputs"):
        load_problem(tasks["2_No_inputs"])
    with pytest.raises(TaskFormatError, match=r"1_gpt2_bs1_seq8\.py: level-4 problem needs"):
        load_problem(tasks["1_gpt2_bs1_seq8"])


def test_inspect_source_checks_op_policy():
    assert inspect_source(PARTIAL).op_policy == "partial"
    assert inspect_source(LINEAR).op_policy == ""
    assert "OP_POLICY must be one of" in inspect_source(LINEAR + 'OP_POLICY = "loose"\n').issue
    assert "string constant" in inspect_source(LINEAR + 'OP_POLICY = "par" + "tial"\n').issue


def test_builtin_loader_reads_op_policy_with_ast(tmp_path):
    for level, name, source in [(1, "01_relu.py", RELU), (1, "02_broken.py", SYNTAX_ERROR),
                                (2, "01_linear.py", LINEAR), (3, "01_mlp.py", PARTIAL)]:
        (tmp_path / f"level{level}").mkdir(exist_ok=True)
        (tmp_path / f"level{level}" / name).write_text(source)
    (tmp_path / "level1" / "__init__.py").write_text("")
    (tmp_path / "level1" / "notes.txt").write_text("")
    tasks = load_builtin(tmp_path)
    assert [(t.id, t.level, t.op_policy) for t in tasks] == [
        ("L1/01_relu", 1, "strict"), ("L1/02_broken", 1, "strict"),
        ("L2/01_linear", 2, "strict"), ("L3/01_mlp", 3, "partial"),
    ]
    assert all(t.origin == "builtin" and not t.needs_weights for t in tasks)


def test_builtin_suite_is_well_formed():
    tasks = load_builtin()
    if not tasks:
        pytest.skip("the built-in suite is empty")
    ids = [t.id for t in tasks]
    assert len(ids) == len(set(ids))
    for t in tasks:
        assert re.fullmatch(r"L[123]/\d\d_[a-z0-9_]+", t.id), t.id
        assert inspect_source(t.source).issue == "", f"{t.path}: {inspect_source(t.source).issue}"
        assert t.op_policy == ("partial" if t.level == 3 else "strict"), t.id
    for level in {t.level for t in tasks}:  # NN unique within a level
        numbers = [t.name[:2] for t in tasks if t.level == level]
        assert len(numbers) == len(set(numbers)), level


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "folder"])
def test_dataset_files_load_offline_with_checkout_ids(tmp_path, kb_root, fmt):
    datasets = pytest.importorskip("datasets")
    data = datasets.Dataset.from_dict(dataset_columns())
    if fmt == "parquet":
        target = tmp_path / "kernelbench.parquet"
        data.to_parquet(str(target))
    elif fmt == "jsonl":
        target = tmp_path / "kernelbench.jsonl"
        data.to_json(str(target), lines=True)
    else:  # a hub-style snapshot: one file per level split
        target = tmp_path / "snapshot"
        (target / "data").mkdir(parents=True)
        for level in (1, 2, 3, 4):
            part = data.filter(lambda row, lvl=level: row["level"] == lvl)
            part.to_parquet(str(target / "data" / f"level_{level}-00000-of-00001.parquet"))
    from kernelbench.tasks.hf_dataset import load_hf_dataset

    tasks = load_hf_dataset(str(target), cache_dir=str(tmp_path / "cache"))
    checkout = load_tasks(f"kernelbench:{kb_root}")
    assert [t.id.removeprefix("hf:") for t in tasks] == [t.id.removeprefix("kb:") for t in checkout]
    assert [t.source for t in tasks] == [t.source for t in checkout]
    assert [t.needs_weights for t in tasks] == [t.needs_weights for t in checkout]
    assert all(t.path == "" and t.origin == f"hf:{target}" for t in tasks)
    with pytest.raises(TaskFormatError, match=r"<hf:L2/2_No_inputs>: missing get_inputs"):
        load_problem(next(t for t in tasks if t.name == "2_No_inputs"))


def test_dataset_names_without_prefix_or_suffix_get_the_same_ids(tmp_path):
    datasets = pytest.importorskip("datasets")
    from kernelbench.tasks.hf_dataset import load_hf_dataset, problem_name

    assert problem_name(19, "19_ReLU.py") == problem_name(19, "ReLU") == problem_name(19, "19_ReLU") == "19_ReLU"
    cols = {"code": [RELU], "level": [1], "name": ["ReLU"], "problem_id": [19]}
    datasets.Dataset.from_dict(cols).to_parquet(str(tmp_path / "d.parquet"))
    (task,) = load_hf_dataset(str(tmp_path / "d.parquet"), cache_dir=str(tmp_path / "cache"))
    assert task.id == "hf:L1/19_ReLU" and task.name == "19_ReLU"


def test_dataset_errors_are_one_clear_line(tmp_path):
    datasets = pytest.importorskip("datasets")
    cols = {"code": [RELU], "name": ["1_ReLU.py"]}
    datasets.Dataset.from_dict(cols).to_parquet(str(tmp_path / "d.parquet"))
    from kernelbench.tasks.hf_dataset import load_hf_dataset

    with pytest.raises(OriginError, match="lacks column.*level, problem_id"):
        load_hf_dataset(str(tmp_path / "d.parquet"), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(OriginError, match="no such file"):
        load_tasks(f"hf:{tmp_path / 'missing.parquet'}")
    with pytest.raises(OriginError, match="needs a dataset name"):
        load_tasks("hf:")


def test_hub_name_offline_without_cache_fails_clearly(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    from kernelbench.tasks.hf_dataset import load_hf_dataset

    with pytest.raises(OriginError, match="hf:nobody/no-such-dataset: cannot load the dataset"):
        load_hf_dataset("nobody/no-such-dataset", cache_dir=str(tmp_path / "empty-cache"))


def test_find_task_by_id_with_or_without_prefix(kb_root):
    origin = f"kernelbench:{kb_root}"
    assert find_task("kb:L2/1_Linear_ReLU", origin).path.endswith("level2/1_Linear_ReLU.py")
    assert find_task("L2/1_Linear_ReLU", origin).id == "kb:L2/1_Linear_ReLU"
    with pytest.raises(OriginError, match="no task 'kb:L2/99_None'"):
        find_task("kb:L2/99_None", origin)
    with pytest.raises(OriginError, match="--source kernelbench:PATH"):
        find_task("kb:L2/1_Linear_ReLU")


def test_read_task_file_is_the_one_reader_of_a_named_file(tmp_path):
    from kernelbench.tasks.task_file import TaskFileError, read_task_file

    good = tmp_path / "relu.py"
    good.write_text(RELU + 'OP_POLICY = "partial"\n')
    task = read_task_file(str(good))
    assert (task.id, task.level, task.op_policy, task.source) == ("file:relu", 1, "partial", good.read_text())
    user = read_task_file(str(good), origin="user", level=0, op_policy="strict")
    assert (user.id, user.level, user.op_policy, user.origin) == ("user/relu", 0, "strict", f"user:{good}")
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    with pytest.raises(TaskFileError, match=r"broken\.py: syntax error on line 1"):
        read_task_file(str(broken))
    partial = tmp_path / "partial.py"
    partial.write_text(RELU.replace("def get_inputs", "def other_inputs"))
    with pytest.raises(TaskFileError, match=r"partial\.py: missing get_inputs"):
        read_task_file(str(partial))
    with pytest.raises(TaskFileError, match="cannot read task file"):
        read_task_file(str(tmp_path / "absent.py"))
    with pytest.raises(TaskFileError, match="op policy must be strict or partial"):
        read_task_file(str(good), op_policy="loose")
