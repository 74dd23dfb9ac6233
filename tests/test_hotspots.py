"""hotspots -> extract -> harness -> apply on a `transformers` Llama decoder built from a small config with random
weights (nothing downloaded), and every bad input as one line with exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from cli.main import main
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.evaluate import evaluate
from kernelbench.tasks.task_file import read_task_file
from tests.chat_server import ChatServer

pytest.importorskip("transformers")  # an optional extra: the model no one here wrote

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HIDDEN, INTERMEDIATE = 128, 2048
"""MLP-heavy on purpose, so that a LlamaMLP is among the top three on any machine."""

ENTRY_SRC = f'''
import torch
from transformers import LlamaConfig, LlamaForCausalLM


def build():
    config = LlamaConfig(vocab_size=256, hidden_size={HIDDEN}, intermediate_size={INTERMEDIATE}, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, use_cache=False)
    torch.manual_seed(0)
    return LlamaForCausalLM(config), (torch.randint(0, 256, (2, 128)),)


def not_a_pair():
    return 42
'''

MLP_SOLUTION = f'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor silu_mul(torch::Tensor gate, torch::Tensor up) {{
    auto g = gate.contiguous();
    auto u = up.contiguous();
    auto out = torch::empty_like(g);
    const float* a = g.data_ptr<float>();
    const float* b = u.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < g.numel(); ++i) o[i] = a[i] / (1.0f + std::exp(-a[i])) * b[i];
    return out;
}}
"""
ext = load_inline(name="test_llama_mlp_silu_mul", cpp_sources=SOURCE, functions=["silu_mul"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.{{gate}} = nn.Linear({HIDDEN}, {INTERMEDIATE}, bias=False)
        self.up_proj = nn.Linear({HIDDEN}, {INTERMEDIATE}, bias=False)
        self.down_proj = nn.Linear({INTERMEDIATE}, {HIDDEN}, bias=False)

    def forward(self, x):
        return self.down_proj(ext.silu_mul(self.{{gate}}(x), self.up_proj(x)))
'''


def solution(gate_name: str = "gate_proj") -> str:
    return MLP_SOLUTION.replace("{gate}", gate_name)


@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    """The entry script, the `hotspots --extract 3 --json` record, and the folder of task files."""
    root = tmp_path_factory.mktemp("hotspots")
    (root / "tiny_llama.py").write_text(ENTRY_SRC)
    entry = f"{root / 'tiny_llama.py'}:build"
    proc = subprocess.run([sys.executable, "-m", "cli", "hotspots", entry, "--device", "cpu", "--extract", "3",
                           "--out", str(root / "tasks"), "--json"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return entry, json.loads(proc.stdout), root


def mlp_task(record) -> str:
    files = [w["file"] for w in record["extraction"]["written"] if w["path"].endswith(".mlp")]
    assert files, record["extraction"]
    return files[0]


def test_hotspots_table_names_submodules_with_share_calls_and_shapes(extracted, capsys):
    entry, record, _ = extracted
    rows = {r["path"]: r for r in record["modules"]}
    assert record["forward_ms"] > 0 and "" not in rows
    mlp = rows["model.layers.0.mlp"]
    assert mlp["kind"] == "LlamaMLP" and mlp["calls"] == 1 and mlp["inputs"] == f"f32[2, 128, {HIDDEN}]"
    assert 0 < mlp["share"] < rows["model.layers.0"]["share"] <= rows["model"]["share"] <= 1
    assert main(["hotspots", entry, "--device", "cpu", "--repeats", "2", "--top", "5"]) == 0
    out = capsys.readouterr().out
    assert "model.layers.0" in out and "LlamaDecoderLayer" in out and "%" in out


def test_top_three_are_written_and_the_rest_say_why(extracted):
    _, record, root = extracted
    written, skipped = record["extraction"]["written"], record["extraction"]["skipped"]
    assert len(written) == 3 and all(os.path.isfile(w["file"]) for w in written)
    reasons = {s["path"]: s["reason"] for s in skipped}
    assert "BaseModelOutputWithPast" in reasons["model"]  # the whole decoder returns a model output, not tensors
    kinds = {w["path"].split(".")[-1] for w in written}
    assert "mlp" in kinds


def test_each_task_file_shows_and_its_reference_runs_in_the_harness(extracted, capsys):
    from kernelbench.harness import reference
    from kernelbench.harness.isolation import sandbox
    from kernelbench.tasks.inputs import draw_seeds
    from kernelbench.harness.build.build_tree import remove_tree

    _, record, _ = extracted
    config = replace(EvalConfig(device="cpu", size="cpu"), timing_trials=5, warmup_trials=1)
    for w in record["extraction"]["written"]:
        assert main(["tasks", "show", w["file"]]) == 0
        assert "# inputs at size cpu" in capsys.readouterr().out
        task = read_task_file(w["file"])
        with sandbox.SlotLease() as slot:
            scratch = sandbox.make_scratch(slot.uid, prefix="ka-test-ref-")
            try:
                ref = reference.run_reference(task, config, draw_seeds(2, 1, 1), slot, scratch)
            finally:
                remove_tree(scratch)
        assert ref.outputs and ref.timing.median_ms > 0
        assert ref.inputs.state_dict is not None and all(k in ref.inputs.state_dict for k in
                                                           _state_names(w["file"]))


def _state_names(path: str) -> list[str]:
    from kernelbench.tasks.problem import exec_source

    with open(path) as f:
        return list(exec_source(f.read(), path, "t").Model().state_dict())


def test_cpp_solution_is_correct_and_applies_back_with_its_speedup(extracted, build_cache_dir, tmp_path, capsys):
    entry, record, _ = extracted
    task_file = mlp_task(record)
    config = EvalConfig(device="cpu", size="cpu", build_cache_dir=build_cache_dir)
    result = evaluate(read_task_file(task_file), solution(), config)
    assert result.status == "correct", result.feedback[-2000:]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "best.py").write_text(solution())
    (run_dir / "config.json").write_text(json.dumps({"file": task_file}))
    capsys.readouterr()
    assert main(["apply", str(run_dir), "--into", entry, "--device", "cpu", "--repeats", "3", "--json"]) == 0
    outcome = json.loads(capsys.readouterr().out)
    assert outcome["path"].endswith(".mlp") and outcome["max_abs_error"] < 1e-3
    assert outcome["speedup"] == pytest.approx(outcome["original_ms"] / outcome["swapped_ms"])
    # In code: the model keeps the kernel, with the trained weights, and its outputs are unchanged.
    from agent.entry import load_entry
    from agent.swap import swap_in

    e = load_entry(entry)
    import torch

    with torch.no_grad():
        before = e.forward().logits
        swap_in(e.model, outcome["path"], str(run_dir), e.args, e.kwargs, repeats=1)
        after = e.forward().logits
    assert type(e.model.get_submodule(outcome["path"])).__name__ == "SwappedModelNew"
    torch.testing.assert_close(after, before, atol=1e-4, rtol=1e-4)


def test_candidate_with_other_weight_names_is_rejected(extracted, build_cache_dir):
    _, record, _ = extracted
    config = EvalConfig(device="cpu", size="cpu", build_cache_dir=build_cache_dir)
    result = evaluate(read_task_file(mlp_task(record)), solution("w_gate"), config)
    assert result.status == "rejected" and "weights:state_dict" in result.flags, result.feedback[-1500:]
    assert "missing gate_proj.weight" in result.feedback


def _one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_bad_inputs_are_one_line_and_exit_2(extracted, tmp_path, capsys):
    entry, record, root = extracted
    assert "importing no_such_pkg.mod failed" in _one_line_error(capsys, ["hotspots", "no_such_pkg.mod:build"])
    assert "must return (model, inputs)" in _one_line_error(capsys, ["hotspots", entry.replace(":build", ":not_a_pair")])
    assert "defines no function" in _one_line_error(capsys, ["hotspots", entry.replace(":build", ":nothing")])
    empty = tmp_path / "empty_run"
    empty.mkdir()
    (empty / "config.json").write_text(json.dumps({"file": mlp_task(record)}))
    assert "no best.py" in _one_line_error(capsys, ["apply", str(empty), "--into", entry])
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"file": mlp_task(record)}))
    (run_dir / "best.py").write_text(solution())
    assert "no such submodule" in _one_line_error(capsys, ["apply", str(run_dir), "--into", entry, "--at", "layers.9.mlp"])
    assert "state_dict does not match" in _one_line_error(
        capsys, ["apply", str(run_dir), "--into", entry, "--at", "model.layers.0.self_attn"])
    (run_dir / "best.py").write_text(solution("w_gate"))
    assert "missing gate_proj.weight" in _one_line_error(capsys, ["apply", str(run_dir), "--into", entry])


@pytest.mark.slow
def test_optimize_on_an_extracted_task_writes_best(extracted, build_cache_dir, tmp_path):
    _, record, _ = extracted
    answer = f"<summary>SiLU and product fused in C++</summary>\n```python\n{solution().strip()}\n```"
    env = dict(os.environ, KERNEL_AGENT_CACHE=build_cache_dir, TORCH_EXTENSIONS_DIR=str(tmp_path / "ext"))
    out = tmp_path / "out"
    with ChatServer([answer]) as srv:
        proc = subprocess.run([sys.executable, "-m", "cli", "optimize", mlp_task(record), "--backend", "openai",
                               "--base-url", srv.base_url, "--model", "scripted", "--device", "cpu",
                               "--trajectories", "1", "--turns", "1", "--out", str(out)],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
        prompt = srv.requests[0]["messages"][-1]["content"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Keep `Model`'s parameter and buffer names" in prompt
    assert "class ModelNew" in (out / "best.py").read_text()


SCRIPT_SRC = '''
import torch
import torch.nn as nn
from helpers import act


class Mixer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Linear(d, d)

    def forward(self, x):
        return act(self.w(x)) + x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.mix = nn.Sequential(Mixer(256), Mixer(256))

    def forward(self, x):
        return self.mix(x)


def build():
    import importlib

    importlib.import_module("private_settings")  # loaded, but none of the classes' code imports it
    torch.manual_seed(0)
    return Net(), torch.randn(32, 256)
'''


def test_classes_in_the_users_own_script_under_tmp_travel_in_the_task_file(tmp_path, capsys):
    """The usual place for a user's model: a script under $HOME or /tmp, which the harness's sandbox hides, with
    a sibling module: the task file carries both sources (and no other module the process loaded), runs in the
    sandbox's reference child, and an `nn.Sequential` of them extracts too (it iterates itself)."""
    from kernelbench.harness import reference
    from kernelbench.harness.isolation import sandbox
    from kernelbench.harness.build.build_tree import remove_tree
    from kernelbench.tasks.inputs import draw_seeds
    from agent.prompts import PromptSettings, task_message

    (tmp_path / "helpers.py").write_text("import torch\n\n\ndef act(x):\n    return torch.nn.functional.silu(x) * 1.5\n")
    (tmp_path / "train.py").write_text(SCRIPT_SRC)
    (tmp_path / "private_settings.py").write_text("API_KEY = 'do-not-send'\n")
    proc = subprocess.run([sys.executable, "-m", "cli", "hotspots", f"{tmp_path / 'train.py'}:build", "--device",
                           "cpu", "--extract", "2", "--out", str(tmp_path / "tasks"), "--json"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    written = {w["path"]: w["file"] for w in json.loads(proc.stdout)["extraction"]["written"]}
    assert set(written) == {"mix", "mix.0"}, proc.stdout[-2000:]
    config = replace(EvalConfig(device="cpu", size="cpu"), timing_trials=3, warmup_trials=1)
    for path, file in written.items():
        source = open(file).read()
        assert "'helpers': (False," in source and "'kernel_agent_entry_train':" in source
        assert "do-not-send" not in source  # only what the classes' code imports travels
        with sandbox.SlotLease() as slot:
            scratch = sandbox.make_scratch(slot.uid, prefix="ka-test-ref-")
            try:
                ref = reference.run_reference(read_task_file(file), config, draw_seeds(2, 1, 1), slot, scratch)
            finally:
                remove_tree(scratch)
        assert ref.outputs and ref.timing.median_ms > 0, path
    prompt = task_message(open(written["mix"]).read(), PromptSettings(device="cpu", hardware="a CPU"))
    assert "#     return torch.nn.functional.silu(x) * 1.5" in prompt  # the carried helper, readable
    assert "_BLOB = (...)" in prompt and "UEsDB" not in prompt  # no base64 for the model to read
