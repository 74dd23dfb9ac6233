"""The files the reference child leaves in its scratch folder for the parent: its report (`RESULT_FILE`) and, in
paired timing, the judged check calls' outputs and digests (`CHECKS_FILE`, `check_file`). Both ends name them
here, so the parent never imports the child's entry point. Only the reference child writes files the parent
reads: it runs trusted task code alone; children that run candidate code report over the parent's pipe."""

from __future__ import annotations

import json
import os

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
