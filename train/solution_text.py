"""A reference solution as warm-start text: its compact form, its summary, and the answer built from both."""

from __future__ import annotations

import ast
import re

_RAW_STRING_OPEN = re.compile(r'=\s*r?"""\s*$')
_TRAILING_CPP_COMMENT = re.compile(r"\s+//\s.*$")


def compact_source(source: str) -> str:
    """The same solution with fewer tokens: no module docstring, no `//` comments in its C++ strings.

    Only comment lines and `  // ...` tails inside a `name = r\"\"\"` block are removed, so the Python
    code and every C++ statement stay as written (integer division `//` in Python is never touched)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        lines = lines[:first.lineno - 1] + lines[first.end_lineno:]
    out, in_cpp = [], False
    for line in lines:
        if in_cpp and line.strip().startswith('"""'):
            in_cpp = False
        elif in_cpp:
            if line.strip().startswith("//"):
                continue
            line = _TRAILING_CPP_COMMENT.sub("", line)
        elif _RAW_STRING_OPEN.search(line):
            in_cpp = True
        out.append(line)
    return "\n".join(out).strip() + "\n"


def solution_summary(source: str, first_sentence: bool = False) -> str:
    """The docstring of a solution file as the answer's summary (only its first sentence when asked)."""
    doc = " ".join((ast.get_docstring(ast.parse(source)) or "A custom kernel for this task.").split())
    if first_sentence:
        doc = re.split(r"(?<=[.:;])\s", doc, maxsplit=1)[0].rstrip(":;") or doc
    return doc


def solution_answer(source: str, compact: bool = False) -> str:
    """A reference solution as the agent's answer: its docstring as the summary, then the file in one
    python block (the shape `agent.parsing.parse_response` expects). `compact`: first sentence only and
    `compact_source` of the file."""
    code = compact_source(source) if compact else source
    return f"<summary>{solution_summary(source, compact)}</summary>\n\n```python\n{code.strip()}\n```"
