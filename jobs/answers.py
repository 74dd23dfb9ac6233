"""The family's answers as code text, and which of them an answer's code reproduces (up to the extension's name)."""

from __future__ import annotations

import re

from kernelbench.tasks.family import ANSWER_FILES, answer_source
from train.solution_text import compact_source

# The extension's name (`load_inline(name="...")`) labels the build and changes nothing it computes. A tiny
# policy drifts on it under RL (on 2026-12-03 the last steps wrote the fast kernel, character for character,
# as `sol_cpu_l1_26_matrix_matrix_multiply`, scored 1.34 like the fast reference, and exact text counted all
# 16 as `other`), so it is masked before comparing; every other character, the kernel's included, must match.
# Only a keyword argument (after `(` or `,`): a C++ `const char* name = "..."` in the kernel stays compared.
_EXTENSION_NAME = re.compile(r"""([(,]\s*name\s*=\s*)(["'])[^"'\n]*\2""")


def without_extension_name(code: str) -> str:
    """`code` stripped, with the string of every `name=` keyword argument replaced by a fixed one."""
    return _EXTENSION_NAME.sub(r'\1"_"', code.strip())


def classify(code: str, refs: dict[str, str]) -> str:
    """`fast`, `slow` (that reference's text, up to the extension's name) or `other`."""
    code = without_extension_name(code)
    return next((label for label, ref in refs.items() if code and code == without_extension_name(ref)), "other")


def family_codes(compact: bool) -> dict[str, str]:
    """The family's answers as the code text a parsed answer gives back, by name."""

    return {name: (compact_source(answer_source(name)) if compact else answer_source(name)).strip()
            for name in ANSWER_FILES}
