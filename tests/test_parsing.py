"""Parsing model answers: code blocks, reasoning removal, summaries, format errors."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from agent.parsing import extract_code, extract_summary, format_error_result, parse_response, strip_reasoning
from rewards import kernel_score

SOLUTION = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x"


def test_last_python_block_wins():
    text = f"Draft:\n```python\nclass ModelNew: pass  # draft\n```\nFinal:\n```python\n{SOLUTION}\n```\n"
    assert extract_code(text) == SOLUTION


def test_py_tag_and_untagged_blocks_are_accepted_other_languages_are_not():
    assert extract_code(f"```py\n{SOLUTION}\n```") == SOLUTION
    assert extract_code(f"```\n{SOLUTION}\n```") == SOLUTION
    assert extract_code(f"```python\n{SOLUTION}\n```\n```cpp\nint main() {{}}\n```") == SOLUTION
    assert extract_code("```cpp\nint main() {}\n```") == ""


def test_think_blocks_are_removed_with_their_code():
    draft = "```python\nclass ModelNew: wrong = 1\n```"
    text = f"<think>maybe\n{draft}\n</think><summary>fused</summary>\n```python\n{SOLUTION}\n```"
    parsed = parse_response(text)
    assert parsed.ok and parsed.code == SOLUTION
    assert "maybe" not in parsed.answer and parsed.summary == "fused"


def test_reasoning_opened_in_the_template_and_unclosed_reasoning():
    # Some chat templates put <think> in the prompt: the answer starts mid-thought and only closes it.
    assert strip_reasoning("I think x</think>\nanswer") == "answer"
    # Cut off by max_tokens while still thinking: nothing usable.
    parsed = parse_response("<summary>s</summary><think>still going ```python\nclass ModelNew: pass\n```")
    assert parsed.code == ""
    assert not parsed.ok


def test_summary_falls_back_to_prose_and_is_bounded():
    assert extract_summary(f"I fused the loops.\n```python\n{SOLUTION}\n```") == "I fused the loops."
    long = extract_summary("<summary>" + "x" * 5000 + "</summary>")
    assert len(long) < 1600 and long.endswith("[...]")


def test_unusable_answers_become_format_error_results():
    for text, needle in [("no code at all", "no code found"),
                         ("```python\ndef f(:\n```", "does not parse"),
                         ("```python\nclass Model: pass\n```", "ModelNew")]:
        parsed = parse_response(text)
        assert not parsed.ok and needle in parsed.error
        result = format_error_result(parsed)
        assert result.status == "format_error" and needle in result.feedback and kernel_score(result) == 0.0


PIECES = ["a", "b", " ", "\n", "`", "<", ">", "/", "(", ")", ":", "```", "```py", "```python\n", "<think>",
          "</think>", "<summary>", "</summary>", "class ModelNew:\n    pass\n", "def f(:"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40).map("".join) | st.text(max_size=200))
def test_parse_never_raises(text):
    parsed = parse_response(text)
    assert isinstance(parsed.code, str) and isinstance(parsed.summary, str)
    assert parsed.ok == (parsed.error == "")
