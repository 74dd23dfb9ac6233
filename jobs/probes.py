"""The pipeline's probes on held-out tasks of a task family, before and after RL.

- First answers (`first_answer_probe`): each held-out task's turn-1 prompt sampled `samples` times; answers
  sorted by the family's answer whose code they reproduce (up to the extension's name: `jobs.pipeline.classify`).
  `fast_share`: answers equal to the fast first answer (`rows`, the family's `cpu` solution).
- Refinement (`refine_probe`): the turn-2 prompt after the fast first answer, carrying its summary, its code
  and the harness's real feedback on that task, sampled `samples` times. The right response is whichever of
  the two second answers (`rows`, `columns`) the harness measured faster on that task: the task's input layout,
  which its prompt does not show, decides it, and only the feedback's speedup reveals it. `refine_share` is
  the mean over the two kinds of context (right answer `rows`, right answer `columns`) of the share of right
  answers, so a policy that answers the same whatever the feedback scores 0.5 in expectation, however it splits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from agent.parsing import parse_response
from agent.prompts import Attempt, build_messages
from jobs.answers import classify, family_codes
from kernelbench.tasks.catalog import find_task
from kernelbench.tasks.family import answer_source
from train.solution_text import solution_summary

SECOND_ANSWERS = ("rows", "columns")
"""The second answers the refinement probe tells apart (the right one is the faster on the task)."""


def answer_label(text: str, codes: dict[str, str]) -> str:
    """The family answer an answer's code reproduces (`rows`, `columns`, `crossed`) or `other`."""

    return classify(parse_response(text).code, codes)


@dataclass(frozen=True)
class RefineContext:
    """One held-out task's turn-2 context for the refinement probe."""

    task_id: str
    feedback: str
    """The harness's feedback on the fast first answer (`rows`) on this task, as measured."""
    status: str
    right: str
    """The second answer the harness measured faster on this task (`rows` or `columns`)."""
    speedups: dict[str, float]
    """Measured speedup of each second answer on this task."""


def refine_contexts(measured: dict[str, dict[str, Any]], task_ids: Sequence[str]) -> list[RefineContext]:
    """Contexts from prebuild verdicts keyed `TASK:rows` / `TASK:columns` (status, speedup, feedback).
    Raises when a verdict is missing or not correct: the probe must not run on a context it cannot judge."""
    out = []
    for task_id in task_ids:
        got = {name: measured.get(f"{task_id}:{name}") for name in SECOND_ANSWERS}
        bad = {name: (v or {}).get("status", "missing") for name, v in got.items() if not v or v.get("status") != "correct"}
        if bad:
            raise RuntimeError(f"refinement probe: {task_id} has no correct verdict for {bad}")
        speedups = {name: float(v["speedup"]) for name, v in got.items()}
        out.append(RefineContext(task_id=task_id, feedback=got["rows"]["feedback"], status=got["rows"]["status"],
                                 right=max(speedups, key=speedups.get), speedups=speedups))
    return out


def refine_messages(ctx: RefineContext, task: Any, codes: dict[str, str], settings: Any) -> list[dict[str, str]]:
    """The turn-2 prompt after the fast first answer, as RL's second turns see it."""

    attempt = Attempt(code=codes["rows"], summary=solution_summary(answer_source("rows"), True), status=ctx.status,
                      feedback=ctx.feedback)
    return build_messages(task.shown_source, [attempt], settings)


def refine_probe(policy: Any, contexts: Sequence[RefineContext], samples: int, sampling: Any, settings: Any,
                 compact: bool = True) -> dict[str, Any]:
    """Sample each context's second answer `samples` times with `policy` (`agent.policy.Policy`).
    Returns per-task counts, the share of right answers in each kind of context and `refine_share` (their mean)."""

    kinds = {c.right for c in contexts}
    if kinds != set(SECOND_ANSWERS):
        raise RuntimeError(f"refinement probe needs contexts of both kinds {SECOND_ANSWERS}, got {sorted(kinds)}: "
                           "with one kind a policy that ignores feedback could pass it")
    codes = family_codes(compact)
    tasks: dict[str, Any] = {}
    for i, ctx in enumerate(contexts):
        prompt = refine_messages(ctx, find_task(ctx.task_id), codes, settings)
        outs = policy.generate([prompt] * samples, replace(sampling, seed=(sampling.seed or 0) + 7919 * (i + 1)))
        counts = {"rows": 0, "columns": 0, "crossed": 0, "other": 0}
        for o in outs:
            counts[answer_label(o.text, codes)] += 1
        tasks[ctx.task_id] = {"right": ctx.right, "speedups": ctx.speedups, **counts,
                              "right_share": counts[ctx.right] / max(1, samples)}
    by_kind = {k: [t["right_share"] for t in tasks.values() if t["right"] == k] for k in SECOND_ANSWERS}
    shares = {k: sum(v) / len(v) for k, v in by_kind.items()}
    return {"tasks": tasks, "samples": samples * len(contexts), "right_share_by_kind": shares,
            "refine_share": sum(shares.values()) / len(shares)}


def first_answer_probe(policy: Any, task_ids: Sequence[str], samples: int, sampling: Any, settings: Any,
                       compact: bool = True) -> dict[str, Any]:
    """Sample each task's turn-1 answer `samples` times; count the family's answers. `fast_share`: `rows`."""

    codes = family_codes(compact)
    counts: dict[str, dict[str, int]] = {}
    for i, task_id in enumerate(task_ids):
        outs = policy.generate([build_messages(find_task(task_id).shown_source, [], settings)] * samples,
                               replace(sampling, seed=(sampling.seed or 0) + 1000 * i))
        c = {"rows": 0, "columns": 0, "crossed": 0, "other": 0}
        for o in outs:
            c[answer_label(o.text, codes)] += 1
        counts[task_id] = c
    n = sum(sum(c.values()) for c in counts.values())
    return {"tasks": counts, "samples": n, "fast_share": sum(c["rows"] for c in counts.values()) / max(1, n)}


FAST_BEFORE_MAX, FAST_AFTER_MIN = 1 / 3, 2 / 3
"""The first-answer bar: the fast share of held-out first answers at most 1/3 before RL, at least 2/3 after."""
REFINE_BEFORE_MAX, REFINE_AFTER_MIN = 0.6, 0.8
"""The refinement bar: the right-response share at most 0.6 before RL (a warm start neutral on the second
choice), at least 0.8 after."""


def learned(before: dict[str, Any], after: dict[str, Any]) -> dict[str, bool]:
    """Which bars a run met: `first_answers`, `refinement`, and `both`."""
    first = before["fast_share"] <= FAST_BEFORE_MAX and after["fast_share"] >= FAST_AFTER_MIN
    refine = ("refine_share" in before and "refine_share" in after and before["refine_share"] <= REFINE_BEFORE_MAX
              and after["refine_share"] >= REFINE_AFTER_MIN)
    return {"first_answers": first, "refinement": refine, "both": first and refine}
