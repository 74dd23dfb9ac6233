"""Every candidate call judged alike (DESIGN.md rule 8, `child/call_checks.py`, `timing.write_inputs`): the
op tracer and the kernel-call count see every call, and no call's inputs differ from another's in anything
but their values. End to end through the run child: tests/test_adversarial.py (`shape_fast_path.py`,
`traced_call_by_values.py`, `traced_call_by_mode.py`, `version_skips_timed.py`)."""

from __future__ import annotations

import time

import torch

from kernelbench.harness.child import timing
from kernelbench.harness.child.call_checks import CallChecks
from kernelbench.harness.child.op_policy import judge_ops


class Recorder:
    """A forward that records what it can observe of its input on every call."""

    def __init__(self):
        self.seen: list[tuple[int, int, int, tuple[int, ...], bool, int]] = []

    def __call__(self, x):
        self.seen.append((x.data_ptr(), x._version, x.storage_offset(), x.stride(), x.requires_grad,
                          x.untyped_storage().nbytes()))
        return x * 2


def test_every_call_of_a_measurement_writes_its_inputs_the_same_way():
    """Warm-up, timed, check and verification calls: the version counter rises by exactly one between two calls
    on the same buffer, and offset, strides, grad flag and storage size never change."""
    rec = Recorder()
    sets = [[torch.randn(8, 16)], [torch.randn(8, 16)]]
    m = timing.Measurement(rec, sets, "cpu", lambda *a: None, [(0, 5), (1, 6), (0, 7)])
    m.warm_up(3)
    m.block(6, checks=2)
    m.block(6, checks=1)
    m.verify()
    assert len(rec.seen) == 3 + 12 + 3 + 2
    assert len({s[2:] for s in rec.seen}) == 1
    last: dict[int, int] = {}
    for ptr, version, *_ in rec.seen:
        if ptr in last and version > last[ptr]:  # a block's buffers, or an address freed and reused
            assert version - last[ptr] == 1
        last[ptr] = version
    first_of_block = [v for _, v, *_ in rec.seen if v == 1]
    assert len(first_of_block) >= 3  # warm-up's buffers and each block's start at version 0


def test_check_and_timed_values_come_from_one_function():
    """A check call's inputs are `check_inputs` of its set and seed: the same numbers a timed call on that seed
    gets written into its buffers (`Perturbation.write`, one write per tensor: the version counter rises by
    one, as a `copy_`'s does)."""
    base = [torch.randn(4, 100), torch.arange(3), 5]
    buffers = timing.fresh_buffers(base)
    versions = [b._version for b in buffers[:2]]
    timed = timing.Perturbation(base).write(buffers, 99)
    check = timing.check_inputs(base, 99)
    assert timed[0] is buffers[0] and torch.equal(timed[0], check[0]) and not torch.equal(check[0], base[0])
    assert torch.equal(check[1], base[1]) and check[2] == 5 and timed[2] == 5
    assert [b._version - v for b, v in zip(buffers[:2], versions)] == [1, 1]
    two = [torch.ones(100), torch.ones(100)]  # equal tensors of one set get their own factors
    assert not torch.equal(*timing.check_inputs(two, 7))
    others = [torch.randn(50, dtype=torch.complex64), torch.randn(50).half(), torch.randn(50).bfloat16()]
    written = timing.Perturbation(others).write(timing.fresh_buffers(others), 3)
    for w, c, b in zip(written, timing.check_inputs(others, 3), others):  # complex levels: the same numbers both ways
        assert w.dtype == b.dtype and torch.equal(w, c) and not torch.equal(w, b)


def test_nothing_is_allocated_or_freed_between_a_calls_last_write_and_the_call():
    """A freed temporary runs its deleter: a candidate that replaced the CPU allocator computed each timed call's
    answer there from the freshly written buffer (`tests/adversarial/found_allocator_aten.py`). The profiler's
    memory events (torch's allocators) between each call's last input write (`addcmul` or `copy_`) and the call:
    none (12 of 12 calls had one before the levels' memory came from glibc, `call_inputs._Scratch`)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    def forward(x, y, n):
        with record_function("candidate_forward"):
            return x * 2

    sets = [[torch.randn(64, 256), torch.randn(64, 256), 3], [torch.randn(64, 256), torch.randn(64, 256), 3]]
    m = timing.Measurement(forward, sets, "cpu", lambda *a: None, [(0, 5), (1, 6)])
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        m.warm_up(2)
        m.block(8, checks=2)
        m.verify(leftovers=False)
    events = prof.events()
    writes = [e.time_range.end for e in events if e.name in ("aten::addcmul", "aten::copy_")]
    memory = [e.time_range.start for e in events if e.name == "[memory]"]
    calls = [e.time_range.start for e in events if e.name == "candidate_forward"]
    assert len(calls) == 2 + 8 + 2 + 2 and memory  # the profiler saw allocations (the levels, the outputs)
    for start in calls:
        last_write = max(t for t in writes if t <= start)
        assert [t for t in memory if last_write <= t <= start] == []


def test_op_policy_is_judged_on_every_call():
    """A candidate that runs PyTorch on one call in many (another shape, an unrecognised input) is caught, and
    a call that ran no kernel is caught under both policies."""
    kernels = {"n": 0}

    def kernel_like(x):
        kernels["n"] += 1
        return torch.empty_like(x)

    def forward(x):
        return torch.relu(x) if x.shape[0] == 3 else kernel_like(x)

    checks = CallChecks(lambda: kernels["n"])
    with torch.no_grad():
        for shape in ((8, 4), (8, 4), (3, 4), (8, 4)):
            checks.call(forward, (torch.randn(*shape),))
    assert checks.calls == 4 and "aten.relu.default" in checks.ops()
    assert checks.fewest_kernel_calls == 0
    flags = {v.flag for v in judge_ops(checks.ops(), "strict", checks.fewest_kernel_calls)}
    assert flags == {"dynamic:torch_compute_op", "dynamic:kernel_not_called"}
    assert {v.flag for v in judge_ops(checks.ops(), "partial", checks.fewest_kernel_calls)} == {"dynamic:kernel_not_called"}


def test_untraced_calls_are_still_counted():
    """`partial` runs trace nothing (no op is judged) but count every call's kernels."""
    checks = CallChecks(lambda: 0, trace=False)
    checks.call(torch.relu, (torch.randn(4),))
    assert checks.ops() == [] and checks.fewest_kernel_calls == 0 and checks.calls == 1


def test_tracing_a_strict_call_costs_microseconds():
    """The price of tracing every timed call: a call that dispatches what a C++ kernel's wrapper does (an
    allocation) costs tens of microseconds more traced, not milliseconds (built-in tasks' calls take 1-10 ms
    at the CPU size). Generous bound: the host is shared."""
    x = torch.randn(64, 1024)
    checks = CallChecks(lambda: 1)

    def strict_like(t):
        return torch.empty_like(t.contiguous())

    def per_call_s(fn, n=2000):
        for _ in range(100):
            fn()
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            best = min(best, (time.perf_counter() - t0) / n)
        return best

    with torch.no_grad():
        plain = per_call_s(lambda: strict_like(x))
        traced = per_call_s(lambda: checks.call(strict_like, (x,)))
    assert traced - plain < 300e-6, f"tracing costs {1e6 * (traced - plain):.0f} us per call"


def test_op_windows_are_per_thread_bounded_and_skip_subclasses():
    """`CallTracer.windows`: one (thread id, start, end, bytes written) per op dispatched on the calling thread,
    none for an op on a tensor subclass (its `__torch_dispatch__` is candidate code), none past
    `MAX_OP_WINDOWS`."""
    import threading

    from torch.testing._internal.two_tensor import TwoTensor

    from kernelbench.harness.child.call_checks import CallTracer

    tracer = CallTracer()
    tracer.MAX_OP_WINDOWS = 6
    with tracer:
        x = torch.empty(64)
        x.fill_(1.0)
        pair = TwoTensor(torch.ones(2), torch.ones(2))
        before = len(tracer.windows)
        pair.fill_(0.0)
        assert len(tracer.windows) == before  # the subclass's op: no window
    assert before == 4 and all(t == threading.get_native_id() and a <= b for t, a, b, _ in tracer.windows)
    # the bytes each op wrote: none for the allocation, the fill's 64 floats, the two `ones` (a fill each)
    assert [w[3] for w in tracer.windows] == [0, 256, 8, 8], tracer.windows
    assert "aten.fill_.Scalar" in {str(f) for f in tracer.seen}
    with tracer:
        for _ in range(10):
            x.fill_(2.0)
    assert len(tracer.windows) == 6


def test_a_kernel_registered_over_an_input_write_op_changes_the_dispatch_tables():
    """The dispatcher tables the run child compares after every phase cover the ops that write the calls' inputs
    (`call_checks.INPUT_WRITE_OPS`), not only those a candidate may call: a kernel over `aten::addcmul.out` would
    run inside the last write before every call."""
    from kernelbench.harness.child.call_checks import DispatchTables

    tables = DispatchTables()
    assert "aten::addcmul.out" in tables.names and "aten::copy_" in tables.names and tables.changed() == []
    lib = torch.library.Library("aten", "IMPL")
    try:
        lib.impl("addcmul.out", lambda *args, **kwargs: None, "CPU")
        assert tables.changed() == ["the dispatcher's kernels for aten::addcmul.out"]
    finally:
        lib._destroy()
    assert tables.changed() == []
