"""`perf/eval_wait_share` of the 2-process cpu-tiny RL run, the evaluation's old path against its new one, in one
invocation on one machine.

    python scripts/eval_wait_share.py               # 4 steps each (about 10 minutes on 2 cores)
    python scripts/eval_wait_share.py --steps 6 --out /tmp/ews

Both runs are `configs/cpu-tiny.yaml` under `torchrun --nproc_per_node 2`, every answer evaluated
(`reuse_identical_results: false`), a build cache of each run's own (the second must not find the first's
builds), no checkpoints or TensorBoard. The paths:
- new: the defaults: warm workers (`kernelbench.harness.isolation.warm_child`), streamed turns (`streaming_turns`);
- old: a fresh interpreter per child (`KERNEL_AGENT_WARM_WORKERS=0`) and lockstep turns (`streaming_turns: false`).
Both share what has no switch: one reference per group, the cheaper run stage (docs/harness.md, "Measured").
Prints the share of each step after step 0 (its start-up) and their means; asserts nothing. The share is
(rollout - generating) / rollout: on CPU a 2M-parameter policy generates in seconds, so it stays high on both
paths, and what moves is the rollout's length (printed beside it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PATHS = {"old": {"streaming_turns": False, "env": {"KERNEL_AGENT_WARM_WORKERS": "0"}},
         "new": {"streaming_turns": True, "env": {}}}


def run(path: str, steps: int, out: Path, seed: int) -> list[dict]:
    conf = yaml.safe_load((ROOT / "configs" / "cpu-tiny.yaml").read_text())
    train = conf["train"]
    train.update(steps=steps, seed=seed, reuse_identical_results=False, checkpoint_every=10_000, tensorboard=False,
                 streaming_turns=PATHS[path]["streaming_turns"])
    train.setdefault("eval", {})["build_cache_dir"] = str(out / f"builds-{path}")
    cfg = out / f"{path}.yaml"
    cfg.write_text(yaml.safe_dump(conf, sort_keys=False))
    run_dir = out / path
    env = dict(os.environ, **PATHS[path]["env"])
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "cli.main",
            "train", "--config", str(cfg), "--steps", str(steps), "--out", str(run_dir)]
    print(f"{path}: {' '.join(argv[2:])}", flush=True)
    t0 = time.perf_counter()
    with open(out / f"{path}.log", "w") as log:
        done = subprocess.run(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise SystemExit(f"{path}: the run failed ({done.returncode}); see {out / f'{path}.log'}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    print(f"{path}: {len(rows)} steps in {time.perf_counter() - t0:.0f} s", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4, help="RL steps of each run (step 0 is left out of the means)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="", help="folder for both runs (default: a new temporary folder)")
    args = ap.parse_args()
    if args.steps < 2:
        raise SystemExit("--steps must be at least 2 (step 0 is the start-up and is left out)")
    out = Path(args.out or tempfile.mkdtemp(prefix="ka-eval-wait-"))
    out.mkdir(parents=True, exist_ok=True)
    results = {path: run(path, args.steps, out, args.seed) for path in ("old", "new")}
    print(f"\n{'path':<5} {'eval_wait_share, steps 1..':<40} {'mean':>6} {'rollout_s mean':>15} {'generate_s mean':>16}")
    means = {}
    for path, rows in results.items():
        later = rows[1:]
        share = [r["perf/eval_wait_share"] for r in later]
        means[path] = statistics.fmean(share)
        print(f"{path:<5} {', '.join(f'{s:.3f}' for s in share):<40} {means[path]:>6.3f} "
              f"{statistics.fmean(r['perf/rollout_s'] for r in later):>14.1f}s "
              f"{statistics.fmean(r['perf/generate_s'] for r in later):>15.1f}s")
    print(f"\nnew / old eval_wait_share: {means['new'] / means['old']:.3f} (lower is better); runs in {out}")


if __name__ == "__main__":
    main()
