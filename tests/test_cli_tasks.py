"""`kernel-agent tasks list|show`: JSON output, filters, shapes at both sizes, and exit 2 on bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from cli.main import main
from test_loaders import PROBLEMS, dataset_columns, write_kernelbench

KEYS = {"id", "level", "name", "split", "origin", "op_policy", "needs_weights", "path", "issue", "input_configs"}


@pytest.fixture
def kb_root(tmp_path):
    return write_kernelbench(tmp_path / "kb")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(list(argv))
    except SystemExit as e:  # argparse errors
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def test_list_json_for_a_checkout(capsys, kb_root):
    rc, out, err = run_cli(capsys, "tasks", "list", "--source", f"kernelbench:{kb_root}", "--json")
    assert rc == 0, err
    records = json.loads(out)
    assert len(records) == len(PROBLEMS)
    assert all(set(r) == KEYS for r in records)
    by_id = {r["id"]: r for r in records}
    assert by_id["kb:L4/1_gpt2_bs1_seq8"]["needs_weights"] is True
    assert by_id["kb:L3/1_Small_MLP"]["op_policy"] == "partial"
    assert by_id["kb:L1/2_Broken_syntax"]["issue"].startswith("syntax error")
    assert by_id["kb:L2/2_No_inputs"]["issue"] == "missing get_inputs"
    assert by_id["kb:L1/1_ReLU"] | {"split": None} == {
        "id": "kb:L1/1_ReLU", "level": 1, "name": "1_ReLU", "split": None, "origin": f"kernelbench:{kb_root}",
        "op_policy": "strict", "needs_weights": False, "path": str(kb_root / "KernelBench/level1/1_ReLU.py"),
        "issue": "", "input_configs": 1}
    assert {r["split"] for r in records} <= {"train", "heldout", "extra"}


def test_list_filters_by_split_and_level(capsys, kb_root):
    source = f"kernelbench:{kb_root}"
    _, out, _ = run_cli(capsys, "tasks", "list", "--source", source, "--json")
    every = json.loads(out)
    for split in ("train", "heldout", "extra"):
        _, out, _ = run_cli(capsys, "tasks", "list", "--source", source, "--split", split, "--json")
        assert json.loads(out) == [r for r in every if r["split"] == split]
    _, out, _ = run_cli(capsys, "tasks", "list", "--source", source, "--level", "2", "--json")
    assert [r["id"] for r in json.loads(out)] == ["kb:L2/1_Linear_ReLU", "kb:L2/2_No_inputs"]
    _, out, _ = run_cli(capsys, "tasks", "list", "--source", source, "--split", "train", "--level", "3", "--json")
    assert json.loads(out) == []  # KernelBench's training pool is levels 1-2


def test_list_table_and_builtin_default(capsys):
    rc, out, _ = run_cli(capsys, "tasks", "list", "--json")
    assert rc == 0
    records = json.loads(out)
    assert all(r["origin"] == "builtin" and r["id"].startswith("L") for r in records)
    rc, out, _ = run_cli(capsys, "tasks", "list")
    assert rc == 0 and f"builtin: {len(records)} tasks" in out
    if records:
        assert records[0]["id"] in out


def test_show_prints_source_and_shapes_at_each_size(capsys, kb_root):
    source = f"kernelbench:{kb_root}"
    rc, out, err = run_cli(capsys, "tasks", "show", "kb:L1/1_ReLU", "--source", source)
    assert rc == 0, err
    assert "return torch.relu(x)" in out
    assert "[0] tensor float32 (4, 16)" in out
    # The gpu size is 8192x8192 (256 MB): shapes come from the meta device, nothing that big is allocated.
    rc, out, err = run_cli(capsys, "tasks", "show", "L1/1_ReLU", "--source", source, "--size", "gpu")
    assert rc == 0, err
    assert "[0] tensor float32 (8192, 8192)" in out
    rc, out, _ = run_cli(capsys, "tasks", "show", "kb:L2/1_Linear_ReLU", "--source", source)
    assert rc == 0 and "(3, 5)" in out and "init inputs: [int 5, int 7]" in out


@pytest.mark.parametrize("task_id, message", [
    ("kb:L1/2_Broken_syntax", r"2_Broken_syntax\.py: syntax error on line 2"),
    ("kb:L2/2_No_inputs", r"2_No_inputs\.py: missing get_inputs"),
    ("kb:L4/1_gpt2_bs1_seq8", r"1_gpt2_bs1_seq8\.py: level-4 problem needs Hugging Face model weights"),
])
def test_show_malformed_exits_2_naming_the_file(capsys, kb_root, task_id, message):
    rc, out, err = run_cli(capsys, "tasks", "show", task_id, "--source", f"kernelbench:{kb_root}")
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("kernel-agent tasks: error: ")
    assert re.search(message, err), err


@pytest.mark.parametrize("argv", [
    ["tasks", "list", "--source", "nowhere"],
    ["tasks", "list", "--source", "kernelbench:/no/such/dir"],
    ["tasks", "list", "--source", "kernelbench:"],
    ["tasks", "list", "--split", "test"],
    ["tasks", "list", "--level", "7"],
    ["tasks", "list", "--level", "one"],
    ["tasks", "show", "L1/99_nothing"],
    ["tasks", "show", "kb:L1/1_ReLU"],
    ["tasks", "show", "L1/01_relu", "--size", "huge"],
    ["tasks"],
])
def test_bad_arguments_exit_2_with_one_line(capsys, argv):
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 2
    assert err.count("\n") == 1 and "error" in err, err


def test_console_script_lists_a_dataset_file_offline(tmp_path, kb_root):
    datasets = pytest.importorskip("datasets")
    data_file = tmp_path / "kernelbench.parquet"
    datasets.Dataset.from_dict(dataset_columns()).to_parquet(str(data_file))
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_DATASETS_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", "cli", "tasks", "list", "--source", f"hf:{data_file}", "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    records = json.loads(proc.stdout)
    assert [r["id"] for r in records][:3] == ["hf:L1/1_ReLU", "hf:L1/2_Broken_syntax", "hf:L1/10_Linear"]
    # The same problems from a checkout land in the same splits.
    checkout = subprocess.run([sys.executable, "-m", "cli", "tasks", "list", "--source", f"kernelbench:{kb_root}",
                               "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert [r["split"] for r in records] == [r["split"] for r in json.loads(checkout.stdout)]
    bad = subprocess.run([sys.executable, "-m", "cli", "tasks", "list", "--level", "0"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
