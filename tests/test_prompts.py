"""Prompt assembly: turn-1 contents, later turns keep kernel + summary + feedback, never reasoning."""

from __future__ import annotations

import ast

from agent.prompts import (EXAMPLE_SOLUTION, RESTART, Attempt, PromptSettings, build_messages)

TASK = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.tanh(x)\n"


def user_text(messages):
    assert [m["role"] for m in messages] == ["system", "user"]
    return messages[1]["content"]


def test_turn_one_states_task_device_format_and_example():
    cpu = user_text(build_messages(TASK, [], PromptSettings(device="cpu", hardware="Test CPU 9000")))
    assert "torch.tanh(x)" in cpu and "Test CPU 9000" in cpu
    assert "cpp_sources" in cpu and "ModelNew" in cpu and "<summary>" in cpu and "```python" in cpu
    assert EXAMPLE_SOLUTION["cpu"] in cpu and "cuda_sources=cuda_source" not in cpu
    assert "may not call PyTorch compute" in cpu
    cuda = user_text(build_messages(TASK, [], PromptSettings(device="cuda", op_policy="partial")))
    assert "CUDA kernels" in cuda and EXAMPLE_SOLUTION["cuda"] in cuda and "are allowed" in cuda
    assert RESTART not in cuda


def test_example_solutions_are_valid_python_with_modelnew():
    for src in EXAMPLE_SOLUTION.values():
        tree = ast.parse(src)
        assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)


def test_later_turns_carry_code_summary_feedback_and_restart():
    attempts = [Attempt("class ModelNew: v = 1", "first try", "compile_error", "error: expected ';' at line 3"),
                Attempt("", "", "format_error", "Format error: no code found.")]
    text = user_text(build_messages(TASK, attempts, PromptSettings(device="cpu")))
    for needle in ("Attempt 1", "Attempt 2", "first try", "expected ';' at line 3", "compile_error",
                   "no usable code", RESTART):
        assert needle in text
    assert text.index("Attempt 1") < text.index("Attempt 2") < text.index(RESTART)


def test_budget_drops_oldest_attempts_first_and_keeps_the_latest():
    attempts = [Attempt(f"class ModelNew: v = {i}  # " + "x" * 2000, f"summary {i}", "incorrect", f"fb {i}")
                for i in range(6)]
    full = user_text(build_messages(TASK, attempts, PromptSettings(device="cpu", token_budget=100_000)))
    assert all(f"summary {i}" in full for i in range(6)) and "left out" not in full
    tight = user_text(build_messages(TASK, attempts, PromptSettings(device="cpu", token_budget=3200)))
    assert "summary 5" in tight and "summary 0" not in tight and "left out" in tight
    kept = [i for i in range(6) if f"summary {i}" in tight]
    assert kept == list(range(kept[0], 6)) and len(kept) < 6
    # Counting with a tokenizer that sees every character as a token keeps fewer attempts.
    approx = user_text(build_messages(TASK, attempts, PromptSettings(device="cpu", token_budget=12000)))
    by_char = user_text(build_messages(TASK, attempts, PromptSettings(device="cpu", token_budget=12000), len))
    assert "left out" not in approx and "left out" in by_char and "summary 5" in by_char
    # Even a budget too small for anything keeps the latest attempt.
    tiny = user_text(build_messages(TASK, attempts, PromptSettings(device="cpu", token_budget=10)))
    assert "summary 5" in tiny and "summary 4" not in tiny
