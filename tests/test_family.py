"""The `affine` task family, its held-out split, the probes' bars and the refinement probe's defining property:
a policy that ignores the harness's feedback cannot pass it, and one that reads it can."""

from __future__ import annotations

import random
import re
import zlib

import pytest

from agent.policy import Completion
from agent.prompts import PromptSettings
from agent.policy import SamplingConfig
from jobs.probes import RefineContext, family_codes, refine_probe
from kernelbench.harness.child.outputs import non_overlapping_and_dense
from kernelbench.harness.result import EvalResult
from kernelbench.tasks.family import affine_layout
from train.family_examples import drawn_feedback
from train.grpo import resolve_tasks

SETTINGS = PromptSettings(device="cpu", hardware="CPU (one thread)", style="compact")
SAMPLING = SamplingConfig(temperature=0.7, max_tokens=64, seed=3)


def test_family_splits_layouts_and_what_prompts_hide():
    train, held = resolve_tasks("family:affine:train"), resolve_tasks("family:affine:heldout")
    assert len(train) >= 20 and len(held) >= 5 and not {t.id for t in train} & {t.id for t in held}
    for tasks in (train, held):
        layouts = [affine_layout(t.id) for t in tasks]
        assert layouts.count("row") == layouts.count("column")
    for t in train + held:
        assert ".t()" in t.source or "randn(m, n)" in t.source
        assert "randn" not in t.shown_source and ".t()" not in t.shown_source  # the layout is not shown
    shown = {re.sub(r"\n[mnab] = [-0-9.]+", "", t.shown_source) for t in train + held}
    assert len(shown) == 1  # past the constants, every prompt reads the same: only measuring tells them apart
    from kernelbench.tasks.solutions import find_solution

    assert find_solution("affine/03", "cpu").path.endswith("rows.py")
    assert find_solution("affine/03", "cpu_slow").path.endswith("crossed.py")


def test_a_column_major_output_is_dense():
    assert non_overlapping_and_dense((4, 6), (1, 4)) and non_overlapping_and_dense((4, 6), (6, 1))
    assert not non_overlapping_and_dense((4, 6), (0, 1)) and not non_overlapping_and_dense((4, 3), (8, 2))


class ScriptedPolicy:
    """A policy stand-in: `choose(prompt text)` names the second answer (`rows`, `columns`) it writes."""

    def __init__(self, choose):
        self.choose = choose
        self.codes = family_codes(True)

    def generate(self, conversations, sampling):
        rng = random.Random(sampling.seed)
        out = []
        for conv in conversations:
            name = self.choose(conv[-1]["content"], rng)
            out.append(Completion(text=f"<summary>{name}</summary>\n\n```python\n{self.codes[name]}\n```"))
        return out


def _contexts() -> list[RefineContext]:
    """Held-out contexts with feedback in the harness's format: fast after `rows` on a row-major input (right
    answer `rows`), slow on a column-major one (right answer `columns`)."""
    rng = random.Random(0)
    out = []
    for t in resolve_tasks("family:affine:heldout"):
        fast = affine_layout(t.id) == "row"
        text, speedup = drawn_feedback(rng, fast)
        out.append(RefineContext(t.id, text, "correct", "rows" if fast else "columns",
                                 {"rows": speedup, "columns": 0.1 if fast else 1.5}))
    return out


def _without_feedback(prompt: str) -> str:
    return prompt.split("\nHarness:", 1)[0]


@pytest.mark.parametrize("name,choose", [
    ("always rows", lambda p, rng: "rows"),
    ("always columns", lambda p, rng: "columns"),
    ("a coin", lambda p, rng: rng.choice(("rows", "columns"))),
    ("by the visible prompt", lambda p, rng: ("rows", "columns")[zlib.crc32(_without_feedback(p).encode()) % 2]),
    ("by the visible prompt, the other way", lambda p, rng: ("columns", "rows")[zlib.crc32(_without_feedback(p).encode()) % 2]),
])
def test_a_policy_that_ignores_the_feedback_cannot_pass_the_refinement_probe(name, choose):
    """Each stand-in sees the whole turn-2 prompt but the feedback (the task, the first kernel, its summary):
    it scores at most 0.6, well under the 0.8 bar, however it picks."""
    contexts = _contexts()
    assert {c.right for c in contexts} == {"rows", "columns"}
    result = refine_probe(ScriptedPolicy(choose), contexts, 8, SAMPLING, SETTINGS)
    assert result["samples"] == 8 * len(contexts)
    assert result["refine_share"] <= 0.6, (name, result["right_share_by_kind"])


def test_a_policy_that_reads_the_feedback_passes_the_refinement_probe():
    def by_speedup(prompt, rng):
        speedup = float(re.search(r"speedup ([0-9.]+)x", prompt.split("\nHarness:", 1)[1]).group(1))
        return "rows" if speedup >= 1.0 else "columns"

    assert refine_probe(ScriptedPolicy(by_speedup), _contexts(), 8, SAMPLING, SETTINGS)["refine_share"] == 1.0


def test_the_refinement_probe_refuses_contexts_of_one_kind():
    one_kind = [c for c in _contexts() if c.right == "rows"]
    with pytest.raises(RuntimeError, match="both kinds"):
        refine_probe(ScriptedPolicy(lambda p, rng: "rows"), one_kind, 2, SAMPLING, SETTINGS)


def test_the_bars():
    from jobs.probes import learned

    assert learned({"fast_share": 0.2, "refine_share": 0.5}, {"fast_share": 0.7, "refine_share": 0.85})["both"]
    got = learned({"fast_share": 0.2, "refine_share": 0.65}, {"fast_share": 0.7, "refine_share": 0.9})
    assert got == {"first_answers": True, "refinement": False, "both": False}
    assert not learned({"fast_share": 0.4}, {"fast_share": 0.9})["first_answers"]



def test_the_prebuild_measures_a_known_answer_once_more_after_a_rejection_on_timing_noise(monkeypatch):
    """A loaded machine can disturb the paired timing of a known-good answer: one more measurement, logged;
    a second rejection stands (and stops the run), and a rejection for anything else gets no retry."""
    from jobs import pipeline
    from kernelbench.executors.evaluator import HarnessBroken
    from kernelbench.harness import evaluate as evaluate_module
    from train.config import TrainConfig

    def verdicts(*flag_sets):
        queue = list(flag_sets)

        def fake(task, code, config):
            flags = queue.pop(0)
            return EvalResult(status="rejected" if flags else "correct", correct=not flags, flags=tuple(flags),
                              speedup=0.0 if flags else 2.0, runtime_ms=1.0, feedback="status: ...")
        return fake

    job = [("affine/24", "rows", "code")]
    lines: list[str] = []
    monkeypatch.setattr(evaluate_module, "evaluate", verdicts(["timing_inconsistent"], []))
    got = pipeline.prebuild(TrainConfig(), job, say=lines.append)["affine/24:rows"]
    assert got["status"] == "correct" and got["retried_after"] == "timing_inconsistent"
    assert any("measuring once more" in line for line in lines)
    monkeypatch.setattr(evaluate_module, "evaluate", verdicts(["timing_inconsistent"], ["timing_inconsistent"]))
    twice = pipeline.prebuild(TrainConfig(), job, say=lines.append)
    with pytest.raises(HarnessBroken):
        pipeline._check_prebuild(twice, "out")
    monkeypatch.setattr(evaluate_module, "evaluate", verdicts(["timing_inconsistent", "wrong_output"]))
    assert pipeline.prebuild(TrainConfig(), job, say=lines.append)["affine/24:rows"]["retried_after"] == ""
