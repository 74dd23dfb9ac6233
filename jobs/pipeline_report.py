"""The pipeline's report: report.md with the reward curve, the before/after probe and the perf figures."""

from __future__ import annotations

import json
import os
from typing import Any

from train.metrics_log import read_metrics


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


def _plot_probe(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(before)
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(tasks), 3.4))
    width = 0.38
    for j, (label, probe) in enumerate((("before RL", before), ("after RL", after))):
        fast = [probe[t]["fast"] / max(1, sum(probe[t].values())) for t in tasks]
        ax.bar([i + (j - 0.5) * width for i in range(len(tasks))], fast, width, label=label)
    ax.set_xticks(range(len(tasks)), tasks, fontsize=7)
    ax.set_ylabel("share of samples = fast solution")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_choices(choices: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [c["step"] for c in choices]
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for key in ("fast", "slow", "other"):
        n = [max(1, c["fast"] + c["slow"] + c["other"]) for c in choices]
        ax.plot(steps, [c[key] / m for c, m in zip(choices, n)], marker="o", label=key)
    ax.set_xlabel("RL step")
    ax.set_ylabel("share of turn-1 answers")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("which kernel the policy wrote")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _mean(records: list[dict[str, float]], key: str) -> float:
    vals = [r[key] for r in records if key in r]
    return sum(vals) / len(vals) if vals else 0.0


def write_pipeline_report(out: str, summary: dict[str, Any]) -> str:
    records = read_metrics(summary["rl_out"])
    lines = ["# cpu-tiny pipeline", "", f"Preset `{summary['preset']}`. Wall times (s): "
             + ", ".join(f"{k} {v:.0f}" for k, v in summary["walls"].items()), ""]
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
        lines += ["Reference answers through the harness (the choice RL has to learn):", "",
                  "| answer | status | speedup | score |", "|---|---|---|---|"]
        lines += [f"| {k} | {v['status']}{' (' + ', '.join(v['flags']) + ')' if v.get('flags') else ''} "
                  f"| {v['speedup']:.2f} | {v['score']:.2f} |" for k, v in built.items()]
        lines += [""] + [f"{k}, {v['status']}:\n\n```\n{v.get('feedback', '')[:2000]}\n```\n"
                         for k, v in built.items() if v["status"] != "correct" and v.get("feedback")]
        lines.append("")
    if records:
        _plot_curves(records, os.path.join(out, "reward.png"))
        first, last = records[0], records[-1]
        k = max(1, len(records) // 3)
        lines += ["## RL", "", "![reward](reward.png)", "",
                  f"Mean score: first third of steps {_mean(records[:k], 'reward/mean_score'):.3f} → last third "
                  f"{_mean(records[-k:], 'reward/mean_score'):.3f} (step 0 {first['reward/mean_score']:.3f}, "
                  f"step {int(last['step'])} {last['reward/mean_score']:.3f}).", "",
                  "| step | mean score | correct | status: format / compile / correct | clip | grad norm | step s |",
                  "|---|---|---|---|---|---|---|"]
        for r in records:
            lines.append(f"| {int(r['step'])} | {r['reward/mean_score']:.3f} | {r['reward/correct_share']:.2f} | "
                         f"{r.get('rollout/status_format_error', 0):.2f} / {r.get('rollout/status_compile_error', 0):.2f} / "
                         f"{r.get('rollout/status_correct', 0):.2f} | {r.get('trl/clip_ratio/region_mean', 0):.3f} | "
                         f"{r.get('loss/grad_norm', 0):.3g} | {r.get('trl/step_time', 0):.1f} |")
        perf = ["trl/step_time", "perf/rollout_s", "perf/generate_s", "perf/generate_tokens_per_s",
                "perf/eval_wait_share", "perf/evaluations_per_s"]
        lines += ["", "Perf (mean over steps): " + ", ".join(f"`{p}` {_mean(records, p):.3g}" for p in perf), ""]
    choices = summary.get("choices") or []
    if choices:
        _plot_choices(choices, os.path.join(out, "choices.png"))
        lines += ["## Fast vs slow kernel per RL step", "", "![choices](choices.png)", "",
                  "| step | fast | slow | other | fast share |", "|---|---|---|---|---|"]
        lines += [f"| {c['step']} | {c['fast']} | {c['slow']} | {c['other']} | {c['fast_share']:.2f} |" for c in choices]
        lines.append("")
    pb, pa = summary["probe_before"], summary["probe_after"]
    before, after = pb["tasks"], pa["tasks"]
    _plot_probe(before, after, os.path.join(out, "probe.png"))
    verdict = ("It learned" if pb["fast_share"] <= 1 / 3 and pa["fast_share"] >= 2 / 3 else
               "It did not learn (the bar is a fast share of at most 1/3 before RL and at least 2/3 after)")
    lines[3:3] = [f"**{verdict}: the faster correct kernel's share of {pa['samples']} probe samples went from "
                  f"{pb['fast_share']:.2f} before RL to {pa['fast_share']:.2f} after, in {summary['wall_s']:.0f} s.**", ""]
    lines += ["## Fast vs slow kernel, before and after RL", "", "![probe](probe.png)", "",
              "| task | before: fast / slow / other | after: fast / slow / other |", "|---|---|---|"]
    for t in before:
        b, a = before[t], after[t]
        lines.append(f"| {t} | {b['fast']} / {b['slow']} / {b['other']} | {a['fast']} / {a['slow']} / {a['other']} |")
    bench = summary["bench"]
    lines += ["", "## Held-out bench", ""]
    if bench.get("source") == "failed":
        lines.append(f"The bench did not run: {bench['error']}")
    else:
        m = bench.get("metrics", {})
        shown = {k: v for k, v in m.items() if not isinstance(v, (dict, list))}
        lines += [f"Through `{bench['source']}` into `{bench['out']}` (its report.md has the details). The tiny "
                  "model never saw these tasks, so it is expected to solve none.", "",
                  "```", json.dumps(shown, indent=1, sort_keys=True)[:1500], "```"]
    path = os.path.join(out, "report.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path
