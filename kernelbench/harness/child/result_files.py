"""The files the reference child leaves in its scratch folder for the parent: its report (`RESULT_FILE`) and, in
paired timing, the judged check calls' outputs and digests (`CHECKS_FILE`, `check_file`). Both ends name them
here, so the parent never imports the child's entry point. Only the reference child writes files the parent
reads: it runs trusted task code alone; children that run candidate code report over the parent's pipe."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from kernelbench.harness import protocol

RESULT_FILE = "result.json"
MAX_RESULT_BYTES = 4 * 1024 * 1024


def read_result(scratch: str, nonce: str) -> protocol.ReferenceReport | None:
    """The reference child's result.json, or None when it is missing, oversized, not JSON or carries the wrong
    nonce; a report that is not exactly a `protocol.ReferenceReport` raises (`ProtocolError`: the harness's bug).

    For the reference only: no candidate code ever runs in that child (it imports the task's module, never a
    candidate's), and its scratch folder is out of every candidate's reach while the parent reads it: the
    run child of the same slot starts only after the parent has read it (one after the other), and in paired
    timing the reference runs as a second slot's uid in a 0700 folder (and, under bubblewrap, outside the
    candidate's private /tmp). Children that run candidate code report over the parent's pipe instead."""
    path = os.path.join(scratch, RESULT_FILE)
    try:
        if os.path.getsize(path) > MAX_RESULT_BYTES:
            return None
        with open(path) as f:
            result = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(result, dict) or result.get("nonce") != nonce:
        return None
    return protocol.ReferenceReport.from_dict(result)


CHECKS_FILE = "checks.pt"
"""Paired timing: the file in which the reference child leaves the count and input digests of the check calls the
parent judges, written after its blocks (`_judged_checks`, read by `kernelbench.harness.reference.reference_from`);
each one's outputs are in its `check_file`."""


def check_file(scratch: str, j: int) -> str:
    """Paired timing: where the reference child leaves the outputs of check call `j` of the pool (`CHECKS_FILE`)."""
    return f"{scratch}/check-{int(j)}.pt"


INPUTS_FILE = "inputs.pt"
"""The reference child's inputs (`SavedInputs`' fields, saved as a plain dict of tensors by `torch.save`): the parent
keeps them, and each run child reads a copy."""


@dataclass(frozen=True)
class SavedInputs:
    """The parent's reading of `INPUTS_FILE`: exactly these keys, or a harness error (`from_saved`)."""

    init_inputs: list[Any]
    """The task's `get_init_inputs()` under the evaluation's init seed."""
    sets: list[list[Any]]
    """The correctness input sets, in order."""
    timing_sets: list[list[Any]]
    """The timing base sets (empty when not timed)."""
    state_dict: dict[str, Any] | None
    """The reference's weights on the CPU, for a task declaring `KEEP_STATE_DICT`; None otherwise."""

    @classmethod
    def from_saved(cls, saved: Any) -> "SavedInputs":
        keys = ("init_inputs", "sets", "timing_sets", "state_dict")
        if not isinstance(saved, dict) or sorted(saved) != sorted(keys):
            got = sorted(saved) if isinstance(saved, dict) else type(saved).__name__
            raise protocol.ProtocolError(f"{INPUTS_FILE}: expected the keys {list(keys)}, got {got}")
        return cls(**{k: saved[k] for k in keys})
