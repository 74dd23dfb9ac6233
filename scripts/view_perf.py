"""Time `kernel-agent view` on a large synthetic bench run, in headless Chromium.

    python3 scripts/view_perf.py [--tasks 100 --trajectories 16 --turns 8] [--out /tmp/view-perf]

Writes a results.jsonl of TASKS x TRAJECTORIES x TURNS kernels (each a ~3 KB kernel that changes a little
from turn to turn, with feedback, summary and reasoning), builds the page, and loads it in headless
Chromium three times. Prints the page size, the build time, and the page's own load figure: the
`data-render-ms` it stamps on <body> once the JSON is parsed and the task table drawn (milliseconds since
navigation started), plus the browser's wall time less that of an empty page.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from evals.results_log import BenchRecord  # noqa: E402 - after the path line above, which makes it importable
from kernelbench.harness.result import EvalResult  # noqa: E402

STATUSES = ["correct", "incorrect", "compile_error", "runtime_error", "rejected", "format_error", "timeout"]


def kernel(task: int, traj: int, turn: int) -> str:
    lines = [f"// task {task} trajectory {traj}", "#include <torch/extension.h>",
             "torch::Tensor fwd(torch::Tensor x) {", "    auto y = torch::empty_like(x);"]
    lines += [f"    // step {i}: unroll by {(i + turn) % 8 + 1}, tile {(traj * 7 + i) % 64}" for i in range(60)]
    lines += ["    return y;", "}"]
    return "\n".join(lines)


def synthetic_run(out: str, tasks: int, trajectories: int, turns: int) -> None:
    rng = random.Random(0)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.jsonl"), "w", encoding="utf-8") as f:
        for t in range(tasks):
            level = 1 + t % 3
            for j in range(trajectories):
                for k in range(turns):
                    status = rng.choice(STATUSES)
                    correct = status == "correct"
                    res = EvalResult(status=status, correct=correct, speedup=rng.uniform(0.3, 3.0) if correct else 0.0,
                                     flags=("static:try_except",) if status == "rejected" else (),
                                     feedback=f"turn {k}: " + ("ok " if correct else "mismatch at index 17 ") * 10,
                                     runtime_ms=0.5, ref_runtime_ms=0.9)
                    rec = BenchRecord(task=f"kb:L{level}/{t}_task", level=level, origin="kernelbench:/kb",
                                      trajectory=str(j), turn=k, candidate=kernel(t, j, k),
                                      summary=f"unrolled the loop, turn {k}", response="",
                                      reasoning="I considered tiling the loop. " * 20, compile_baseline="none",
                                      result=res, prompt_tokens=3000 + 500 * k, completion_tokens=900,
                                      reasoning_tokens=300)
                    f.write(rec.to_json() + "\n")  # not ResultsLog.append: an fsync a line, 12,800 by default
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump({"bench": {"model": "synthetic", "tasks": "synthetic", "backend": "openai"}}, f)


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    raise SystemExit("no chromium on PATH (scripts/install.sh installs Debian's)")


def load(browser: str, url: str, screenshot: str = "") -> tuple[float, str]:
    """(browser wall seconds, the DOM after the page's script ran); with `screenshot`, a PNG instead of the
    DOM (--dump-dom serialises the whole document, embedded data included: slow for a large page)."""
    with tempfile.TemporaryDirectory() as profile:
        mode = [f"--screenshot={screenshot}", "--window-size=1400,900"] if screenshot else ["--dump-dom"]
        t0 = time.perf_counter()
        dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                              "--disable-background-networking", "--disable-component-update", "--disable-sync",
                              f"--user-data-dir={profile}", *mode, url],
                             capture_output=True, text=True, timeout=300).stdout
        return time.perf_counter() - t0, dom


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=100)
    ap.add_argument("--trajectories", type=int, default=16)
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "view-perf"))
    args = ap.parse_args()
    from evals.viewer import write_view

    synthetic_run(args.out, args.tasks, args.trajectories, args.turns)
    t0 = time.perf_counter()
    page = write_view(args.out)
    build_s = time.perf_counter() - t0
    browser = chromium()
    empty = os.path.join(args.out, "empty.html")
    with open(empty, "w") as f:
        f.write("<!DOCTYPE html><html><body>empty</body></html>")
    base_s, _ = load(browser, "file" + "://" + empty)
    shot_base_s, _ = load(browser, "file" + "://" + empty, os.path.join(args.out, "empty.png"))
    print(f"{args.tasks} tasks x {args.trajectories} trajectories x {args.turns} turns = "
          f"{args.tasks * args.trajectories * args.turns} kernels; page {os.path.getsize(page) / 1e6:.1f} MB, "
          f"built in {build_s:.2f} s")
    for i in range(3):
        wall_s, dom = load(browser, "file" + "://" + page)
        marker = 'data-render-ms="'
        at = dom.find(marker)
        render = dom[at + len(marker):dom.find('"', at + len(marker))] if at >= 0 else "?"
        rows = dom.count('class="task"')
        shot_s, _ = load(browser, "file" + "://" + page, os.path.join(args.out, "perf.png"))
        print(f"load {i + 1}: page ready {render} ms after navigation start; {rows} task rows drawn; "
              f"screenshot wall {shot_s:.2f} s (empty page {shot_base_s:.2f} s); "
              f"dump-dom wall {wall_s:.2f} s (empty page {base_s:.2f} s)")
    # Opening one task with every trajectory unfolded (16 x 8 turns, diffs computed): #task= does it on load.
    wall_s, dom = load(browser, "file" + "://" + page + "#task=kb:L1/0_task")
    at = dom.find('data-render-ms="')
    ready = dom[at + 16:dom.find('"', at + 16)]
    turns, diffs = dom.count('class="turn"') + dom.count('class="turn inh"'), dom.count('data-role="diff"')
    print(f"one task opened with all its trajectories: page ready {ready} ms, {turns} turns and {diffs} diffs drawn")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
