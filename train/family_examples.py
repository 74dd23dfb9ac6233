"""Warm-start examples for a task family (`SFTConfig.data: family:affine`): first turns and second turns.

First turns (every training task's turn-1 prompt): the fast first answer (`rows`) once and the slow one
(`crossed`) `slow_copies` times, so the warm start starts mostly slow and RL has a first choice to move.

Second turns: the turn-2 prompt after either first answer, carrying that answer's summary, its code and a
feedback text in the harness's own format (`kernelbench.harness.feedback.render` and the roofline line) with
a speedup drawn from the fast or the slow regime; each such context is answered once with `rows` and once
with `columns`, so the warm start is neutral (50/50) on the second choice whatever the feedback says. The
second answer's summary opens by restating the feedback as a category, the first answer's name and whether
it ran faster than eager ("Row walk ran slow."), then names its own kernel ("Column walk."): the warm start
learns to read the feedback's speedup into a word, never which kernel that word calls for, and RL then has
an adjacent association to learn (the choice is the next word after the category).

The speedups are drawn, not measured (a warm start must not depend on one machine's timings, and its cache
key on its examples' text would change with every measurement); RL and the probes see the harness's real
feedback. Drawn by a fixed seed, so the examples, and the warm start's cache key, are the same every run.
"""

from __future__ import annotations

import random
from typing import Any

from agent.prompts import Attempt, build_messages, PromptSettings
from kernelbench.harness import feedback
from kernelbench.harness.insight import roofline
from kernelbench.harness.result import CORRECT
from kernelbench.tasks.family import answer_source
from train.solution_text import compact_source, solution_answer, solution_summary

# Imports inside functions: train.grpo imports torch and transformers; this module's texts load without them.

FAST_SPEEDUPS = (0.6, 4.0)
"""Range of the fast regime's drawn speedups (a sequential walk measured 0.8-7x on a loaded 2-core machine)."""
SLOW_SPEEDUPS = (0.03, 0.3)
"""Range of the slow regime's (strided walks measured 0.04-0.2x)."""
FAST_AT = 0.5
"""The speedup from which a second answer's summary calls the first one `fast`: between the two regimes, not
at 1, since a sequential walk measured below eager on a loaded machine is still the fast kernel."""
REFINE_ANSWERS = ("rows", "columns")
"""The second answers every second-turn context gets, once each."""
REFINE_CONTEXTS = ((("rows", True), ("rows", False)) * 3) + (("crossed", False),)
"""Second-turn contexts per training task: (first answer, fast regime). Mostly after `rows`, whose feedback
tells the layout apart, so the category is learned from both regimes; `crossed` is slow on every layout."""


def drawn_feedback(rng: random.Random, fast: bool) -> tuple[str, float]:
    """A correct verdict's feedback in the harness's format, with a drawn speedup; and that speedup as shown."""

    speedup = float(f"{rng.uniform(*(FAST_SPEEDUPS if fast else SLOW_SPEEDUPS)):.3g}")
    ref_ms = rng.uniform(1.8, 4.0)
    run_ms = ref_ms / speedup
    roof_ms = ref_ms * rng.uniform(0.25, 0.35)
    text = feedback.render(CORRECT, speedup=speedup, runtime_ms=run_ms, ref_runtime_ms=ref_ms, max_abs_error=0.0)
    text += "\n" + roofline.feedback_line(roof_ms / run_ms, roofline.MEMORY, roof_ms)
    return text, speedup


def restated(first_summary: str, speedup: float) -> str:
    """How a second answer's summary opens: the first answer's name and the feedback's speedup as a word
    (`fast` from `FAST_AT`, `slow` below)."""
    return f"{first_summary.rstrip('.')} ran {'fast' if speedup >= FAST_AT else 'slow'}."


def family_examples(config: Any, example_cls: Any) -> list[Any]:
    """The warm start's examples for `config.data` (`family:NAME`) over the family's training tasks (or
    `config.tasks`), as `example_cls(task_id, source, prompt, answer)`."""
    from train.grpo import resolve_tasks

    family = config.data.split(":", 1)[1]
    tasks = resolve_tasks(",".join(config.tasks)) if config.tasks else resolve_tasks(f"family:{family}:train")
    settings = PromptSettings(device=config.device, hardware=config.hardware, style=config.prompt_style)
    compact = config.compact_solutions
    sources = {name: answer_source(name) for name in ("rows", "columns", "crossed")}
    answers = {name: solution_answer(src, compact) for name, src in sources.items()}
    codes = {name: (compact_source(src) if compact else src).strip() for name, src in sources.items()}
    rng = random.Random(f"{config.data}-feedback-{config.seed}")
    out = []
    for task in tasks:
        first = build_messages(task.shown_source, [], settings)
        out.append(example_cls(task.id, "cpu", first, answers["rows"]))
        out += [example_cls(task.id, "cpu_slow", first, answers["crossed"])] * config.slow_copies
        for turn1, fast in REFINE_CONTEXTS:
            text, speedup = drawn_feedback(rng, fast)
            first_summary = solution_summary(sources[turn1], compact)
            attempt = Attempt(code=codes[turn1], summary=first_summary, status="correct", feedback=text)
            prompt = build_messages(task.shown_source, [attempt], settings)
            for name in REFINE_ANSWERS:
                summary = f"{restated(first_summary, speedup)} {solution_summary(sources[name], compact)}"
                answer = f"<summary>{summary}</summary>\n\n```python\n{codes[name]}\n```"
                out.append(example_cls(task.id, f"refine:{turn1}->{name}", prompt, answer))
    return out
