"""`--report-to wandb|trackio`: send a bench run's metrics to an experiment tracker people already use.

The trackers are optional extras (`pip install -e .[wandb]` / `.[trackio]`) and are imported only when
chosen: a run without `--report-to` never loads either. Choosing one that is not installed fails before
any work starts, with the command that installs it.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

# Imports inside functions: optional or GPU-only libraries (wandb, trackio: extras) are imported only where they are
# used, so a machine without them runs everything else.

TRACKERS = ("wandb", "trackio")


class TrackerError(ValueError):
    """An unknown tracker, or a known one whose package is not installed."""


def require_tracker(name: str) -> None:
    """Raise TrackerError unless `name` is a tracker this project knows and its package can be imported."""
    if name not in TRACKERS:
        raise TrackerError(f"--report-to {name!r}: choose one of {', '.join(TRACKERS)}")
    if importlib.util.find_spec(name) is None:
        raise TrackerError(f"--report-to {name}: the {name} package is not installed "
                           f"(pip install -e '.[{name}]' or pip install {name})")


def flatten(metrics: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Numeric leaves of nested metrics as `a/b/c` keys (lists and strings are left out)."""
    flat: dict[str, float] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            flat[name] = float(value)
    return flat


def report_metrics(name: str, metrics: dict[str, Any], config: dict[str, Any], out_dir: str) -> None:
    """Log the best-so-far curve (one step per turn) and then every headline number at the last step."""
    require_tracker(name)
    run_name = os.path.basename(os.path.abspath(out_dir))
    rows = metrics.get("per_turn", [])
    final = {f"bench/{k}": v for k, v in flatten({k: v for k, v in metrics.items() if k != "per_turn"}).items()}
    if name == "wandb":
        import wandb

        run = wandb.init(project="kernel-agent", name=run_name, dir=out_dir, config=config, job_type="bench")
        for row in rows:
            run.log({f"bench/per_turn/{k}": v for k, v in flatten(row).items() if k != "turn"}, step=int(row["turn"]))
        run.log(final, step=len(rows))
        run.summary.update(final)
        run.finish()
    else:
        import trackio

        trackio.init(project="kernel-agent", name=run_name, config=config)
        for row in rows:
            trackio.log({f"bench/per_turn/{k}": v for k, v in flatten(row).items() if k != "turn"}, step=int(row["turn"]))
        trackio.log(final, step=len(rows))
        trackio.finish()
