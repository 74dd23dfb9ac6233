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
  is PyTorch's own at the candidate's request. The dispatcher's tables of the allowed ops are checked against
  their state before the candidate was imported (`call_checks.DispatchTables`), so no registered kernel runs
  inside that time.
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


def attribute(sampled: Sampled, windows_ns: list[tuple[int, int]], ext_dir: str,
              manifest: dict[str, dict[str, str]],
              op_windows_ns: list[tuple[int, int, int]] = ()) -> CodeShares:
    """Count the samples that fall inside any call window, by the class of the object mapped at their address;
    one outside the candidate's code, on a thread inside one of `op_windows_ns` (tid, start, end), is the op's."""
    wins = sorted((int(a), int(b)) for a, b in windows_ns if b >= a)
    starts = [w[0] for w in wins]
    op_wins: dict[int, tuple[list[int], list[tuple[int, int]]]] = {}
    for tid in {int(w[0]) for w in op_windows_ns}:
        rows = sorted((int(a), int(b)) for t, a, b in op_windows_ns if int(t) == tid and b >= a)
        op_wins[tid] = ([r[0] for r in rows], rows)
    regions = _regions(sampled, starts[0] if starts else 0)
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
        if kind == "foreign" and inner in op_wins and _inside(*op_wins[inner], t):
            kind = "torch_op"
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


def judge(shares: CodeShares, policy: str) -> dict[str, str]:
    """`strict`: more than `FOREIGN_SHARE_MAX` of the samples inside the calls in foreign code, or more than
    `OUTSIDE_SHARE_MAX` in foreign code and allowed ATen ops together (each by `MARGIN_SIGMAS`), is
    `dynamic:library_compute`. `partial` allows PyTorch compute beside the kernel: nothing to judge."""
    n = shares.in_calls
    if policy != "strict" or n < MIN_SAMPLES:
        return {}
    if _over(shares.foreign, n, FOREIGN_SHARE_MAX):
        return {FLAG: shares.summary()}
    if _over(shares.foreign + shares.torch_op, n, OUTSIDE_SHARE_MAX):
        return {FLAG: f"{shares.summary()}; with the allowed PyTorch ops, over {OUTSIDE_SHARE_MAX:.0%} of the "
                      "calls' time ran outside the candidate's code"}
    return {}


def _over(count: int, n: int, share: float) -> bool:
    """`count` of `n` samples exceeds `share` by `MARGIN_SIGMAS` binomial standard deviations."""
    return count > share * n + MARGIN_SIGMAS * math.sqrt(n * share * (1 - share))
