"""One reference per group (`kernelbench.harness.reference_cache`, `kernelbench.executors.groups`).

End to end through `Evaluator`, with real compiles and sandboxed children: within a group the reference
child runs once off paired timing and every candidate is judged as alone (an honest one correct, a wrong one
and one that returns a cached output incorrect); groups get seeds of their own; a candidate that searches
for the group's reference finds nothing, under bubblewrap and in the plain fallback. Then the cache and the
tickets alone, in-process: one computation under concurrency, failures never kept, the bounds.

The candidates differ only in Python and share the adversarial suite's C++ library (`adv_kernels`): one
build for the whole file, in a cache folder other uids may traverse (the plain child drops to a slot's uid
only where it can reach the build).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from kernelbench.executors.evaluator import Evaluator
from kernelbench.executors.groups import Groups
from kernelbench.harness import reference, reference_cache
from kernelbench.harness.child.result_files import SavedInputs
from kernelbench.harness.isolation import bwrap, process_tree, sandbox
from kernelbench.harness.build.build_tree import remove_tree
from kernelbench.tasks.inputs import Seeds
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.reference_cache import Held, ReferenceCache
from kernelbench.harness.result import CORRECT, INCORRECT, EvalResult
from kernelbench.harness.isolation.slots import SLOT_UID_BASE
from kernelbench.harness.staged import Staged
from tests.test_adversarial import TASKS, source

RELU = TASKS["relu"]  # signed inputs: a copy of the input is wrong
LIBRARY = source("copies_reference.py").split("class PastedReference")[0]
HONEST = LIBRARY + '''
class ModelNew(nn.Module):
    def forward(self, x):
        return decoy_ext.relu_forward(x)
'''
WRONG = HONEST.replace("relu_forward(x)", "copy_forward(x)")
CACHED = LIBRARY + '''
class ModelNew(nn.Module):
    """The first call's output, returned for every later call (a copy each time, by the kernel)."""

    def __init__(self):
        super().__init__()
        self.first = None

    def forward(self, x):
        if self.first is None:
            self.first = decoy_ext.relu_forward(x)
        return decoy_ext.copy_forward(self.first)
'''
SEARCHER = source("searches_group_reference.py")


@pytest.fixture(scope="module")
def cfg():
    """Sequential timing (no pairing): the reference is shared; a cache folder any uid may traverse."""
    cache = tempfile.mkdtemp(prefix="ka-test-groups-")
    os.chmod(cache, 0o755)
    yield EvalConfig(device="cpu", size="cpu", build_cache_dir=cache, timing_trials=20, timing_rounds=0,
                     run_timeout_s=60.0, static_checks=False)
    remove_tree(cache)


@pytest.fixture
def reference_children(monkeypatch) -> list[str]:
    """The task id of every reference child started (`reference.run_reference`, which starts it)."""
    started: list[str] = []
    real = reference.run_reference

    def counted(task, *args, **kwargs):
        started.append(task.id)
        return real(task, *args, **kwargs)

    monkeypatch.setattr(reference, "run_reference", counted)
    return started


def describe(r: EvalResult) -> str:
    return f"status={r.status} flags={r.flags}\n{r.feedback}"


def test_a_group_runs_one_reference_and_judges_each_candidate(cfg, reference_children):
    with Evaluator(cfg, compile_workers=1, run_workers=2) as ev:
        ev.submit(RELU, HONEST).result()  # the build, outside the group (its own reference)
        reference_children.clear()
        futures = [ev.submit(RELU, src, group="step0/relu") for src in (HONEST, WRONG, CACHED, HONEST)]
        honest, wrong, cached, honest2 = [f.result() for f in futures]
        assert len(ev.references) == 0 and ev.groups.open_tickets() == 0, "a finished group keeps nothing"
    assert reference_children == [RELU.id], "one reference child for the whole group"
    assert honest.status == CORRECT and honest2.status == CORRECT, describe(honest) + describe(honest2)
    assert honest.speedup > 0 and honest.ref_runtime_ms == honest2.ref_runtime_ms > 0
    assert wrong.status == INCORRECT and "outside atol" in wrong.feedback, describe(wrong)
    assert cached.status == INCORRECT and "outside atol" in cached.feedback, describe(cached)
    seeds = {(r.conditions.init_seed, r.conditions.input_seeds) for r in (honest, wrong, cached, honest2)}
    assert len(seeds) == 1, "a group is judged on one seed set"


def test_under_paired_timing_a_group_shares_its_outputs_and_each_keeps_its_timing(cfg, reference_children):
    """CPU default: one untimed child computes the group's inputs and outputs; each candidate's reference child
    still times beside it in alternating blocks, on the group's inputs."""
    paired_cfg = replace(cfg, timing_rounds=4)
    with Evaluator(paired_cfg, compile_workers=1, run_workers=1) as ev:
        futures = [ev.submit(RELU, src, group="step0/paired") for src in (HONEST, WRONG, CACHED, HONEST)]
        honest, wrong, cached, honest2 = [f.result() for f in futures]
    assert reference_children == [RELU.id]
    for r in (honest, honest2):
        assert r.status == CORRECT and r.speedup > 0 and r.conditions.timing_rounds == 4, describe(r)
    assert honest.ref_runtime_ms != honest2.ref_runtime_ms, "each candidate's reference timed beside it"
    assert wrong.status == INCORRECT and "outside atol" in wrong.feedback, describe(wrong)
    assert cached.status == INCORRECT and "outside atol" in cached.feedback, describe(cached)
    assert len({(r.conditions.init_seed, r.conditions.input_seeds) for r in (honest, wrong, cached, honest2)}) == 1


def test_groups_and_ungrouped_candidates_get_seeds_of_their_own(cfg, reference_children):
    with Evaluator(cfg, compile_workers=1, run_workers=1) as ev:
        plan = [("a", HONEST), ("b", HONEST), ("a", WRONG), ("", HONEST), ("", HONEST)]
        results = [f.result() for f in [ev.submit(RELU, src, group=g) for g, src in plan]]
        # group `a` was back before this submission: a new generation, with new seeds
        late = ev.submit(RELU, HONEST, group="a").result()
    seeds = [(r.conditions.init_seed, r.conditions.input_seeds) for r in results + [late]]
    assert seeds[0] == seeds[2], "one group, one seed set"
    assert len({seeds[0], seeds[1], seeds[3], seeds[4], seeds[5]}) == 5, "every other evaluation draws its own"
    assert len(reference_children) == 5
    assert [r.status for r in results + [late]] == [CORRECT, CORRECT, INCORRECT, CORRECT, CORRECT, CORRECT]


@pytest.mark.parametrize("kind,rounds", [("bwrap", 0), ("bwrap", 4), ("plain", 0)])
def test_a_candidate_finds_nothing_of_its_groups_reference(cfg, reference_children, kind, rounds, monkeypatch):
    """The searcher runs after an honest candidate of its group, so the group's reference exists (in the
    parent's folder) all along, and again beside it; timed one after the other, and paired."""
    if kind == "bwrap" and not bwrap.find_bwrap():
        pytest.skip("bubblewrap unusable here")
    if kind == "plain":
        if os.geteuid() != 0 or not process_tree.reachable_by(sys.executable, SLOT_UID_BASE):
            pytest.skip("the plain child keeps the harness's uid here (it cannot drop to a slot's uid and still "
                        "reach the interpreter): it can read what the harness can")
        monkeypatch.setattr(bwrap, "find_bwrap", lambda: "")
    with Evaluator(replace(cfg, timing_rounds=rounds), compile_workers=1, run_workers=2) as ev:
        first = ev.submit(RELU, HONEST, group=f"look/{kind}")
        searchers = [ev.submit(RELU, SEARCHER, group=f"look/{kind}") for _ in range(2)]
        results = [first.result()] + [f.result() for f in searchers]
    assert len(reference_children) == 1
    for r in results:
        assert r.status == CORRECT and "found the reference" not in r.feedback, describe(r)
        assert r.conditions.sandbox == ("bwrap" if kind == "bwrap" else "rlimits")


def test_a_computed_reference_keeps_its_inputs_alone_out_of_the_slots_reach(cfg):
    """What the plain fallback relies on (no private /tmp there): the folder a group's reference lives in,
    once its child is done, holds `inputs.pt` alone, owned by the harness's uid, mode 0700."""
    with sandbox.SlotLease() as slot:
        held = reference_cache.compute(Staged(RELU, "", cfg, None), slot)
    try:
        st = os.stat(held.inputs_dir)
        assert os.listdir(held.inputs_dir) == ["inputs.pt"]
        assert st.st_uid == os.geteuid() and st.st_mode & 0o777 == 0o700
        assert os.stat(os.path.join(held.inputs_dir, "inputs.pt")).st_uid == os.geteuid()
        assert held.ref.outputs and len(held.seeds.input_seeds) == cfg.correctness_trials
    finally:
        remove_tree(held.inputs_dir)


# --- the cache and the tickets alone (no child) --------------------------------------------------------

def _staged(**config) -> Staged:
    return Staged(RELU, "", EvalConfig(**config), None)


@pytest.fixture
def fake_children(monkeypatch, tmp_path):
    """`reference_cache.compute` without a child: a folder with an inputs file of `size` bytes, after `delay_s`."""
    state = {"calls": 0, "fail": False, "delay_s": 0.0, "size": 100}

    def compute(staged, slot):
        state["calls"] += 1
        time.sleep(state["delay_s"])
        if state["fail"]:
            raise reference.HarnessError("the task's reference failed")
        folder = tempfile.mkdtemp(dir=tmp_path)
        Path(folder, "inputs.pt").write_bytes(b"\0" * state["size"])
        ref = reference.Reference(None, None, [], SavedInputs([], [], [], None), [])
        return Held(ref, Seeds(state["calls"], (1,), ()), folder)

    monkeypatch.setattr(reference_cache, "compute", compute)
    return state


def _hold(cache: ReferenceCache, ticket: str, staged: Staged | None = None) -> Held:
    with cache.hold(ticket, staged or _staged(), None) as held:
        return held


def test_concurrent_candidates_wait_for_one_computation(fake_children):
    cache, got = ReferenceCache(), []
    fake_children["delay_s"] = 0.3

    def run():
        with cache.hold("g#1", _staged(), None) as held:
            got.append(held.seeds)

    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake_children["calls"] == 1 and len(set(got)) == 1 and len(got) == 6
    assert _hold(cache, "g#1", _staged(timing_trials=7)).seeds != got[0], "another configuration: its own"
    assert _hold(cache, "g#2").seeds != got[0], "another ticket: its own"


def test_a_failed_reference_fails_each_waiter_and_is_never_kept(fake_children):
    cache, errors = ReferenceCache(), []
    fake_children.update(fail=True, delay_s=0.2)

    def run():
        try:
            _hold(cache, "g#1")
        except reference.HarnessError as e:
            errors.append(str(e))

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake_children["calls"] == 1 and len(errors) == 3 and len(cache) == 0
    fake_children["fail"] = False
    assert _hold(cache, "g#1").seeds.init_seed == 2 and len(cache) == 1, "computed again, then kept"


def test_the_cache_is_bounded_and_frees_folders(fake_children):
    cache = ReferenceCache(max_entries=2, max_bytes=1000, idle_s=0.2)
    a = _hold(cache, "a#1")
    _hold(cache, "b#1")
    _hold(cache, "c#1")
    assert len(cache) == 2 and not os.path.exists(a.inputs_dir), "the least recently used went, folder and all"
    fake_children["size"] = 5000
    big = _hold(cache, "d#1")
    assert len(cache) == 2 and not os.path.exists(big.inputs_dir), "over the byte bound alone: served, not kept"
    fake_children["size"] = 100
    with cache.hold("e#1", _staged(), None) as held:
        cache.drop("e#1")
        assert os.path.exists(held.inputs_dir), "a dropped reference stays while a candidate uses it"
    assert not os.path.exists(held.inputs_dir)
    time.sleep(0.3)
    _hold(cache, "f#1")
    assert len(cache) == 1, "idle past idle_s: freed"
    cache.clear()
    assert len(cache) == 0


def test_a_group_closes_when_a_judged_result_is_back():
    done: list[str] = []
    groups = Groups(done.append)
    first, second = groups.join("g"), groups.join("g")
    assert first == second and groups.join("") == ""
    groups.back(first, judged=False)  # a format error saw no seed: the group stays open
    third = groups.join("g")
    assert third == first
    groups.back(first, judged=True)
    assert groups.join("g") != first, "a candidate after a judged result never joins those seeds"
    groups.back(first, judged=True)
    assert done == [first]
