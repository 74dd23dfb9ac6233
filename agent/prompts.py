"""The code that assembles a turn's prompt from the texts in `agent.prompt_texts`.

Turn 1 states the task, the solution format, the target device and one worked example. Later turns
repeat that and add, for each earlier attempt, its kernel, the model's own summary of it and the
harness's feedback, then ask the model to restart its reasoning and write a complete new solution.
Earlier chains of thought are never shown again (Kevin-32B, arXiv 2507.11948: re-sending them pushed
contexts to 50-100k tokens within a few turns); the oldest attempts are dropped first when the prompt
exceeds its token budget.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Callable, Literal, Sequence, get_args

import pydantic
import pydantic.dataclasses

from agent.policy import Conversation, count_tokens_approx
from agent.prompt_texts import (SYSTEM, DEVICE_GUIDE, TRITON_GUIDE, TRITON_DEVICE_NOTE, OP_POLICY_RULES,
                                 FORMAT_RULES, WEIGHTS_RULE, ANSWER_RULES, EXAMPLE_PROBLEM, EXAMPLE_SOLUTION,
                                 TASK_TEMPLATE, HISTORY_HEADER, HISTORY_OMITTED, ATTEMPT_TEMPLATE, NO_CODE,
                                 NO_SUMMARY, COMPACT_TASK_TEMPLATE, COMPACT_KERNEL_KIND,
                                 COMPACT_TASK_TEMPLATE_TRITON, COMPACT_ATTEMPT_TEMPLATE, COMPACT_RESTART, RESTART)
from kernelbench.tasks.task_file import inspect_source

Language = Literal["cuda", "triton", "cpp"]
LANGUAGES = get_args(Language)
"""Kernel languages a prompt can ask for: `cuda` (CUDA C++ through load_inline, on a GPU), `cpp` (C++ through
load_inline, on a CPU) and `triton` (`@triton.jit` kernels, either device)."""
DEFAULT_LANGUAGE = {"cuda": "cuda", "cpu": "cpp"}


@dataclass(frozen=True)
class Attempt:
    """What a later prompt keeps of one earlier turn: never its reasoning."""

    code: str
    summary: str
    status: str
    feedback: str


@pydantic.dataclasses.dataclass(frozen=True, config=pydantic.ConfigDict(extra="forbid"))
class PromptSettings:
    """Settings that shape every prompt of a run (validated on construction: docs/architecture.md, "Configuration")."""

    device: Literal["cpu", "cuda"] = "cuda"
    """`cuda` asks for CUDA kernels, `cpu` for C++ kernels."""
    hardware: str = "NVIDIA H100 80GB HBM3"
    """Free text naming the machine the kernels will be timed on."""
    op_policy: Literal["strict", "partial"] = "strict"
    """`strict` or `partial` (see OP_POLICY_RULES)."""
    token_budget: int = 8192
    """Most prompt tokens; the oldest attempts are dropped first to stay under it (Kevin-32B: 8k prompts)."""
    language: Literal["", "cuda", "triton", "cpp"] = ""
    """Kernel language asked for: `cuda`, `triton` or `cpp` (LANGUAGES); empty: the device's own (`cuda` on
    cuda, `cpp` on cpu)."""
    style: Literal["full", "compact"] = "full"
    """`full`: system message, rules, answer format and a worked example (~1,000 tokens before the task).
    `compact`: no system message, the task source and one line of instructions, earlier attempts as
    the model's summary, the code and the harness's feedback only. For tiny models that must memorise their answers on a CPU: the full
    turn-1 prompt made warm-start examples ~1,700 tokens, most of them the worked example (measured)."""


def language_of(device: str, language: str = "") -> str:
    """The kernel language for `device` (`language`, or the device's default); raises ValueError for a
    language the device cannot run (`cuda` needs a GPU, `cpp` kernels are CPU ones)."""
    device = device if device in DEFAULT_LANGUAGE else "cuda"
    chosen = language or DEFAULT_LANGUAGE[device]
    if chosen not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    if chosen != "triton" and chosen != DEFAULT_LANGUAGE[device]:
        raise ValueError(f"language {chosen!r} does not run on device {device!r} (use "
                         f"{DEFAULT_LANGUAGE[device]!r} or 'triton')")
    return chosen


def _guide_and_example(settings: PromptSettings) -> tuple[str, str]:
    device = settings.device if settings.device in DEVICE_GUIDE else "cuda"
    if language_of(device, settings.language) == "triton":
        return TRITON_GUIDE + TRITON_DEVICE_NOTE[device], EXAMPLE_SOLUTION["triton"]
    return DEVICE_GUIDE[device], EXAMPLE_SOLUTION[device]


_BLOB_PART = re.compile(r"^_BLOB = \(.*?^\)$", re.S | re.M)
_SOURCES_PART = re.compile(r"^_SOURCES = (\{.*?^\})$", re.S | re.M)
CARRIED_READ_LIMIT = 12000
"""Characters of the user modules an extracted task carries that the model reads, at most."""


def readable_task(task_source: str) -> str:
    """The task as the model reads it. In an extracted task file (`agent.task_writer`) the base64 blob (thousands of
    tokens no model gains from) is left out, and the user modules the file carries are shown as source text
    instead of one escaped literal; the harness runs the whole file."""
    task_source = _BLOB_PART.sub("_BLOB = (...)  # base64 of the submodule's pickled structure and buffers "
                                 "(left out here)", task_source, count=1)
    found = _SOURCES_PART.search(task_source)
    if found:
        try:
            carried = ast.literal_eval(found.group(1))
            text = "\n".join(f"--- module {name} ({file}) ---\n{source}" for name, (_, file, source) in carried.items())
        except (ValueError, SyntaxError, TypeError):
            text = "(not readable)"
        if len(text) > CARRIED_READ_LIMIT:
            text = text[:CARRIED_READ_LIMIT] + "\n... (cut)"
        shown = "\n".join("# " + line if line else "#" for line in text.splitlines())
        task_source = (task_source[:found.start()] + "_SOURCES = {...}  # the user's modules this file carries "
                       "(Model's classes come from them); their source:\n" + shown + task_source[found.end():])
    return task_source.strip()


def task_message(task_source: str, settings: PromptSettings) -> str:
    """The turn-1 user message: task, rules, answer format, worked example."""
    guide, example = _guide_and_example(settings)
    rules = FORMAT_RULES.format(op_policy=OP_POLICY_RULES.get(settings.op_policy, OP_POLICY_RULES["strict"]))
    if language_of(settings.device, settings.language) == "triton":
        rules = rules.replace("Compile your kernels inline in the file itself", "Define your kernels in the file itself")
    if inspect_source(task_source).keep_state_dict:
        start = rules.index("- Create parameters")
        rules = rules[:start] + WEIGHTS_RULE + rules[rules.index("\n- ", start):]
    return TASK_TEMPLATE.format(
        hardware=settings.hardware, device_guide=guide, task_source=readable_task(task_source),
        format_rules=rules, answer_rules=ANSWER_RULES, example_problem=EXAMPLE_PROBLEM, example_solution=example)


def compact_task_message(task_source: str, settings: PromptSettings) -> str:
    """The turn-1 user message of the `compact` style: one line of instructions and the task."""
    if language_of(settings.device, settings.language) == "triton":
        return COMPACT_TASK_TEMPLATE_TRITON.format(hardware=settings.hardware,
                                                   task_source=readable_task(task_source))
    kind = COMPACT_KERNEL_KIND.get(settings.device, COMPACT_KERNEL_KIND["cuda"])
    return COMPACT_TASK_TEMPLATE.format(kernel_kind=kind, hardware=settings.hardware,
                                        task_source=readable_task(task_source))


def attempt_text(number: int, attempt: Attempt) -> str:
    return ATTEMPT_TEMPLATE.format(number=number, summary=attempt.summary.strip() or NO_SUMMARY,
                                   code=attempt.code.strip() or NO_CODE, status=attempt.status,
                                   feedback=attempt.feedback.strip())


def build_messages(task_source: str, attempts: Sequence[Attempt], settings: PromptSettings,
                   count_tokens: Callable[[str], int] | None = None) -> Conversation:
    """The conversation for the next turn. With no attempts this is the turn-1 prompt.

    Attempts are dropped oldest first until the prompt fits `settings.token_budget`; the most recent
    one is always kept, since its feedback is what the next answer must act on.
    """
    count = count_tokens or count_tokens_approx
    if settings.style == "compact":
        return _compact_messages(task_source, attempts, settings, count)
    head = task_message(task_source, settings)
    if not attempts:
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": head}]
    blocks = [attempt_text(i + 1, a) for i, a in enumerate(attempts)]
    fixed = count(SYSTEM) + count(head) + count(HISTORY_HEADER) + count(RESTART) + count(HISTORY_OMITTED) + 16
    first = len(blocks) - 1
    used = fixed + count(blocks[first])
    while first > 0 and used + count(blocks[first - 1]) <= settings.token_budget:
        first -= 1
        used += count(blocks[first])
    parts = [head, HISTORY_HEADER]
    if first:
        parts.append(HISTORY_OMITTED.format(n=first))
    parts.extend(blocks[first:])
    parts.append(RESTART)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def _compact_messages(task_source: str, attempts: Sequence[Attempt], settings: PromptSettings,
                      count: Callable[[str], int]) -> Conversation:
    """The `compact` style: one user message; attempts dropped oldest first to fit, the latest always kept."""
    head = compact_task_message(task_source, settings)
    if not attempts:
        return [{"role": "user", "content": head}]
    blocks = [COMPACT_ATTEMPT_TEMPLATE.format(number=i + 1, summary=a.summary.strip() or NO_SUMMARY,
                                              feedback=a.feedback.strip() or f"status: {a.status}",
                                              code=a.code.strip() or NO_CODE) for i, a in enumerate(attempts)]
    first = len(blocks) - 1
    used = count(head) + count(COMPACT_RESTART) + count(blocks[first]) + 8
    while first > 0 and used + count(blocks[first - 1]) <= settings.token_budget:
        first -= 1
        used += count(blocks[first])
    return [{"role": "user", "content": "\n\n".join([head, *blocks[first:], COMPACT_RESTART])}]
