"""Per-step metrics: metrics.jsonl (always), TensorBoard (default), wandb / trackio (optional, lazy).

Namespaces are fixed (STYLE.md): `reward/`, `loss/`, `rollout/`, `perf/`; docs/metrics.md explains each
metric. Also here: the rollout statistics that watch for collapse (Kevin-32B, arXiv 2507.11948: the share
of responses not opening with the base model's usual opening rose ~15 steps before junk output appeared).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from typing import Any, Iterable, Sequence

# Imports inside functions: optional or GPU-only libraries (tensorboard's writer, wandb, trackio) are imported only
# where they are used, so a machine without them runs everything else.

OPENING_MIN_SHARE = 0.1
"""A first word is one of the base model's usual openings if at least this share of step-0 responses
starts with it (the most common one always counts)."""


_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)


def first_word(text: str) -> str:
    """The response's opening: the first whitespace-separated word of its answer, at most 24 characters.

    Inline chain of thought (`<think>…</think>`, unclosed included) is skipped: a reasoning model (Qwen3)
    opens every response with `<think>`, so counting that tag as the opening would see no departure ever."""
    words = _THINK.sub(" ", text).strip().split(maxsplit=1)
    return words[0][:24] if words else ""


def usual_openings(texts: Iterable[str]) -> tuple[str, ...]:
    """The base model's usual first words, from its step-0 responses (see OPENING_MIN_SHARE)."""
    counts = Counter(first_word(t) for t in texts)
    total = sum(counts.values())
    if not total:
        return ()
    ranked = counts.most_common()
    return tuple(w for i, (w, c) in enumerate(ranked) if i == 0 or c / total >= OPENING_MIN_SHARE)


def departing_share(texts: Sequence[str], openings: Sequence[str]) -> float:
    """Share of responses whose first word is none of `openings` (Kevin's "not okay ratio")."""
    if not texts or not openings:
        return 0.0
    return sum(1 for t in texts if first_word(t) not in openings) / len(texts)


def repetition_rate(token_ids: Sequence[int], n: int = 4) -> float:
    """Share of a response's token n-grams that repeat an earlier n-gram of the same response (0 for text
    without repeats; near 1 for a loop). Degenerate RL output loops long before it stops parsing."""
    grams = [tuple(token_ids[i:i + n]) for i in range(len(token_ids) - n + 1)]
    if not grams:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


class PendingMetrics:
    """The project's metric values since the last log row: the rollout (`reward/`, `rollout/`, `perf/`), the
    held-out evaluation (`eval/`) and the loss hook record here, and the step callback adds their means to the
    `logs` TRL's `Trainer.log` hands it (`train.trainer.make_callbacks`). TRL's own metrics need nothing of
    this: they arrive in those `logs` already. Several values of one name in a row are averaged, as TRL
    averages its own."""

    def __init__(self) -> None:
        self._values: dict[str, list[float]] = {}

    def record(self, name: str, value: float) -> None:
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"metric {name!r}: non-finite value {value!r}")
        self._values.setdefault(name, []).append(value)

    def take(self) -> dict[str, float]:
        """Each metric's mean since the last `take`; the buffer is left empty."""
        means = {k: sum(v) / len(v) for k, v in self._values.items()}
        self._values = {}
        return means


class MetricsLogger:
    """Writes each step's metrics to every sink; `truncate_after` drops records a resumed run will redo."""

    def __init__(self, out_dir: str, *, tensorboard: bool = True, trackers: Sequence[str] = (),
                 run_config: dict[str, Any] | None = None):
        os.makedirs(out_dir, exist_ok=True)
        self.path = os.path.join(out_dir, "metrics.jsonl")
        self.tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(os.path.join(out_dir, "tb"))
        self.trackers: list[Any] = []
        for name in trackers:
            self.trackers.append(_open_tracker(name, out_dir, run_config or {}))

    def truncate_after(self, step: int) -> None:
        """Keep only records with `step <= step` (a resumed run continues from there)."""
        if not os.path.exists(self.path):
            return
        kept = []
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                try:
                    if json.loads(line)["step"] <= step:
                        kept.append(line if line.endswith("\n") else line + "\n")
                except (ValueError, KeyError):
                    continue
        with open(self.path, "w", encoding="utf-8") as f:
            f.writelines(kept)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        record = {"step": step, **{k: float(v) for k, v in metrics.items()}}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
        if self.tb is not None:
            for k, v in metrics.items():
                self.tb.add_scalar(k, float(v), step)
            self.tb.flush()
        for tracker in self.trackers:
            tracker.log(dict(metrics), step=step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        for tracker in self.trackers:
            finish = getattr(tracker, "finish", None)
            if finish:
                finish()


def _open_tracker(name: str, out_dir: str, run_config: dict[str, Any]) -> Any:
    if name == "wandb":
        import wandb

        return wandb.init(project="kernel-agent", dir=out_dir, config=run_config)
    if name == "trackio":
        import trackio

        trackio.init(project="kernel-agent", config=run_config)
        return trackio
    raise ValueError(f"unknown tracker {name!r} (wandb or trackio)")


def read_metrics(out_dir: str) -> list[dict[str, float]]:
    """The records of a run's metrics.jsonl, in order."""
    path = os.path.join(out_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
