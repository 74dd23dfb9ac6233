"""One reference computation per group of candidates: the reference child's record kept in the parent and
served to every candidate of the group (DESIGN.md rule 11).

GRPO evaluates a group of candidates of one task at once (Kevin-32B: 16 per task and step), and each
evaluation used to draw its own seeds and run the same reference again. Candidates submitted together under
one group name (`Evaluator.submit(..., group=)`) now share one seed set and one reference child per task and
configuration: the first to reach its run stage computes it, the others wait for it, and every one is judged
against the same `Reference`.

Where it applies: timing one side after the other (CUDA, or CPU with `timing_rounds=0`), the whole
`Reference` (outputs, timing, inputs, profile) is computed once and reused. Paired timing (CPU) keeps a
reference child per candidate, alive beside it and timed in alternating blocks, so the reference's timing stays
the candidate's own; what the group shares there is what does not take part in the alternation: one child
computes the group's inputs and expected outputs untimed (`ReferenceJob.part` `outputs`), and each candidate's
paired reference child loads those inputs and only times (part `timing`), so it is ready for the first block
sooner (docs/harness.md, "One reference per group", has the figures).

What stays out of a candidate's reach (`Held`): the reference's outputs and seeds live in this process only;
after the reference child ends, its folder keeps `inputs.pt` alone (each run child gets a copy of it, as
before) and belongs to the parent's uid with mode 0700, so no slot's uid can read it, sandboxed or not.

Bounds (`ReferenceCache`): the references of a group are freed when its evaluator says the group is done;
besides, at most `max_entries` references, `max_bytes` of tensors and files together (the least recently used
go first; one larger than the bound serves the candidates waiting for it and is not kept), none idle past
`idle_s`. A reference child that fails is a `HarnessError` for every candidate that waited for it and is
never kept: the next candidate computes it again.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelbench.harness import children, reference
from kernelbench.harness.build.build_tree import remove_tree
from kernelbench.harness.child.result_files import INPUTS_FILE
from kernelbench.harness.isolation import sandbox
from kernelbench.harness.reference import HarnessError, Reference
from kernelbench.harness.staged import Staged
from kernelbench.tasks.inputs import draw_seeds, Seeds

MAX_ENTRIES = 32
"""References kept at once: a GRPO step of 8 tasks holds 8 groups; the rest is slack for the next step."""
MAX_BYTES = 4 << 30
"""Tensors (inputs, outputs, check and timing outputs) and inputs files of every kept reference together. An
8 MB elementwise task's reference is ~0.4 GB (its 40 hidden check calls' outputs dominate); a reference over
the bound is computed for the candidates waiting for it and not kept."""
IDLE_S = 600.0
"""A reference no candidate used for this long is freed (a group whose end was never announced)."""


@dataclass(frozen=True)
class Held:
    """A computed reference as the run stage uses it: its record, its seeds, and the folder holding only its
    `inputs.pt` (parent-only; each run child gets a copy)."""

    ref: Reference
    seeds: Seeds
    inputs_dir: str


@dataclass(frozen=True)
class Share:
    """The run stage's word to share: the cache, and the ticket of the candidate's group (its name and the
    generation it was submitted in, `kernelbench.executors.groups`)."""

    cache: "ReferenceCache"
    ticket: str


def compute(staged: Staged, slot: sandbox.SlotLease) -> Held:
    """Fresh seeds and the reference child, run as `slot`'s uid; its folder then keeps `inputs.pt` alone,
    owned by this process's uid (the slot's uid runs the candidate next)."""
    config = staged.config
    seeds = draw_seeds(config.correctness_trials, config.extra_distribution_trials,
                       config.timing_input_sets if config.timing_trials > 0 else 0)
    scratch = sandbox.make_scratch(slot.uid, prefix="ka-ref-")
    try:
        # paired timing's reference child times beside each candidate: here its inputs and outputs, untimed
        part = "outputs" if children.paired(config) else "all"
        ref = reference.run_reference(staged.task, config, seeds, slot, scratch, part)
        # the child and every process of its uid are dead (`run_child`): nothing writes here any more
        if slot.uid >= 0:
            sandbox.give_tree(scratch, os.geteuid())
        os.chmod(scratch, 0o700)
        for name in os.listdir(scratch):
            if name != INPUTS_FILE:
                remove_tree(os.path.join(scratch, name))
        return Held(ref, seeds, scratch)
    except BaseException:
        remove_tree(scratch)
        raise


@contextmanager
def held(staged: Staged, slot: sandbox.SlotLease, share: Share | None) -> Iterator[Held]:
    """The reference a candidate is judged against: its group's (`share`), or its own, freed afterwards."""
    if share is not None and share.ticket:
        with share.cache.hold(share.ticket, staged, slot) as h:
            yield h
        return
    own = compute(staged, slot)
    try:
        yield own
    finally:
        remove_tree(own.inputs_dir)


@dataclass(eq=False)
class _Entry:
    done: threading.Event = field(default_factory=threading.Event)
    held: Held | None = None
    error: str = ""
    users: int = 0
    nbytes: int = 0
    last_used: float = 0.0
    kept: bool = True
    """False once evicted: its folder goes when its last user lets go."""


class ReferenceCache:
    """References by (ticket, task, configuration); thread-safe; one computation per key at a time."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES, idle_s: float = IDLE_S):
        if max_entries < 1 or max_bytes < 0 or idle_s <= 0:
            raise ValueError("max_entries must be >= 1, max_bytes >= 0 and idle_s > 0")
        self.max_entries, self.max_bytes, self.idle_s = max_entries, max_bytes, idle_s
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._lock = threading.Lock()
        self.computed = 0
        """Reference children run for the cache (a figure for benchmarks and tests)."""

    @contextmanager
    def hold(self, ticket: str, staged: Staged, slot: sandbox.SlotLease) -> Iterator[Held]:
        """The group's reference for `staged`'s task and configuration: computed here as `slot`'s uid when
        nobody has it, waited for while another candidate computes it, else the kept one."""
        key = (ticket, _fingerprint(staged))
        with self._lock:
            self._expire(time.monotonic())
            entry = self._entries.get(key)
            first = entry is None
            if first:
                entry = self._entries[key] = _Entry()
            entry.users += 1
        try:
            if first:
                self._fill(key, entry, staged, slot)
            else:
                entry.done.wait()  # bounded: the computing reference child has its own time limit
            if entry.held is None:
                raise HarnessError(f"the group's reference failed: {entry.error}")
            yield entry.held
        finally:
            with self._lock:
                entry.users -= 1
                entry.last_used = time.monotonic()
                self._free_if_unused(entry)

    def _fill(self, key: tuple[str, str], entry: _Entry, staged: Staged, slot: sandbox.SlotLease) -> None:
        try:
            computed = compute(staged, slot)
        except BaseException as e:
            with self._lock:
                entry.error = f"{type(e).__name__}: {e}"[:1500]
                self._evict(key, entry)  # never kept: the next candidate computes it again
            entry.done.set()
            raise
        with self._lock:
            self.computed += 1
            entry.held, entry.nbytes = computed, _nbytes(computed)
            entry.last_used = time.monotonic()
            self._bound(key)
        entry.done.set()

    def drop(self, ticket: str) -> None:
        """The group of `ticket` is done: free its references (each once its last user lets go)."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == ticket]:
                self._evict(key, self._entries[key])

    def clear(self) -> None:
        with self._lock:
            for key in list(self._entries):
                self._evict(key, self._entries[key])

    def __len__(self) -> int:
        with self._lock:
            return sum(1 for e in self._entries.values() if e.held is not None)

    # -- under the lock --------------------------------------------------------------------------------

    def _bound(self, newest: tuple[str, str]) -> None:
        """One over the byte bound alone is not kept (the others stay); else the least recently used go."""
        entry = self._entries.get(newest)
        if entry is not None and entry.nbytes > self.max_bytes:
            self._evict(newest, entry)
            return
        older = sorted((k for k, e in self._entries.items() if e.done.is_set() and k != newest),
                       key=lambda k: self._entries[k].last_used)
        total = sum(e.nbytes for e in self._entries.values())
        count = len(self._entries)
        for key in older:
            if total <= self.max_bytes and count <= self.max_entries:
                break
            total -= self._entries[key].nbytes
            count -= 1
            self._evict(key, self._entries[key])

    def _expire(self, now: float) -> None:
        for key, entry in list(self._entries.items()):
            if entry.done.is_set() and entry.users == 0 and now - entry.last_used > self.idle_s:
                self._evict(key, entry)

    def _evict(self, key: tuple[str, str], entry: _Entry) -> None:
        if self._entries.get(key) is entry:
            del self._entries[key]
        entry.kept = False
        self._free_if_unused(entry)

    def _free_if_unused(self, entry: _Entry) -> None:
        if not entry.kept and entry.users == 0 and entry.held is not None:
            remove_tree(entry.held.inputs_dir)
            entry.held = None  # the tensors go with the last reference to the entry


def _fingerprint(staged: Staged) -> str:
    """Candidates share a reference only under the same task and the same configuration, every field of both."""
    return hashlib.sha256(f"{staged.task!r}\n{staged.config!r}".encode()).hexdigest()


def _nbytes(h: Held) -> int:
    size = os.path.getsize(os.path.join(h.inputs_dir, INPUTS_FILE))
    return size + sum(_tensor_bytes(x) for x in (h.ref.inputs.sets, h.ref.inputs.timing_sets, h.ref.inputs.init_inputs,
                                                  h.ref.inputs.state_dict, h.ref.outputs, h.ref.check_outputs,
                                                  h.ref.timing_outputs))


def _tensor_bytes(x: Any) -> int:
    if isinstance(x, torch.Tensor):
        return x.untyped_storage().nbytes()
    if isinstance(x, dict):
        return sum(_tensor_bytes(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return sum(_tensor_bytes(v) for v in x)
    return 0
