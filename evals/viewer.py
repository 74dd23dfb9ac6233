"""`kernel-agent view RUN_DIR`: one self-contained HTML page to read what the agent did in a run.

Reads a bench run (`results.jsonl`), an optimize run (`trajectories.jsonl`) or a train run
(`trajectories/step_*.jsonl`), and writes one file with its CSS, JavaScript, data (JSON) and plots
(base64 PNG) inside: it opens from disk and never touches the network. The page shows a task table
(best speedup, status per turn, fast_p marks) that filters by level, status and origin; opening a
task lists its trajectories, and opening a trajectory shows each turn's kernel with a diff against the
previous turn, the harness's feedback and flags, the model's summary and its reasoning (folded).

Large runs stay usable because the page builds a trajectory's DOM only when it is opened, and diffs are
computed in the browser at that moment; the page load parses the JSON and draws the table only.
"""

from __future__ import annotations

import base64
import glob
import json
import os
import re
from collections import defaultdict
from typing import Any, Iterable

from evals.metrics import FAST_P_THRESHOLDS
from evals.results_log import BenchError, record_key, ResultsLog

TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "viewer_template.html")
PAGE_NAME = "view.html"
SCREENSHOT_NAME = "view.png"
"""The browser test's screenshot of the page; never embedded (it would embed itself on the next view)."""

STATUS_RANK = {"correct": 7, "incorrect": 6, "timeout": 5, "runtime_error": 4, "compile_error": 3,
               "rejected": 2, "format_error": 1}
"""How far a kernel got through the harness; a task's status at a turn is its best trajectory's."""

_THINK = re.compile(r"<think(?:ing)?>(.*?)(?:</think(?:ing)?>|$)", re.DOTALL | re.IGNORECASE)
_LEVEL = re.compile(r"(?:^|[:/_])L(?:evel_?)?(\d)\b")


class ViewError(ValueError):
    """RUN_DIR holds no run this viewer can read."""


def _read_jsonl(path: str) -> list[dict[str, Any]]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a torn last line from a killed run
    return out


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def _reasoning(reasoning: str, response: str) -> str:
    """The separate reasoning field, else the inline `<think>` blocks of the answer."""
    if reasoning:
        return reasoning
    return "\n\n".join(m.strip() for m in _THINK.findall(response or "") if m.strip())


def _turn(index: int, result: dict[str, Any], *, candidate: str, summary: str, response: str, reasoning: str,
          tokens: Iterable[int], inherited: bool = False) -> dict[str, Any]:
    """One turn as the page reads it (short keys: a large run's JSON is mostly these)."""
    status = str(result.get("status", "?"))
    turn = {"i": index, "s": status, "x": float(result.get("speedup", 0.0) or 0.0),
            "xc": float(result.get("speedup_vs_compile", 0.0) or 0.0), "f": list(result.get("flags", []) or []),
            "fb": str(result.get("feedback", "") or ""), "sm": summary or "", "c": candidate or "",
            "r": _reasoning(reasoning, response), "tk": [int(t or 0) for t in tokens],
            "ms": float(result.get("runtime_ms", 0.0) or 0.0), "rms": float(result.get("ref_runtime_ms", 0.0) or 0.0)}
    if not candidate:
        turn["a"] = response or ""  # no kernel: the answer itself is what there is to read
    if inherited:
        turn["inh"] = 1
    return turn


def _level_of(task_id: str) -> int:
    m = _LEVEL.search(task_id)
    return int(m.group(1)) if m else 0


def _bench_tasks(run_dir: str) -> dict[str, dict[str, Any]]:
    tasks: dict[str, dict[str, Any]] = {}
    seen = set()
    try:
        records = ResultsLog(os.path.join(run_dir, "results.jsonl")).read()  # the run may still be writing it
    except BenchError as e:
        raise ViewError(str(e)) from None
    for rec in records:
        if record_key(rec) in seen:
            continue  # the first record of a kernel wins, as in the metrics
        seen.add(record_key(rec))
        task = tasks.setdefault(rec.task, {"id": rec.task, "level": rec.level, "origin": rec.origin, "trajs": {}})
        traj = task["trajs"].setdefault(rec.trajectory, {"id": rec.trajectory, "turns": []})
        # `_turn` reads a result as a dict: the shape trajectory files (optimize, train) hold it in.
        traj["turns"].append(_turn(rec.turn, rec.result.to_dict(), candidate=rec.candidate, summary=rec.summary,
                                   response=rec.response, reasoning=rec.reasoning,
                                   tokens=(rec.prompt_tokens, rec.completion_tokens, rec.reasoning_tokens)))
    return tasks


def _trajectory_tasks(docs: Iterable[tuple[str, dict[str, Any]]], origin: str) -> dict[str, dict[str, Any]]:
    """Tasks from episode-runner trajectories (optimize, train); `docs` pairs a label (a train step) with each."""
    tasks: dict[str, dict[str, Any]] = {}
    for label, d in docs:
        tid = str(d.get("task_id", "?"))
        task = tasks.setdefault(tid, {"id": tid, "level": _level_of(tid), "origin": origin, "trajs": {}})
        inherited = int(d.get("inherited_turns", 0) or 0)
        name = f"{label}{d.get('traj_id', '?')}"
        turns = [_turn(int(t.get("index", i)), t.get("result", {}), candidate=t.get("candidate", ""),
                       summary=t.get("summary", ""), response=t.get("response", ""), reasoning=t.get("reasoning", ""),
                       tokens=(t.get("prompt_tokens", 0), t.get("completion_tokens", 0), t.get("reasoning_tokens", 0)),
                       inherited=i < inherited)
                 for i, t in enumerate(d.get("turns", []))]
        traj = {"id": name, "turns": turns}
        if d.get("parent"):
            traj["parent"] = f"{label}{d['parent']}"
        task["trajs"][name] = traj
    return tasks


def _trajectory_order(ids: Iterable[str]) -> list[str]:
    ids = list(ids)
    return sorted((t for t in ids if t.isdigit()), key=int) + sorted(t for t in ids if not t.isdigit())


def _summarise(task: dict[str, Any]) -> dict[str, Any]:
    """The table row of a task: best speedup, status per turn, statuses, fast_p marks."""
    trajs = [task["trajs"][k] for k in _trajectory_order(task["trajs"])]
    for traj in trajs:
        traj["turns"].sort(key=lambda t: t["i"])
    turns = [t for traj in trajs for t in traj["turns"] if not t.get("inh")]
    correct = [t for t in turns if t["s"] == "correct"]
    best = max((t["x"] for t in correct), default=0.0)
    n_turns = max((t["i"] for t in turns), default=-1) + 1
    per_turn = []
    for i in range(n_turns):
        at = [t for t in turns if t["i"] == i]
        counts: dict[str, int] = defaultdict(int)
        for t in at:
            counts[t["s"]] += 1
        top = max(at, key=lambda t: (STATUS_RANK.get(t["s"], 0), t["x"]), default=None)
        per_turn.append({"s": top["s"] if top else "", "x": top["x"] if top else 0.0, "n": dict(counts)})
    return {"id": task["id"], "level": task["level"], "origin": task["origin"], "best": best,
            "bestc": max((t["xc"] for t in correct), default=0.0),
            "ok": sum(1 for traj in trajs if any(t["s"] == "correct" for t in traj["turns"])),
            "statuses": sorted({t["s"] for t in turns}), "per_turn": per_turn,
            "fast": [p for p in FAST_P_THRESHOLDS if correct and best > p],
            "tokens": sum(sum(t["tk"][:2]) for t in turns), "trajs": trajs}


def _plots(run_dir: str) -> list[dict[str, str]]:
    out = []
    for path in sorted(glob.glob(os.path.join(run_dir, "*.png"))):
        name = os.path.basename(path)
        if name == SCREENSHOT_NAME:
            continue
        with open(path, "rb") as f:
            data = f.read()
        if data[:8] != b"\x89PNG\r\n\x1a\n":
            continue
        out.append({"name": name, "src": "data:image/png;base64," + base64.b64encode(data).decode("ascii")})
    return out


def _headline(metrics: dict[str, Any]) -> list[list[str]]:
    """A few numbers for the page's header, from metrics.json (bench) when present."""
    s = metrics.get("overall", {})
    if not s:
        return []
    k = s.get("k", 0)
    rows = [["tasks", str(s.get("tasks", 0))], [f"correct best@{k}", f"{s.get('correct_best@k', 0):.3f}"],
            [f"mean speedup best@{k}", f"{s.get('speedup_mean_best@k', 0):.3f}"],
            ["fast_1 (best)", f"{s.get('fast_p', {}).get('eager', {}).get('fast_1', 0):.3f}"]]
    t = metrics.get("tokens", {})
    if t.get("counted"):
        rows.append(["tokens", f"{t.get('total_tokens', 0):,}"])
        if t.get("tokens_per_correct_kernel") is not None:
            rows.append(["tokens per correct kernel", f"{t['tokens_per_correct_kernel']:,.0f}"])
        if t.get("cost_usd") is not None:
            rows.append(["cost", f"${t['cost_usd']:.4f}"])
            if t.get("cost_per_correct_kernel_usd") is not None:
                rows.append(["cost per correct kernel", f"${t['cost_per_correct_kernel_usd']:.4f}"])
    return rows


def _pipeline_headline(summary: dict[str, Any]) -> list[list[str]]:
    """The pipeline's probes (held-out tasks, before → after RL) and its wall time, for the page's header."""
    before, after = summary.get("probe_before", {}), summary.get("probe_after", {})
    rows = [[key, f"{before[key]:.2f} → {after[key]:.2f}"] for key in ("fast_share", "refine_share")
            if key in before and key in after]
    return rows + [["wall", f"{summary.get('wall_s', 0):.0f} s"]]


def load_run(run_dir: str) -> dict[str, Any]:
    """Everything the page shows, as one JSON-able dict; raises ViewError when RUN_DIR holds no known run."""
    if not os.path.isdir(run_dir):
        raise ViewError(f"{run_dir} is not a folder")
    config = _read_json(os.path.join(run_dir, "config.json"))
    metrics = _read_json(os.path.join(run_dir, "metrics.json"))
    steps = sorted(glob.glob(os.path.join(run_dir, "trajectories", "step_*.jsonl")))
    pipeline = _read_json(os.path.join(run_dir, "summary.json"))
    rl_steps = sorted(glob.glob(os.path.join(run_dir, "rl", "trajectories", "step_*.jsonl")))
    if pipeline and rl_steps and not steps:  # `kernel-agent train --pipeline`: RL's trajectories are in rl/
        steps = rl_steps
    if os.path.exists(os.path.join(run_dir, "results.jsonl")):
        kind, tasks = "bench", _bench_tasks(run_dir)
        bench = config.get("bench", {})
        title = f"bench: {bench.get('model') or bench.get('backend', '')} on {bench.get('tasks', '')}"
    elif os.path.exists(os.path.join(run_dir, "trajectories.jsonl")):
        kind = "optimize"
        tasks = _trajectory_tasks((("", d) for d in _read_jsonl(os.path.join(run_dir, "trajectories.jsonl"))),
                                  "user")
        title = f"optimize: {config.get('file', '')} ({config.get('backend', '')}:{config.get('model', '')})"
    elif steps:
        kind = "train"

        def docs():
            for path in steps:
                step = int(re.sub(r"\D", "", os.path.basename(path)) or 0)
                for d in _read_jsonl(path):
                    yield f"step {step} / ", d

        tasks = _trajectory_tasks(docs(), "train")
        cfg = config.get("config", config)
        title = f"train: {cfg.get('model', '')} ({len(steps)} steps logged)"
        if steps is rl_steps:
            kind, title = "pipeline", f"pipeline: {pipeline.get('preset', '')} ({len(steps)} RL steps logged)"
    else:
        raise ViewError(f"{run_dir} holds no results.jsonl (bench), trajectories.jsonl (optimize), "
                        "trajectories/step_*.jsonl (train) or summary.json with rl/trajectories/ (train --pipeline)")
    rows = [_summarise(tasks[k]) for k in sorted(tasks)]
    headline = _pipeline_headline(pipeline) if kind == "pipeline" else _headline(metrics)
    return {"kind": kind, "title": title, "dir": os.path.abspath(run_dir), "headline": headline,
            "thresholds": list(FAST_P_THRESHOLDS), "status_rank": STATUS_RANK, "tasks": rows,
            "plots": _plots(run_dir)}


def embed_json(data: Any) -> str:
    """JSON safe inside a <script> element and free of anything that reads as a link: `<`, `>` and `&` are
    escaped (no `</script>` or comment can close the element early) and so is the colon of `://` (a
    kernel's comment may quote a URL; the file must hold none). JSON.parse restores every character."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return text.replace("://", "\\u003a//")


def render_page(data: dict[str, Any]) -> str:
    """The page: the run's summary as one JSON block parsed at load, and each task's trajectories in a JSON
    block of their own, parsed only when that task is opened (the browser's HTML parser skips over them
    quickly; parsing a large run's kernels at load is what would make it slow)."""
    with open(TEMPLATE, encoding="utf-8") as f:
        template = f.read()
    title = (data.get("title") or "run").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    summary = dict(data, tasks=[{k: v for k, v in t.items() if k != "trajs"} | {"n": len(t["trajs"])}
                                for t in data["tasks"]])
    blocks = "".join(f'<script type="application/json" class="task-data">{embed_json(t["trajs"])}</script>\n'
                     for t in data["tasks"])
    return (template.replace("__TITLE__", title.replace("://", "&#58;//"))
            .replace("__DATA__", embed_json(summary)).replace("<!--TASK-DATA-->", blocks))


def write_view(run_dir: str, out: str = "") -> str:
    """Write the page (default RUN_DIR/view.html); returns its path."""
    page = render_page(load_run(run_dir))
    out = out or os.path.join(run_dir, PAGE_NAME)
    if os.path.dirname(out):
        os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, out)
    return out
