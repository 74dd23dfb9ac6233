"""Deriving CPU sizes for KernelBench-format problems: the parent side.

Hands a batch of problems to kernelbench/sizes/size_probe.py's server inside the sandbox (bubblewrap when it
works, else a plain child with rlimits; kernelbench/harness/isolation/sandbox.py), which answers one `CpuSizeRecord` per
problem. Nothing of a problem runs in this process. Used by scripts/kernelbench_cpu_sizes.py and the tests.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from kernelbench.harness.isolation import sandbox
from kernelbench.sizes import size_probe
from kernelbench.tasks.cpu_size_records import CpuSizeRecord, record_key, source_sha
from kernelbench.tasks.task import Task

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(frozen=True)
class DeriveConfig:
    """Limits of one derivation run."""

    task_timeout_s: float = 240.0
    """Wall-clock deadline of one problem's search (a loaded machine runs it several times slower)."""
    cpu_s: int = 120
    """CPU seconds one problem's search may use (RLIMIT_CPU)."""
    memory_mb: int = 3072
    """Address space one problem's search may add to the interpreter's own (RLIMIT_AS)."""
    startup_s: float = 180.0
    """Allowance for the server's start (importing torch takes 15 s on a loaded machine)."""


def _argv(scratch: str) -> tuple[str, ...]:
    boot = (f"import sys; sys.path.insert(0, {PROJECT_ROOT!r}); from kernelbench.sizes.size_probe import main; "
            f"sys.exit(main([{scratch!r}]))")
    return (sys.executable, "-I", "-c", boot)


def derive(tasks: list[Task], config: DeriveConfig = DeriveConfig(),
           recorded: dict[str, CpuSizeRecord] | None = None) -> dict[str, CpuSizeRecord]:
    """A record per task (keyed like `record_key`, e.g. `kb:L1/19_ReLU`), from one sandboxed server run.
    With `recorded`, a task whose record is there (and has a size) is only re-timed at that size. A task
    the server never answered (it was killed) comes back `unscalable` with the reason."""

    if not tasks:
        return {}
    recorded = recorded or {}
    nonce = secrets.token_hex(8)
    items = []
    for t in tasks:
        key = record_key(t) or t.id
        old = recorded.get(key)
        items.append({"id": key, "source": t.source, "filename": t.path or t.id,
                      "overrides": old.overrides if old is not None else None})
    job = {"nonce": nonce, "task_timeout_s": config.task_timeout_s, "cpu_s": config.cpu_s,
           "memory_mb": config.memory_mb, "tasks": items}
    with sandbox.SlotLease() as slot:
        scratch = sandbox.make_scratch(slot.uid, prefix="ka-sizes-")
        try:
            Path(scratch, "job.json").write_text(json.dumps(job))
            sandbox.give_tree(scratch, slot.uid)
            limits = sandbox.Limits(timeout_s=config.startup_s + config.task_timeout_s * len(tasks), memory_limit_mb=0,
                                    max_processes=64)
            spec = sandbox.ChildSpec(argv=_argv(scratch), scratch_dir=scratch, limits=limits,
                                     env=(("OMP_NUM_THREADS", "1"),))
            outcome = sandbox.run_child(spec, slot)
            answers = _read(scratch, nonce)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    out = {}
    for item, task in zip(job["tasks"], tasks):
        answer = answers.get(item["id"])
        if not isinstance(answer, dict):
            why = "timed out" if outcome.timed_out else f"exit status {outcome.returncode}"
            answer = {"status": "unscalable", "overrides": None,
                      "reason": f"the derivation server stopped before this problem ({why}): {outcome.stderr_tail[-300:]}"}
        record = _record(item["id"], task, answer)
        old = recorded.get(item["id"])
        if old is not None and record.overrides is not None:  # a re-timing keeps how the size was found
            reason = old.reason if record.status == old.status else (
                f"{record.cpu_ms:.2f} ms when re-timed" + (f"; {old.reason}" if old.reason else ""))
            record = CpuSizeRecord(**{**old.to_dict(), "status": record.status, "cpu_ms": record.cpu_ms,
                                      "wall_ms": record.wall_ms, "reason": reason})
        out[item["id"]] = record
    return out


def _read(scratch: str, nonce: str) -> dict:
    try:
        data = json.loads(Path(scratch, size_probe.RESULT_FILE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("nonce") != nonce or not isinstance(data.get("results"), dict):
        return {}
    return data["results"]


def _record(key: str, task: Task, answer: dict) -> CpuSizeRecord:
    """The server's answer as a record; values of the wrong type are refused (the answer crossed from a
    process that ran problem code)."""
    overrides = answer.get("overrides")
    if overrides is not None and not isinstance(overrides, dict):
        overrides = None
    status = answer.get("status") if answer.get("status") in ("sized", "fast", "slow", "unscalable") else "unscalable"
    if overrides is None:
        status = "unscalable"
    number = lambda v: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0  # noqa: E731
    frozen = answer.get("frozen") if isinstance(answer.get("frozen"), list) else []
    return CpuSizeRecord(task_id=key, source_sha256=source_sha(task.source), status=status, overrides=overrides,
                         cpu_ms=number(answer.get("cpu_ms")), wall_ms=number(answer.get("wall_ms")),
                         reason=str(answer.get("reason", ""))[:400], alpha=number(answer.get("alpha", 1.0)),
                         frozen=[str(f) for f in frozen])


def to_derive(tasks: list[Task], records: dict[str, CpuSizeRecord], rederive: bool = False) -> tuple[list[Task], list[str]]:
    """The tasks a derivation run must (re)derive, and a message for each one whose text changed since its
    record: no record, a stale hash (the record is for another text), or all of them with `rederive`."""

    todo, messages = [], []
    for t in tasks:
        key = record_key(t) or t.id
        r = records.get(key)
        stale = r is not None and r.source_sha256 != source_sha(t.source)
        if stale:
            messages.append(f"{key}: the problem changed since its size was derived (hash {r.source_sha256}, now "
                            f"{source_sha(t.source)}): deriving again")
        if rederive or r is None or stale:
            todo.append(t)
    return todo, messages
