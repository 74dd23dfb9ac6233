"""Warm-start examples for a task family (`SFTConfig.data: family:affine`): first turns and second turns.

First turns (every training task's turn-1 prompt): the fast first answer (`rows`) once and the slow one
(`crossed`) `slow_copies` times, so the warm start starts mostly slow and RL has a first choice to move.

Second turns: the turn-2 prompt after either first answer, carrying that answer's summary, its code and a
feedback text in the harness's own format (`kernelbench.harness.feedback.render` and the roofline line) with
a speedup drawn from the fast or the slow regime; each such context is answered once with `rows` and once
with `columns`, so the warm start is neutral (50/50) on the second choice whatever the feedback says. The
second answer's summary opens by restating the speedup it was shown ("Attempt 1 ran at 0.132x."), copied
character for character: the warm start learns to read the feedback's number into its own words, and RL
then has to learn which kernel that number calls for (the choice is the next word).

The speedups are drawn, not measured (a warm start must not depend on one machine's timings, and its cache
key on its examples' text would change with every measurement); RL and the probes see the harness's real
feedback. Drawn by a fixed seed, so the examples, and the warm start's cache key, are the same every run.
"""

from __future__ import annotations

import random
from typing import Any

from agent.prompts import Attempt, build_messages

FAST_SPEEDUPS = (1.1, 2.4)
"""Range of the fast regime's drawn speedups (the `rows` kernel on a row-major input measured 1.5-2.1x)."""
SLOW_SPEEDUPS = (0.04, 0.3)
"""Range of the slow regime's (strided walks measured 0.06-0.2x)."""
REFINE_ANSWERS = ("rows", "columns")
"""The second answers every second-turn context gets, once each."""


def drawn_feedback(rng: random.Random, fast: bool) -> tuple[str, float]:
    """A correct verdict's feedback in the harness's format, with a drawn speedup; and that speedup as shown."""
    from kernelbench.harness import feedback, roofline
    from kernelbench.harness.result import CORRECT

    speedup = float(f"{rng.uniform(*(FAST_SPEEDUPS if fast else SLOW_SPEEDUPS)):.3g}")
    ref_ms = rng.uniform(1.8, 4.0)
    run_ms = ref_ms / speedup
    roof_ms = ref_ms * rng.uniform(0.25, 0.35)
    text = feedback.render(CORRECT, speedup=speedup, runtime_ms=run_ms, ref_runtime_ms=ref_ms, max_abs_error=0.0)
    text += "\n" + roofline.feedback_line(roof_ms / run_ms, roofline.MEMORY, roof_ms)
    return text, speedup


def restated(speedup: float) -> str:
    """How a second answer's summary opens: the speedup exactly as the feedback prints it (`{:.3g}`)."""
    return f"Attempt 1 ran at {speedup:.3g}x."


def family_examples(config: Any, example_cls: Any) -> list[Any]:
    """The warm start's examples for `config.data` (`family:NAME`) over the family's training tasks (or
    `config.tasks`), as `example_cls(task_id, source, prompt, answer)`."""
    from kernelbench.tasks.family import answer_source
    from train.grpo import resolve_tasks
    from agent.prompts import PromptSettings
    from train.solution_text import compact_source, solution_answer, solution_summary

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
        for turn1, regimes in (("rows", (True, False)), ("crossed", (False, False))):
            for fast in regimes:
                text, speedup = drawn_feedback(rng, fast)
                attempt = Attempt(code=codes[turn1], summary=solution_summary(sources[turn1], compact),
                                  status="correct", feedback=text)
                prompt = build_messages(task.shown_source, [attempt], settings)
                for name in REFINE_ANSWERS:
                    summary = f"{restated(speedup)} {solution_summary(sources[name], compact)}."
                    answer = f"<summary>{summary}</summary>\n\n```python\n{codes[name]}\n```"
                    out.append(example_cls(task.id, f"refine:{turn1}->{name}", prompt, answer))
    return out
