"""Parent side: the samples of `code_sampler` inside the candidate's calls, attributed to the object that was
mapped at their address, and the `strict` rule on them (`dynamic:library_compute`).

Classes (why each is where it is):
- candidate: a mapping of a file the compile stage built and the parent recorded (`build_manifest`), whose
  mapped bytes hash to the recorded sha256: the code the symbol check read.
- runtime: code every honest kernel runs and that holds no tensor compute: the C runtime (libc, libm, the
  dynamic loader, the vdso), the C++ runtime (libstdc++, libgcc_s), OpenMP runtimes (libgomp, libomp, libiomp5:
  their workers execute the candidate's own outlined regions, and spin in the runtime while waiting), and the
  Python interpreter (python, libpython) that runs `forward`'s Python; plus c10 (the allocator, TensorImpl,
  the dispatcher's core: no operator kernels) and torch's Python bindings (libtorch_python: argument parsing,
  `torch.empty` from Python), which every candidate's `forward` passes through to allocate its output.
- torch_op: a sample in foreign code, on the thread that called the candidate (the run child's
  main thread, matched through its pid inside the sandbox, `Sampled.inner_pids`), while that thread
  was inside an ATen op the candidate dispatched (`RunResult.op_windows_ns`, from the op tracer): under
  `strict` those are the ops the policy allows (a fill, a layout copy; any other op rejects), and their time
  is PyTorch's own at the candidate's request, up to what the bytes the op wrote take at a floor bandwidth
  (`op_budget_samples`, per window), and for the ops that write nothing (views, `set_`, allocation) a few
  microseconds each, pooled (`NO_DATA_OP_S`): past that, foreign. The dispatcher's tables of
  the allowed ops are checked against their state before the candidate was imported
  (`call_checks.DispatchTables`), so no registered kernel runs inside that time; and code that runs inside an
  op by other routes (a storage's deleter, freed inside `set_`, ran MKL's matmul there:
  `tests/adversarial/deleter_in_allowed_op.py`) gets no more than the op's data's time.
- foreign: everything else: libtorch_cpu (ATen's kernels, MKL and oneDNN are linked into it), numpy's OpenBLAS,
  any other library, anonymous or unknown executable memory, and an address two snapshots disagree on.
Covers: any route to a compute routine the candidate did not compile (import, dlsym, walking symbol tables,
a pointer handed over from Python, copied code), judged by where the CPU was, never by a spelling.
Not covered: foreign work below `FOREIGN_SHARE_MAX` of the sampled time; code that ran in a runtime library
(an OpenMP or libc routine doing the work); code the candidate wrote into its own mapped text
(`/proc/self/mem`, or its library file rewritten after it was hashed); device code on CUDA.
"""

from __future__ import annotations

import bisect
import collections
import math
import os
import re
from dataclasses import dataclass

from kernelbench.harness import compute_code
from kernelbench.harness.code_sampler import Sampled

FLAG = "dynamic:library_compute"
FOREIGN_SHARE_MAX = 0.10
"""Most of the sampled time inside the candidate's calls that may run in foreign code under `strict`. Measured
(docs/harness.md, "Which code ran"): 14 honest CPU solutions spent 0.0-4.0% there (libtorch_cpu allocating
outputs and making operands contiguous, allowed under `strict`); a call that hands its matmul to MKL, 72-83%.
Over twice the honest worst leaves room for a solution that fills or copies more; a candidate below it gains
at most a tenth of its time from foreign code."""
OUTSIDE_SHARE_MAX = 0.60
"""Most of the sampled time inside the candidate's calls that may run outside its code (foreign plus the allowed
ATen ops, `torch_op`) under `strict`. The allowed ops' time is charged to PyTorch on trust in what ran inside them
(the dispatcher's tables are checked; hooks that native code can install in torch, such as a replaced
allocator or an op observer, are not): this bounds what such a hook could gain. A candidate whose calls spend
most of their time in fills and layout copies is not a kernel; an honest ReLU that zero-fills its output
measured 30 % (tests/test_builds.py's OpenMP candidate), a matmul run inside a registered fill 90 %
(tests/adversarial/fill_override_blas.py)."""
MARGIN_SIGMAS = 3.0
"""The foreign count must exceed `FOREIGN_SHARE_MAX` of the samples by this many standard deviations of a
binomial count at that share: with 50 samples an honest 4% share would cross a bare 10% about once in 60
evaluations; with the margin, less than once in 10^4 (and 20 samples need 30%)."""
OP_FLOOR_BYTES_PER_S = 0.25e9
"""The slowest an allowed fill or copy is taken to write (a quarter of a GB/s: 10-40 times slower than a fill or
copy runs on this project's 2-core VM, under load included): an op's window holds at most its bytes' time at
this rate, plus `OP_BASE_S`, in samples charged to PyTorch."""
OP_BASE_S = 0.0005
"""Time an allowed fill or copy may take whatever its data (dispatch, allocation, argument checks), in its own
window: code can run inside a fill or copy only through a registered kernel, which the dispatcher's tables rule
out."""
NO_DATA_OP_S = 20e-6
"""Time each allowed op that writes no data (a view, metadata, `set_`, `resize_`, an allocation) may take in
libtorch_cpu, pooled over the calls judged: several times what such an op takes there, and no more than the op
tracer's own Python costs per op (about 20 us), so ops issued to earn time earn none. Pooled, not per window:
a storage's deleter freed inside `set_` ran a 0.7 ms matmul, one or two samples a call, which a budget of one
sample a window would have let through."""
MIN_SAMPLES = 20
"""Fewer samples inside the calls than this judge nothing (2 ms of CPU at 10 kHz): too little to tell."""
RUNTIME = re.compile(r"^(libc|libm|libmvec|libpthread|libdl|librt|ld-linux[-\w.]*|libstdc\+\+|libgcc_s|libgomp|"
                     r"libomp|libiomp5|libpython[\d.]+|python[\d.]*|libc10|libtorch_python)([-.].*)?$|^\[(vdso|vsyscall)\]$")


@dataclass(frozen=True)
class CodeShares:
    """Samples inside the candidate's calls by class, and the foreign objects they fell in."""

    in_calls: int
    candidate: int
    runtime: int
    foreign: int
    foreign_objects: tuple[tuple[str, int], ...]
    """The foreign objects with the most samples (name, samples), most first."""
    runtime_objects: tuple[tuple[str, int], ...]
    """The same for the runtime objects."""
    lost_records: int
    total_samples: int
    torch_op: int = 0
    """Samples charged to an allowed ATen op the calling thread was inside (see the module docstring)."""
    unattributed: int = 0
    """Samples inside the calls of a process no maps snapshot after the first call covers: where they ran is not
    known (counted in no class; `code_check` says the check did not hold when they are many)."""

    @property
    def foreign_share(self) -> float:
        return self.foreign / self.in_calls if self.in_calls else 0.0

    def summary(self) -> str:
        top = ", ".join(f"{name} {n}" for name, n in self.foreign_objects[:4])
        return (f"{self.foreign_share:.1%} of {self.in_calls} samples inside the candidate's calls ran in code it did "
                f"not compile (candidate {self.candidate}, runtime {self.runtime}, torch ops {self.torch_op}, "
                f"foreign {self.foreign}: {top})")


def _regions(sampled: Sampled, since_ns: int) -> dict[int, tuple[list[int], list[tuple[int, int, str]]]]:
    """Per pid, the executable regions seen by snapshots taken after `since_ns` (the first call's start, after
    the guard: from then on no executable mapping can be created, so any such snapshot shows what was mapped
    at every later sample's address); a range two snapshots disagree on is "<conflict>"."""
    per: dict[int, dict[tuple[int, int], str]] = collections.defaultdict(dict)
    for snap in sampled.maps:
        if snap.last_ns <= since_ns:
            continue
        seen = per[snap.pid]
        for lo, hi, path in snap.regions:
            key = (lo, hi)
            seen[key] = path if seen.get(key, path) == path else "<conflict>"
    out = {}
    for pid, seen in per.items():
        regions = sorted((lo, hi, path) for (lo, hi), path in seen.items())
        out[pid] = ([r[0] for r in regions], regions)
    return out


def _where(regions: dict, pid: int, ip: int) -> tuple[int, int, str] | None:
    starts, rows = regions.get(pid, ([], []))
    i = bisect.bisect_right(starts, ip) - 1
    if i >= 0 and rows[i][0] <= ip < rows[i][1]:
        # an overlapping later range (a remapped one) makes the address ambiguous
        if i + 1 < len(rows) and rows[i + 1][0] < rows[i][1] and rows[i + 1][2] != rows[i][2]:
            return (rows[i][0], rows[i][1], "<conflict>")
        return rows[i]
    return None


def candidate_file(path: str, ext_dir: str, manifest: dict[str, dict[str, str]]) -> str:
    """The recorded sha256 of `path` when it is a file of the compile stage's build ("" otherwise)."""
    rel = os.path.relpath(path, ext_dir)
    if rel.startswith(".."):
        return ""
    folder, name = os.path.split(rel)
    return manifest.get(folder or ".", {}).get(name, "")


def _inside(starts: list[int], wins: list[tuple[int, int]], t: int) -> bool:
    i = bisect.bisect_right(starts, t) - 1
    return i >= 0 and t <= wins[i][1]


def _op_at(op_wins: tuple[list[int], list[tuple[int, int, int]]], t: int) -> int:
    """Index of the op window holding time `t` (-1: none)."""
    starts, rows = op_wins
    i = bisect.bisect_right(starts, t) - 1
    return i if i >= 0 and t <= rows[i][1] else -1


def op_budget_samples(written_bytes: int, period_ns: int) -> int:
    """Samples the window of an allowed op that wrote `written_bytes` (> 0) may hold as PyTorch's time: its bytes
    at `OP_FLOOR_BYTES_PER_S` plus `OP_BASE_S`, in sample periods, rounded up."""
    budget_s = OP_BASE_S + max(0, written_bytes) / OP_FLOOR_BYTES_PER_S
    return math.ceil(budget_s * 1e9 / max(1, period_ns))


def no_data_budget_samples(ops: int, period_ns: int) -> int:
    """Samples the windows of `ops` allowed ops that wrote nothing may hold together (`NO_DATA_OP_S` each)."""
    return math.ceil(ops * NO_DATA_OP_S * 1e9 / max(1, period_ns))


def attribute(sampled: Sampled, windows_ns: list[tuple[int, int]], ext_dir: str,
              manifest: dict[str, dict[str, str]],
              op_windows_ns: list[tuple[int, int, int, int]] = ()) -> CodeShares:
    """Count the samples that fall inside any call window, by the class of the object mapped at their address;
    one outside the candidate's code, on a thread inside one of `op_windows_ns` (tid, start, end, bytes
    written), is the op's while the budget lasts (the window's own for a fill or copy, `op_budget_samples`;
    a pool for the ops that write nothing, `no_data_budget_samples`), foreign past it."""
    wins = sorted((int(a), int(b)) for a, b in windows_ns if b >= a)
    starts = [w[0] for w in wins]
    op_wins: dict[int, tuple[list[int], list[tuple[int, int, int]]]] = {}
    no_data_ops = 0
    for tid in {int(w[0]) for w in op_windows_ns}:
        rows = sorted((int(a), int(b), op_budget_samples(int(n), sampled.period_ns) if int(n) > 0 else 0)
                      for t, a, b, n in op_windows_ns if int(t) == tid and b >= a)
        op_wins[tid] = ([r[0] for r in rows], rows)
        no_data_ops += sum(1 for a, _, budget in rows if budget == 0 and _inside(starts, wins, a))
    pool = no_data_budget_samples(no_data_ops, sampled.period_ns)
    used: collections.Counter = collections.Counter()
    regions = _regions(sampled, starts[0] if starts else 0)
    compute = compute_code.Locator(sampled.offsets)
    counts = collections.Counter()
    unattributed = 0
    by_object = {k: collections.Counter() for k in ("foreign", "runtime", "candidate", "torch_op")}
    for pid, tid, t, ip in sampled.samples:
        if not _inside(starts, wins, t):
            continue
        if pid not in regions:
            unattributed += 1
            continue
        row = _where(regions, pid, ip)
        kind, name = _classify(row, pid, sampled, ext_dir, manifest)
        # the op windows carry the calling thread's id as the child sees it; a sample's is known for a main
        # thread (host tid == pid), the only thread that calls the candidate
        inner = sampled.inner_pids.get(pid, -1) if tid == pid else -1
        op = _op_at(op_wins[inner], t) if kind == "foreign" and inner in op_wins else -1
        if op >= 0 and compute.is_compute(pid, row, ip):  # no allowed op runs a GEMM (`compute_code`)
            op, name = -1, f"{name} (a compute routine, inside an allowed op)"
        if op >= 0:
            budget = op_wins[inner][1][op][2]
            key = (inner, op) if budget else "no data"
            used[key] += 1
            if used[key] <= (budget or pool):
                kind = "torch_op"
            else:
                name = f"{name} (inside an allowed op, past its data's time)"
        counts[kind] += 1
        by_object[kind][name] += 1
    return CodeShares(sum(counts.values()), counts["candidate"], counts["runtime"], counts["foreign"],
                      tuple(by_object["foreign"].most_common(8)), tuple(by_object["runtime"].most_common(8)),
                      sampled.lost_records, len(sampled.samples), counts["torch_op"], unattributed)


def _classify(row: tuple[int, int, str] | None, pid: int, sampled: Sampled, ext_dir: str,
              manifest: dict[str, dict[str, str]]) -> tuple[str, str]:
    if row is None:
        return "foreign", "<unmapped>"
    lo, hi, path = row
    if path in ("", "<conflict>"):
        return "foreign", path or "<anonymous>"
    want = candidate_file(path, ext_dir, manifest)
    if want:
        got = sampled.digests.get((pid, lo, hi), "")
        return ("candidate", path) if got == want else ("foreign", f"{os.path.basename(path)} (changed)")
    name = os.path.basename(path)
    return ("runtime", name) if RUNTIME.match(name) else ("foreign", name)


def judge(shares: CodeShares, policy: str, which: str = "") -> dict[str, str]:
    """`strict`: more than `FOREIGN_SHARE_MAX` of the samples inside the calls in foreign code, or more than
    `OUTSIDE_SHARE_MAX` in foreign code and allowed ATen ops together (each by `MARGIN_SIGMAS`), is
    `dynamic:library_compute`. `partial` allows PyTorch compute beside the kernel: nothing to judge. `which`
    names the calls judged (every call when empty) in the reason."""
    n = shares.in_calls
    if policy != "strict" or n < MIN_SAMPLES:
        return {}
    head = f"{which}: " if which else ""
    if _over(shares.foreign, n, FOREIGN_SHARE_MAX):
        return {FLAG: head + shares.summary()}
    if _over(shares.foreign + shares.torch_op, n, OUTSIDE_SHARE_MAX):
        return {FLAG: f"{head}{shares.summary()}; with the allowed PyTorch ops, over {OUTSIDE_SHARE_MAX:.0%} of the "
                      "calls' time ran outside the candidate's code"}
    return {}


BETWEEN_FLAG = "dynamic:work_between_calls"
BETWEEN_MIN_SAMPLES = 4
"""Samples of the candidate's own code, or of a compute routine linked into torch (`compute_code`), between its
calls (after the first, before the last) that reject: 2 ms of CPU. An honest kernel's code runs only when it is
called; between calls the run child does the harness's work (inputs written by torch's own ops, copies held
for checks), none of it in the candidate's library or in a GEMM (30 honest CPU solutions: 0 samples of either)."""


@dataclass(frozen=True)
class BetweenCalls:
    """Samples from the first call's start to the last call's end, over every task of the child."""

    candidate_outside: int
    """Of the candidate's own code, outside every call window."""
    candidate_inside: int
    """Of the candidate's own code, inside the windows."""
    compute_outside: int = 0
    """Outside every call window, in a compute routine linked into torch (MKL, oneDNN, a GEMM) or in foreign code
    the harness's own work never runs (any object outside `compute_code.harness_dirs`, anonymous memory)."""
    compute_objects: tuple[tuple[str, int], ...] = ()
    """The objects `compute_outside`'s samples fell in, most first (at most 4), as the rejection names them."""


def between_calls(sampled: Sampled, windows_ns: list[tuple[int, int]], ext_dir: str,
                  manifest: dict[str, dict[str, str]]) -> BetweenCalls:
    """What ran between the candidate's calls that the harness's own work never runs.

    Why: a hook in torch (an op observer, a replaced allocator's deleter, a storage deleter) runs the candidate's
    code inside the harness's own work between calls, where no timed trial and no call window is: an observer
    on the `addcmul` that writes the next call's inputs computed L1/10_sum_dim's answer there and `forward`
    returned it (`correct` at 8.7-9.6x). Whatever installs the hook, its code is the candidate's and the
    sampler sees where it ran; and when the hook hands the work to MKL (found in libtorch_cpu's symbol table,
    not imported: `tests/adversarial/found_allocator_blas.py`), the samples fall in a compute routine. The
    harness's own work there runs torch's copy, `addcmul` and `mul` kernels, numpy's generator and the
    runtime; so a sample in foreign code outside torch's, numpy's and the interpreter's folders (another BLAS,
    a copied library, anonymous memory) is counted with the compute routines."""
    wins = sorted((int(a), int(b)) for a, b in windows_ns if b >= a)
    if not wins:
        return BetweenCalls(0, 0)
    starts = [w[0] for w in wins]
    first, last = wins[0][0], max(b for _, b in wins)
    regions = _regions(sampled, first)
    compute = compute_code.Locator(sampled.offsets)
    outside = inside = gemm = 0
    objects: collections.Counter = collections.Counter()
    for pid, _, t, ip in sampled.samples:
        if not first <= t <= last or pid not in regions:
            continue
        row = _where(regions, pid, ip)
        kind, name = _classify(row, pid, sampled, ext_dir, manifest)
        within_call = _inside(starts, wins, t)
        if kind == "candidate":
            if within_call:
                inside += 1
            else:
                outside += 1
        elif kind == "foreign" and not within_call and (
                row is None or not compute_code.harness_object(row[2]) or compute.is_compute(pid, row, ip)):
            gemm += 1
            objects[_between_name(row, name)] += 1
    return BetweenCalls(outside, inside, gemm, tuple(objects.most_common(4)))


def _between_name(row: tuple[int, int, str] | None, name: str) -> str:
    """A foreign sample's object as a rejection names it: the file's path (where it lies tells a copied library
    from torch's), or `_classify`'s name for memory with no file."""
    return row[2] if row is not None and row[2] and not row[2].startswith("<") else name


def judge_between(found: BetweenCalls) -> dict[str, str]:
    """`BETWEEN_FLAG` when the candidate's code or a compute routine ran between its calls (`between_calls`),
    under either policy: work done outside the calls is work the timing does not see."""
    if found.candidate_outside >= BETWEEN_MIN_SAMPLES:
        return {BETWEEN_FLAG: f"{found.candidate_outside} samples of the candidate's own code ran between its calls "
                              f"(against {found.candidate_inside} inside them): a hook in torch's ops or allocator, "
                              "or a deleter, ran it during the harness's own work, where no timing sees it"}
    if found.compute_outside >= BETWEEN_MIN_SAMPLES:
        where = ", ".join(f"{name} {n}" for name, n in found.compute_objects)
        return {BETWEEN_FLAG: f"{found.compute_outside} samples between the candidate's calls ran in a compute routine "
                              "linked into torch (MKL, oneDNN, a GEMM) or in code outside torch, numpy and the "
                              "interpreter, which the harness's own work there never runs: a hook ran it, where "
                              f"no timing sees it{f' ({where})' if where else ''}"}
    return {}


def within(windows_ns: list[tuple[int, int]], spans_ns: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    """The call windows that lie wholly inside one of `spans_ns` (the candidate's timed blocks, by the parent's
    clock): its timed calls and the checks among them, which nothing tells apart."""
    spans = sorted(spans_ns)
    starts = [a for a, _ in spans]
    out = []
    for a, b in windows_ns:
        i = bisect.bisect_right(starts, a) - 1
        if i >= 0 and b <= spans[i][1]:
            out.append((a, b))
    return out


def _over(count: int, n: int, share: float) -> bool:
    """`count` of `n` samples exceeds `share` by `MARGIN_SIGMAS` binomial standard deviations."""
    return count > share * n + MARGIN_SIGMAS * math.sqrt(n * share * (1 - share))
