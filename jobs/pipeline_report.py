"""The pipeline's report: report.md opening with both probes' verdicts, then the warm start, the per-turn curves
and table of RL, one trajectory in full, the probes per task and the perf figures."""

from __future__ import annotations

import json
import os
from typing import Any

from jobs.answers import family_codes
from jobs.probes import FAST_AFTER_MIN, FAST_BEFORE_MAX, learned, REFINE_AFTER_MIN, REFINE_BEFORE_MAX
from jobs.trajectory_stats import example_trajectory
from train.metrics_log import read_metrics

# Imports inside functions: matplotlib (0.4 s to import) loads when a figure is drawn, not when this module is
# imported for its records and helpers.


def _plot_curves(records: list[dict[str, float]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in records]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for key in sorted(k for k in records[0] if k.startswith("reward/turn")) + ["reward/mean_score"]:
        axes[0].plot(steps, [r.get(key, 0.0) for r in records], marker="o", label=key.split("/")[1])
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("score (0.3·correct + speedup)")
    axes[0].legend(fontsize=7)
    axes[0].set_title("reward/")
    for key in ("reward/correct_share", "rollout/opening_departure_share", "trl/clip_ratio/region_mean"):
        axes[1].plot(steps, [r.get(key, 0.0) for r in records], marker=".", label=key)
    axes[1].set_xlabel("step")
    axes[1].legend(fontsize=7)
    axes[1].set_title("shares")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_turns(steps: list[dict[str, Any]], path: str) -> None:
    """Per step: which answer each turn wrote (shares), and the share of trajectories whose turn 2 beat turn 1."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [s["step"] for s in steps]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for ax, turn in zip(axes, ("1", "2")):
        for key in ("rows", "columns", "crossed", "other"):
            ys = [_share(s, turn, key) for s in steps]
            ax.plot(xs, ys, marker="o", label=key)
        ax.set_title(f"turn {turn}: which answer")
        ax.set_xlabel("RL step")
        ax.set_ylim(-0.02, 1.02)
    axes[1].plot(xs, [s.get("turn2_beats_turn1_share") or 0.0 for s in steps], "k--", label="turn 2 > turn 1")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _share(step: dict[str, Any], turn: str, key: str) -> float:
    answers = step["turns"].get(turn, {}).get("answers", {})
    return answers.get(key, 0) / max(1, sum(answers.values()))


def _mean(records: list[dict[str, float]], key: str) -> float:
    vals = [r[key] for r in records if key in r]
    return sum(vals) / len(vals) if vals else 0.0


def verdict_lines(summary: dict[str, Any]) -> list[str]:
    """The report's opening: both probes on held-out tasks, learned or not, in words."""

    pb, pa = summary["probe_before"], summary["probe_after"]
    got = learned(pb, pa)
    held = len(summary.get("probe_tasks") or pb.get("tasks", {}))
    lines = [f"**First answers: {'learned' if got['first_answers'] else 'NOT learned'}.** On {held} held-out tasks "
             f"(never seen by SFT or RL), the fast first answer's share of {pa['samples']} samples went from "
             f"{pb['fast_share']:.2f} before RL to {pa['fast_share']:.2f} after (bar: at most {FAST_BEFORE_MAX:.2f} "
             f"before, at least {FAST_AFTER_MIN:.2f} after).", ""]
    if "refine_share" in pb and "refine_share" in pa:
        lines += [f"**Refinement: {'learned' if got['refinement'] else 'NOT learned'}.** Given the fast first answer "
                  f"and the harness's real feedback on each held-out task, the share of second answers that are the "
                  f"right response (the kernel the harness measured faster there, which only the feedback's speedup "
                  f"reveals) went from {pb['refine_share']:.2f} before RL to {pa['refine_share']:.2f} after (bar: at "
                  f"most {REFINE_BEFORE_MAX} before, at least {REFINE_AFTER_MIN} after; a policy that ignores the "
                  f"feedback scores 0.5).", ""]
    else:
        lines += ["**Refinement: not measured** (no prebuild, so no real feedback for its contexts).", ""]
    lines += [f"Wall time {summary['wall_s']:.0f} s: " + ", ".join(f"{k} {v:.0f}" for k, v in summary["walls"].items()), ""]
    return lines


def write_pipeline_report(out: str, summary: dict[str, Any]) -> str:
    records = read_metrics(summary["rl_out"])
    lines = ["# cpu-tiny pipeline", "", *verdict_lines(summary), f"Preset `{summary['preset']}`.", ""]
    sft = summary.get("sft") or {}
    if sft:
        lines += ["## Warm start", "", f"{sft.get('examples')} examples, {sft.get('steps')} steps, final loss "
                  f"{sft.get('final_loss', 0):.5f} (floor {sft.get('loss_floor', 0):.5f}), {sft.get('train_s', 0):.0f} s."]
        for c in sft.get("checks", ()):  # SFT's own check, at its `check_temperature` (the probes use RL's)
            lines.append(f"- {c['task_id']}: {c['samples']} samples at T={c.get('temperature', '?')}: exact {c['exact']}, "
                         f"parseable {c['parseable']}")
        lines.append("")
    built = {k: v for k, v in (summary.get("prebuild") or {}).items() if isinstance(v, dict)}
    if built:
        lines += ["Answers through the harness (first answers `rows` / `crossed`, second answers `rows` / `columns`):", "",
                  "| task:answer | status | speedup | score |", "|---|---|---|---|"]
        lines += [f"| {k} | {v['status']}{' (' + ', '.join(v['flags']) + ')' if v.get('flags') else ''} "
                  f"| {v['speedup']:.2f} | {'-' if v['score'] is None else format(v['score'], '.2f')} |"
                  for k, v in built.items()]
        lines.append("")
    if records:
        _plot_curves(records, os.path.join(out, "reward.png"))
        first, last = records[0], records[-1]
        k = max(1, len(records) // 3)
        lines += ["## RL", "", "![reward](reward.png)", "",
                  f"Mean score: first third of steps {_mean(records[:k], 'reward/mean_score'):.3f} → last third "
                  f"{_mean(records[-k:], 'reward/mean_score'):.3f} (step 0 {first['reward/mean_score']:.3f}, "
                  f"step {int(last['step'])} {last['reward/mean_score']:.3f}).", ""]
        turns = sorted({key.split("/")[1][4:].split("_")[0] for r in records for key in r
                        if key.startswith("reward/turn") and key.endswith("_mean_score")}, key=int)
        by_step = {s["step"]: s for s in summary.get("steps") or []}
        head = (["step", "mean score"] + [f"turn {t} score" for t in turns] + [f"turn {t} advantage" for t in turns]
                + ["turn 2 > turn 1", "turn 1: rows / crossed / other", "turn 2: rows / columns / other", "correct", "step s"])
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in records:
            st = by_step.get(int(r["step"]), {"turns": {}})
            beat = st.get("turn2_beats_turn1_share")
            a1 = st["turns"].get("1", {}).get("answers", {})
            a2 = st["turns"].get("2", {}).get("answers", {})
            cells = ([str(int(r["step"])), f"{r['reward/mean_score']:.3f}"]
                     + [f"{r.get(f'reward/turn{t}_mean_score', 0):.3f}" for t in turns]
                     + [f"{r.get(f'rollout/turn{t}_advantage_mean', 0):+.3f}" for t in turns]
                     + ["-" if beat is None else f"{beat:.2f}",
                        f"{a1.get('rows', 0)} / {a1.get('crossed', 0)} / {a1.get('other', 0) + a1.get('columns', 0)}",
                        f"{a2.get('rows', 0)} / {a2.get('columns', 0)} / {a2.get('other', 0) + a2.get('crossed', 0)}",
                        f"{r['reward/correct_share']:.2f}", f"{r.get('trl/step_time', 0):.1f}"])
            lines.append("| " + " | ".join(cells) + " |")
        perf = ["trl/step_time", "perf/rollout_s", "perf/generate_s", "perf/generate_tokens_per_s",
                "perf/eval_wait_share", "perf/evaluations_per_s"]
        lines += ["", "Perf (mean over steps): " + ", ".join(f"`{p}` {_mean(records, p):.3g}" for p in perf), ""]
    steps = summary.get("steps") or []
    if steps:
        _plot_turns(steps, os.path.join(out, "turns.png"))
        lines += ["## Answers per turn, per RL step", "", "![turns](turns.png)", ""]

    example = example_trajectory(summary["rl_out"], family_codes(True))
    if example:
        lines += [f"## One trajectory (step {example['step']}, {example['task_id']}, trajectory {example['traj_id']})", ""]
        for t in example["turns"]:
            lines += [f"**Turn {t['index']}**: `{t['answer']}`, {t['status']}, score "
                      f"{'-' if t['score'] is None else format(t['score'], '.2f')}. Summary the model wrote: "
                      f"\"{t['summary']}\"", "", "```python", t["candidate"][:3000], "```", "", "Harness feedback:", "",
                      "```", t["feedback"][:1500], "```", ""]
    pb, pa = summary["probe_before"], summary["probe_after"]
    lines += ["## Probes on held-out tasks, before and after RL", "",
              "| task | first answers before: rows / crossed / columns / other | after |", "|---|---|---|"]
    for t in pb["tasks"]:
        b, a = pb["tasks"][t], pa["tasks"].get(t, {})
        lines.append(f"| {t} | {b['rows']} / {b['crossed']} / {b['columns']} / {b['other']} | "
                     f"{a.get('rows', 0)} / {a.get('crossed', 0)} / {a.get('columns', 0)} / {a.get('other', 0)} |")
    if "refine" in pb and "refine" in pa:
        lines += ["", "| task | right second answer (measured speedups) | before: rows / columns / other | after |",
                  "|---|---|---|---|"]
        for t, b in pb["refine"]["tasks"].items():
            a = pa["refine"]["tasks"].get(t, {})
            sp = ", ".join(f"{k} {v:.2f}x" for k, v in b["speedups"].items())
            lines.append(f"| {t} | {b['right']} ({sp}) | {b['rows']} / {b['columns']} / {b['other'] + b['crossed']} | "
                         f"{a.get('rows', 0)} / {a.get('columns', 0)} / {a.get('other', 0) + a.get('crossed', 0)} |")
    bench = summary["bench"]
    lines += ["", "## Held-out bench", ""]
    if bench.get("source") in ("failed", "skipped"):
        lines.append(f"The bench did not run: {bench['error']}")
    else:
        m = bench.get("metrics", {})
        shown = {k: v for k, v in m.items() if not isinstance(v, (dict, list))}
        lines += [f"Through `{bench['source']}` into `{bench['out']}` (its report.md has the details).", "",
                  "```", json.dumps(shown, indent=1, sort_keys=True)[:1500], "```"]
    path = os.path.join(out, "report.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path
