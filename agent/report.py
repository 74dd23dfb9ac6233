"""What `optimize` leaves behind: report.md (every kernel tried) and a chart of best speedup per turn."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from agent.trajectory import Trajectory, Turn
from kernelbench.harness.result import CORRECT, EvalResult
from kernelbench.harness.insight.roofline import describe

# Imports inside functions: matplotlib (0.4 s to import) loads when a figure is drawn, not when this module is
# imported for its records and helpers.

CHART_NAME = "best_speedup.png"


@dataclass(frozen=True)
class Best:
    """The fastest correct kernel of a run."""

    traj_id: str
    turn: Turn

    @property
    def speedup(self) -> float:
        return self.turn.result.speedup


def new_kernels(trajs: Sequence[Trajectory]) -> list[tuple[str, Turn]]:
    """Every kernel sampled in this run, once each (beam-search copies of a parent's turns are skipped)."""
    return [(t.traj_id, turn) for t in trajs for turn in t.new_turns]


def find_best(trajs: Sequence[Trajectory]) -> Best | None:
    """The correct kernel with the highest speedup (the earliest among equals), or None."""
    correct = [(tid, turn) for tid, turn in new_kernels(trajs) if turn.result.status == CORRECT]
    if not correct:
        return None
    tid, turn = max(correct, key=lambda p: p[1].result.speedup)
    return Best(traj_id=tid, turn=turn)


def best_speedup_by_turn(trajs: Sequence[Trajectory]) -> list[float]:
    """Entry t: best speedup among correct kernels at turn index <= t over all trajectories (0 if none)."""
    kernels = new_kernels(trajs)
    if not kernels:
        return []
    last = max(turn.index for _, turn in kernels)
    per_turn = [0.0] * (last + 1)
    for _, turn in kernels:
        if turn.result.status == CORRECT:
            per_turn[turn.index] = max(per_turn[turn.index], turn.result.speedup)
    curve, best = [], 0.0
    for s in per_turn:
        best = max(best, s)
        curve.append(best)
    return curve


def write_chart(path: str, curve: Sequence[float], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    turns = list(range(1, len(curve) + 1))
    ax.plot(turns, curve, marker="o")
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="reference (1.0x)")
    ax.set_xlabel("turn")
    ax.set_ylabel("best speedup so far (x)")
    ax.set_xticks(turns)
    ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def speed_of_light(r: EvalResult) -> str:
    """How far a correct kernel is from the device's limit: "2.1x faster than eager, at 38 % of memory
    bandwidth (memory-bound task; roofline 0.0123 ms, so at most 2.6x more to gain)"; "" without a roofline."""
    if r.status != CORRECT or r.sol_fraction <= 0:
        return ""
    room = f"at most {1 / r.sol_fraction:.2g}x more to gain" if r.sol_fraction < 1 else \
        "above the roofline: see the flag `above_roofline`"
    return (f"{r.speedup:.2g}x faster than eager, {describe(r.sol_fraction, r.sol_bound)} ({r.sol_bound}-bound "
            f"task; roofline {r.roofline_ms:.4g} ms, so {room})")


def _cell(text: str, limit: int = 90) -> str:
    line = " ".join(text.split())
    line = line if len(line) <= limit else line[:limit - 3] + "..."
    return line.replace("|", "\\|") or "-"


@dataclass(frozen=True)
class SessionCost:
    """Tokens the model spent on this run's kernels and, with prices, what they cost."""

    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    cost_usd: float | None
    """None when no price was given."""

    def line(self) -> str:
        if not (self.prompt_tokens or self.completion_tokens):
            return "- tokens: not reported by the backend"
        text = (f"- tokens: {self.prompt_tokens:,} prompt, {self.completion_tokens:,} completion "
                f"({self.reasoning_tokens:,} of them reasoning)")
        if self.cost_usd is not None:
            text += f"; session cost ${self.cost_usd:.4f}"
        return text


def session_cost(trajs: Sequence[Trajectory], price_in: float = 0.0, price_out: float = 0.0) -> SessionCost:
    """Sum over the kernels sampled in this run (a beam child's inherited turns are not paid twice);
    prices are USD per million prompt / completion tokens."""
    kernels = [turn for _, turn in new_kernels(trajs)]
    prompt = sum(t.prompt_tokens for t in kernels)
    completion = sum(t.completion_tokens for t in kernels)
    cost = (prompt * price_in + completion * price_out) / 1e6 if (price_in or price_out) else None
    return SessionCost(prompt, completion, sum(t.reasoning_tokens for t in kernels), cost)


def render_markdown(title: str, trajs: Sequence[Trajectory], best: Best | None, settings: dict[str, str],
                    cost: SessionCost | None = None) -> str:
    kernels = new_kernels(trajs)
    counts = Counter(turn.result.status for _, turn in kernels)
    lines = [f"# {title}", ""]
    lines += [f"- {k}: {v}" for k, v in settings.items()]
    lines += [f"- kernels tried: {len(kernels)} ({', '.join(f'{s} {n}' for s, n in counts.most_common())})"]
    lines += [(cost or session_cost(trajs)).line(), ""]
    if best:
        r = best.turn.result
        lines += [f"**Best: {r.speedup:.3f}x** over the PyTorch reference ({r.runtime_ms:.4f} ms against "
                  f"{r.ref_runtime_ms:.4f} ms), trajectory {best.traj_id}, turn {best.turn.index + 1}; "
                  "saved as `best.py`.", ""]
        if speed_of_light(r):
            lines += [f"Speed of light: {speed_of_light(r)}.", ""]
    else:
        lines += ["**No correct kernel was found**, so there is no `best.py`. The table shows what went wrong.", ""]
    lines += [f"![best speedup per turn]({CHART_NAME})", "",
              "| trajectory | turn | status | speedup | runtime (ms) | speed of light | summary / feedback |",
              "|---|---|---|---|---|---|---|"]
    for tid, turn in kernels:
        r = turn.result
        note = turn.summary if r.status == CORRECT else (r.feedback or turn.summary)
        speed = f"{r.speedup:.3f}" if r.status == CORRECT else "-"
        ms = f"{r.runtime_ms:.4f}" if r.runtime_ms else "-"
        sol = f"{100 * r.sol_fraction:.0f} % of {r.sol_bound}" if r.status == CORRECT and r.sol_fraction > 0 else "-"
        lines.append(f"| {tid} | {turn.index + 1} | {r.status} | {speed} | {ms} | {sol} | {_cell(note)} |")
    return "\n".join(lines) + "\n"


def write_report(out_dir: str, title: str, trajs: Sequence[Trajectory], settings: dict[str, str],
                 price_in: float = 0.0, price_out: float = 0.0) -> Best | None:
    """Write report.md and the chart into `out_dir`; return the best kernel (or None). `price_in`,
    `price_out`: USD per million prompt and completion tokens, for the session's cost (0: not priced)."""
    os.makedirs(out_dir, exist_ok=True)
    best = find_best(trajs)
    write_chart(os.path.join(out_dir, CHART_NAME), best_speedup_by_turn(trajs) or [0.0], title)
    with open(os.path.join(out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write(render_markdown(title, trajs, best, settings, session_cost(trajs, price_in, price_out)))
    return best
