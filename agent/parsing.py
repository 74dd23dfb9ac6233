"""Reading a model's answer: drop its reasoning, take its summary and its final code block.

Nothing here raises on model output. An answer without usable code becomes a `format_error`
`EvalResult` whose feedback says what was expected, so the next turn can correct it and the
reward is 0 (Kevin-32B scores a kernel only when it is correct).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from kernelbench.harness.result import FORMAT_ERROR, EvalResult

SUMMARY_MAX_CHARS = 1500
"""Longer summaries are cut: the summary stands in for the chain of thought and must stay short."""

_THINK_BLOCK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
# A fenced block: ``` or ~~~ with an optional language tag, up to a closing fence at line start.
_FENCE = re.compile(r"^[ \t]*(```|~~~)[ \t]*([\w+.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.DOTALL | re.MULTILINE)
_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.DOTALL | re.IGNORECASE)
_PYTHON_TAGS = {"", "python", "py", "python3"}


@dataclass(frozen=True)
class ParsedResponse:
    """What the harness and the next prompt take from one answer."""

    code: str
    """The candidate solution (last python block), empty when none was usable."""
    summary: str
    """The model's short account of what it changed and why (never its chain of thought)."""
    answer: str
    """The answer with reasoning removed (what remains after stripping `<think>` blocks)."""
    error: str
    """Why the answer is unusable (empty when `code` is usable)."""

    @property
    def ok(self) -> bool:
        return not self.error


def strip_reasoning(text: str) -> str:
    """Remove `<think>...</think>` blocks; also text before a lone `</think>` (templates that open the
    block inside the prompt) and everything after a `<think>` that never closes (cut off mid-thought)."""
    text = _THINK_BLOCK.sub("", text)
    close = list(_THINK_CLOSE.finditer(text))
    if close:
        text = text[close[-1].end():]
    opened = _THINK_OPEN.search(text)
    if opened:
        text = text[:opened.start()]
    return text.strip()


def extract_code(answer: str) -> str:
    """The last fenced block tagged python/py or untagged; empty if there is none."""
    blocks = [m.group(3) for m in _FENCE.finditer(answer) if m.group(2).lower() in _PYTHON_TAGS]
    return blocks[-1].strip("\n") if blocks else ""


def extract_summary(answer: str) -> str:
    """Text in the last `<summary>` tag; failing that, the prose outside code blocks. Cut to SUMMARY_MAX_CHARS."""
    tagged = _SUMMARY.findall(answer)
    summary = tagged[-1] if tagged else _FENCE.sub("", answer)
    summary = re.sub(r"\n{3,}", "\n\n", summary).strip()
    if len(summary) > SUMMARY_MAX_CHARS:
        summary = summary[:SUMMARY_MAX_CHARS].rstrip() + " [...]"
    return summary


def check_candidate(code: str) -> str:
    """Why `code` cannot be a solution file, or empty: it must parse and define `class ModelNew`."""
    if not code.strip():
        return ("no code found: end the answer with one ```python block holding the complete solution "
                "file (imports, inline kernel sources, class ModelNew)")
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        return f"the python block does not parse: line {e.lineno}: {e.msg}"
    except (ValueError, RecursionError) as e:
        return f"the python block does not parse: {e}"
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        return "the python block defines no top-level `class ModelNew` (the solution class the harness runs)"
    return ""


def parse_response(text: str) -> ParsedResponse:
    """Split an answer into code, summary and what went wrong; never raises."""
    answer = strip_reasoning(text)
    code = extract_code(answer)
    error = check_candidate(code)
    return ParsedResponse(code=code, summary=extract_summary(answer), answer=answer, error=error)


def format_error_result(parsed: ParsedResponse) -> EvalResult:
    """The verdict on an answer that gave no usable solution (never reaches the harness)."""
    return EvalResult(status=FORMAT_ERROR, feedback=f"Format error: {parsed.error}.")
