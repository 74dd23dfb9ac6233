"""The one road of every candidate call: the op tracer and the kernel-call count active on each of them.

DESIGN.md rule 8: a check holds on every call, or on calls no candidate can single out. The op policy used to
be judged on one traced forward (the first correctness set): a candidate that recognised that call (its values
repeated the first correctness call's, a dispatch mode was on the stack, the shape was the first
configuration's) ran its kernel there and PyTorch everywhere else, and was judged `correct` under `strict`.
Here every call the run child makes into the candidate (correctness calls of every input configuration, the
Triton compile calls, warm-up, timed trials, hidden check calls, the verification round) goes through
`CallChecks.call`: the tracer is entered around it and the kernel calls it made are counted, so the policy is
judged on the union of every call's ops and on the call with the fewest kernel calls.

Why: no call is special, so there is nothing to single out; the tracer being visible from inside the call (a
dispatch mode on the stack) says nothing either, since it is there on every call.
Covers: a PyTorch compute op on any one call of any configuration (`dynamic:torch_compute_op`), a call that ran
no custom kernel (`dynamic:kernel_not_called`, both policies).
Not covered: ATen reached around the dispatcher, or a candidate that turns Python dispatch off inside its
call (`torch._C._DisableTorchDispatch`, a C++ guard): the static checks reject the spellings; the structural
check of which code ran is the code sampler's.
Cost: entering and leaving the mode, one Python frame per dispatched op (a strict candidate dispatches a few:
allocation, views) and a set insertion per op; measured in tests/test_op_policy.py and docs/harness.md. The
time is inside the timed window, so it counts against the candidate only, and only by a few microseconds.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelbench.harness.child import op_policy

_NOW, _TID = time.monotonic_ns, threading.get_native_id


class CallTracer(TorchDispatchMode):
    """Records the distinct ATen overloads dispatched while active, over any number of entries. A set of the
    overload objects (not their names): a call that repeats one op many times pays a set lookup per op.

    It also records each dispatched op's (thread id, CLOCK_MONOTONIC start, end, bytes it wrote) in `windows`:
    the time the calling thread spent inside PyTorch's own kernels at the candidate's request, and the data that
    time was for (`written_bytes`: a fill's or copy's output; 0 for views, metadata, `set_` and allocation, whose
    time does not grow with size). The check of which code ran
    (`code_attribution`) charges samples there to the op, not to the candidate: under `strict` every op the
    tracer saw is one the policy allows (any other rejects the candidate), and an allowed fill or layout copy
    runs in libtorch_cpu like any compute would (an honest kernel's `torch::zeros_like` output measured 27-31 %
    of the samples of a small ReLU). Ops that other threads dispatch are not traced (the mode is thread-local)
    and get no window: their time stays the candidate's; nor does an op on a tensor subclass (`types` not
    empty), whose `__torch_dispatch__` is the candidate's Python. At most `MAX_OP_WINDOWS` are kept (they travel
    in the report, whose size is bounded): ops past that get none, so their time stays the candidate's."""

    MAX_OP_WINDOWS = 200_000
    """About 8 MB in the report; a strict call dispatches a few ops, so only a candidate making thousands of
    views or copies per call over a long run reaches it."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # see op_policy.OpTracer: nothing compiles under this mode, and dynamo's shim costs seconds to import
        return False

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[Any] = set()
        self.windows: list[tuple[int, int, int, int]] = []
        self._moves: dict[Any, bool] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.seen.add(func)
        if types or len(self.windows) >= self.MAX_OP_WINDOWS:  # a subclass's __torch_dispatch__ is the candidate's
            return func(*args, **(kwargs or {}))
        out = None
        start = _NOW()
        try:
            out = func(*args, **(kwargs or {}))
            return out
        finally:
            end = _NOW()
            self.windows.append((_TID(), start, end, self.written_bytes(func, out)))

    def written_bytes(self, func: Any, out: Any) -> int:
        """Bytes `func` wrote into `out` when it is a fill or a copy (`op_policy.moves_data`), else 0; a tensor
        counts at most its storage's bytes (an expanded view of one element is one element)."""
        moves = self._moves.get(func)
        if moves is None:
            moves = self._moves[func] = op_policy.moves_data(str(func))
        if not moves:
            return 0
        tensors = out if isinstance(out, (tuple, list)) else (out,)
        total = 0
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                try:
                    total += min(t.nbytes, t.untyped_storage().nbytes())
                except (RuntimeError, NotImplementedError):  # a layout without one storage (sparse, nested)
                    total += t.numel() * t.element_size()
        return total


class CallChecks:
    """Every candidate call, traced and counted. `count` is `kernel_calls.count` (a running total)."""

    def __init__(self, count: Callable[[], int], trace: bool = True):
        self.tracer = CallTracer()
        self.trace = trace
        """False: kernel calls counted, no ops traced (the `partial` policy judges none)."""
        self._count = count
        self.calls = 0
        self.fewest_kernel_calls = -1
        """Kernel calls of the call that made the fewest (-1: no call yet)."""

    def call(self, model: Any, args: Any) -> Any:
        """`model(*args)` under the tracer; its kernel calls counted. The hook for anything else that must see
        every candidate call."""
        count, tracer = self._count, self.tracer
        before = count()
        if self.trace:
            with tracer:
                out = model(*args)
        else:
            out = model(*args)
        made = count() - before
        self.calls += 1
        if self.fewest_kernel_calls < 0 or made < self.fewest_kernel_calls:
            self.fewest_kernel_calls = made
        return out

    def bound(self, model: Any) -> Callable[..., Any]:
        """`model` as a function of its arguments that goes through `call` (what timing calls)."""
        call = self.call
        return lambda *args: call(model, args)

    def ops(self) -> list[str]:
        """Names of every distinct overload dispatched in any call, sorted."""
        return sorted(str(f) for f in self.tracer.seen)


INPUT_WRITE_OPS = frozenset({"addcmul", "mul", "_to_copy", "random_"})
"""The ops the harness itself dispatches to write each call's inputs (`call_inputs.Perturbation`; `copy_` is an
allowed op already). A kernel registered over one of them would run the candidate's code, or a library's, inside
the last write before a call, where every other check expects the harness's own kernels."""


def watched_op_names() -> list[str]:
    """Every aten overload whose base name `op_policy` allows under `strict` (allocation, views, metadata,
    copies): the ops whose time inside a call is charged to PyTorch rather than to the candidate; and those that
    write the calls' inputs (`INPUT_WRITE_OPS`)."""
    allowed = (op_policy.ALLOC | op_policy.VIEW | op_policy.META | op_policy.COPY | {"fill_", "set_"}
               | INPUT_WRITE_OPS)
    return sorted(n for n in torch._C._dispatch_get_all_op_names()
                  if n.startswith("aten::") and n[6:].split(".")[0] in allowed)


class DispatchTables:
    """The dispatcher's kernel table of every allowed op, captured before the candidate is imported; `changed()`
    names the ops whose table differs now (a kernel registered over `aten::fill_` would run the candidate's code,
    or a library's, inside time charged to PyTorch). Why not only the static rule on `TORCH_LIBRARY`: a rule on
    spellings is a speed bump; this reads the dispatcher itself. The ops that write the calls' inputs are read
    too (`INPUT_WRITE_OPS`). Cost: about 3 ms per look (120 ops on torch 2.13), once per phase."""

    def __init__(self) -> None:
        self._dump = torch._C._dispatch_dump_table  # captured: the candidate can rebind torch._C's attributes
        self.names = watched_op_names()
        self.tables = {n: self._dump(n) for n in self.names}

    def changed(self) -> list[str]:
        dump = self._dump
        return [f"the dispatcher's kernels for {n}" for n in self.names if dump(n) != self.tables[n]]
