"""What an RL run's logged trajectories say about its turns, step by step (the pipeline's report and summary).

Read from `rl/trajectories/step_N[-RANK].jsonl`: per step and turn index, which of the family's answers the
policy wrote and their mean score, and the share of trajectories whose second turn scored above its first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from agent.trajectory import read_trajectories
from jobs.answers import classify


def _trajectories(rl_out: str) -> Iterator[tuple[int, Any]]:
    for path in sorted(Path(rl_out, "trajectories").glob("step_*.jsonl")):  # step_N.jsonl, step_N-RANK.jsonl
        step = int(path.stem.split("_")[1].split("-")[0])
        for traj in read_trajectories(str(path)):
            yield step, traj


def per_step(rl_out: str, codes: dict[str, str]) -> list[dict[str, Any]]:
    """One row per step: `turns` (per turn index: answer counts by family answer and `other`, mean score),
    `trajectories`, and `turn2_beats_turn1_share` (second turn scored strictly above the first; None when no
    trajectory had two scored turns)."""

    rows: dict[int, dict[str, Any]] = {}
    for step, traj in _trajectories(rl_out):
        row = rows.setdefault(step, {"step": step, "turns": {}, "trajectories": 0, "_pairs": 0, "_better": 0})
        row["trajectories"] += 1
        for turn in traj.turns:
            t = row["turns"].setdefault(str(turn.index + 1), {"answers": {k: 0 for k in (*codes, "other")},
                                                               "scores": []})
            t["answers"][classify(turn.candidate, codes)] += 1
            if turn.score is not None:
                t["scores"].append(turn.score)
        if len(traj.turns) >= 2 and traj.turns[0].score is not None and traj.turns[1].score is not None:
            row["_pairs"] += 1
            row["_better"] += traj.turns[1].score > traj.turns[0].score
    out = []
    for step in sorted(rows):
        row = rows[step]
        for t in row["turns"].values():
            scores = t.pop("scores")
            t["mean_score"] = sum(scores) / len(scores) if scores else None
        pairs, better = row.pop("_pairs"), row.pop("_better")
        row["turn2_beats_turn1_share"] = better / pairs if pairs else None
        out.append(row)
    return out


def example_trajectory(rl_out: str, codes: dict[str, str]) -> dict[str, Any] | None:
    """One trajectory of the last step to show in full: the first whose second turn scored above its first,
    else the first with two turns. Turn 1's code, its feedback, the summary the model wrote, turn 2."""

    last: list[Any] = []
    last_step = -1
    for step, traj in _trajectories(rl_out):
        if len(traj.turns) < 2:
            continue
        if step > last_step:
            last, last_step = [], step
        if step == last_step:
            last.append(traj)
    if not last:
        return None
    better = [t for t in last if (t.turns[1].score or 0) > (t.turns[0].score or 0)]
    traj = (better or last)[0]
    return {"step": last_step, "task_id": traj.task_id, "traj_id": traj.traj_id,
            "turns": [{"index": t.index + 1, "answer": classify(t.candidate, codes), "summary": t.summary,
                       "candidate": t.candidate, "status": t.result.status, "score": t.score,
                       "feedback": t.result.feedback} for t in traj.turns]}
