"""The sandboxed side of deriving CPU sizes: find the scale at which a problem's reference takes ~5 ms.

Runs inside the sandbox (kernelbench/sizes/size_derivation.py starts it). Problem files are code, and untrusted
like any: this server imports torch once (16 s on a loaded machine, so not once per problem), then forks
one child per problem with its own address-space and CPU-time limits and a wall-clock deadline, and reads
that child's answer from a pipe only it holds. The answer is advisory: the derivation re-checks nothing it
cannot see, but the parent re-times the recorded size whenever asked (`--recheck`).

Search, per problem (kernelbench/tasks/size_plan.py maps a scale `alpha` to the constants):
1. On the `meta` device (shapes only, no memory, no arithmetic) find a scale at which the problem still
   builds and runs, freezing a constant whose scaling breaks it, and count its FLOPs and bytes moved, so
   the first real run is chosen from an estimate and a GPU size is never run.
2. Time real forwards on one thread, then move `alpha` to hit TARGET_MS: between two measured points by
   interpolating log(time), else by the meta estimate calibrated on the last measurement.
Timing is the thread's CPU time (`time.thread_time`): with one intra-op thread all the work runs on the
calling thread, and unlike wall time it stays put while other processes share the core.
The counting and timing themselves: kernelbench/sizes/reference_cost.py.
"""

from __future__ import annotations

import json
import math
import os
import resource
import select
import signal
import sys
import time
from typing import Any

from kernelbench.tasks import cpu_size_records
from kernelbench.sizes.reference_cost import RUN_CAP_MS, RUNS, estimate_ms, measure, meta_cost
from kernelbench.harness.child import progress, spawn_guard
from kernelbench.tasks.size_plan import SizePlan, constants_at, literal_sizes, plan_sizes

# Imports inside functions: torch (1-2 s to import) loads when this module's work runs; importing it stays free of
# torch, and so do the modules that import it at their top.

TARGET_MS = 5.0
ACCEPT_MS = (2.5, 10.0)
"""Stop searching once a measurement lands here: well inside 1-20 ms, so noise does not push it out."""
MAX_TRIALS = 8
START_ALPHA = 0.3
MIN_SIZE = 8
"""Sizes other than a batch stay at least this large unless that is still too slow (size_plan.knob_values)."""
META_BUDGET_S = 10.0
MAX_PAIR_KNOBS = 6
"""Pairs of constants are tried for freezing only up to this many scalable constants (15 meta runs)."""
NO_META_MAX_ALPHA = 0.8
"""Without a meta estimate the search never comes near the GPU size (alpha 1): it climbs from small runs."""
MAX_META_BYTES = 2 << 30
"""A configuration that moves more than this on the meta device is not run for real."""
RESULT_FILE = "result.json"
WARM_UP = """
import torch
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin, self.conv = torch.nn.Linear(8, 8), torch.nn.Conv2d(2, 2, 3)
    def forward(self, x, y):
        return torch.softmax(self.lin(x), -1).sum() + self.conv(y).relu().mean()
def get_inputs():
    return [torch.rand(4, 8), torch.rand(1, 2, 8, 8)]
def get_init_inputs():
    return []
"""
"""A trusted problem the server runs on meta before forking, so each child inherits torch's lazy imports."""


class Search:
    """The scale search for one problem (see the module docstring)."""

    def __init__(self, source: str, filename: str):
        self.source, self.filename = source, filename
        self.plan: SizePlan = plan_sizes(source)
        self.frozen: frozenset[str] = frozenset()
        self.loose: frozenset[str] = frozenset()
        self.min_size = MIN_SIZE
        self._costs: dict[str, Any] = {}
        self.meta_s = 0.0
        # the small scale first: at the GPU size a recurrent net is 60k meta ops (a minute here)
        self.meta_ok = self._valid(START_ALPHA) or self._valid(1.0)
        self.points: list[tuple[float, float, float, dict[str, Any]]] = []  # alpha, cpu ms, wall ms, overrides
        self.errors: list[str] = []
        self.calibration = 1.0

    def _overrides(self, alpha: float, frozen: frozenset[str] | None = None,
                   loose: frozenset[str] | None = None) -> dict[str, Any]:
        return constants_at(self.plan, alpha, self.frozen if frozen is None else frozen,
                            self.loose if loose is None else loose, self.min_size)

    def _cost(self, alpha: float, frozen: frozenset[str] | None = None, loose: frozenset[str] | None = None):
        key = json.dumps(self._overrides(alpha, frozen, loose), sort_keys=True, default=str)
        if key not in self._costs:
            start = time.perf_counter()
            self._costs[key] = meta_cost(self.source, self.filename, json.loads(key))
            self.meta_s += time.perf_counter() - start
        return self._costs[key]

    @property
    def meta_cheap(self) -> bool:
        """Estimates keep coming from meta runs until they have cost META_BUDGET_S; then the measured slope."""
        return self.meta_s < META_BUDGET_S

    def _est(self, alpha: float, frozen: frozenset[str] | None = None, loose: frozenset[str] | None = None) -> float | None:
        cost = self._cost(alpha, frozen, loose)
        return None if isinstance(cost, str) or cost[1] > MAX_META_BYTES else estimate_ms(cost) * self.calibration

    def _valid(self, alpha: float, frozen: frozenset[str] | None = None, loose: frozenset[str] | None = None) -> bool:
        return not isinstance(self._cost(alpha, frozen, loose), str)

    def _floor(self) -> float:
        """The smallest scale to search from: valid on meta (freezing a constant whose scaling breaks the
        problem, else raising the scale), as low as 0 when the start is still too slow, and with any
        coincidental divisibility that keeps a size large loosened."""
        alpha = START_ALPHA
        if not self._valid(alpha):
            labels = [k.label for k in sorted(self.plan.scalable, key=lambda k: -k.value)]
            tries = [{a} for a in labels] + ([{a, b} for i, a in enumerate(labels) for b in labels[i + 1:]]
                                            if len(labels) <= MAX_PAIR_KNOBS else [])
            for trial in tries:  # one constant, else two (a width tied to a channel count by a LayerNorm)
                if self._valid(alpha, self.frozen | trial):
                    self.frozen = self.frozen | trial
                    break
            else:
                lo, hi = alpha, 1.0
                for _ in range(7):
                    mid = (lo + hi) / 2
                    lo, hi = (lo, mid) if self._valid(mid) else (mid, hi)
                alpha = hi
        est = self._est(alpha)
        if est is not None and est > TARGET_MS / 2:
            for knob in sorted(self.plan.scalable, key=lambda k: -k.value):
                trial = self.loose | {knob.label}
                if self._overrides(alpha, loose=trial) == self._overrides(alpha):
                    continue
                new = self._est(alpha, loose=trial)
                if new is not None and new < 0.7 * est:
                    self.loose, est = trial, new
        for min_size in (MIN_SIZE, 1):  # down to 1 only when the floor of 8 is still too slow
            previous, self.min_size = self.min_size, min_size
            if not self._valid(alpha):  # sizes under 8 break it (a literal group count of 4)
                self.min_size = previous
                break
            for lower in (0.2, 0.1, 0.0):
                if lower >= alpha or (self._est(alpha) or 0.0) <= TARGET_MS / 2:
                    break
                if self._valid(lower):
                    alpha = lower
            if (self._est(alpha) or 0.0) <= TARGET_MS / 2:
                break
        return alpha

    def _alpha_for(self, target_ms: float, lo: float, hi: float = 1.0) -> float:
        """The scale in [lo, hi] whose calibrated estimate is nearest `target_ms` (in ratio)."""
        if (self._est(hi) or math.inf) <= target_ms:
            return hi
        a, b = lo, hi
        for _ in range(6):
            mid = (a + b) / 2
            est = self._est(mid)
            a, b = (mid, b) if est is not None and est <= target_ms else (a, mid)
        below, above = self._est(a), self._est(b)
        if below is None or above is None or above > RUN_CAP_MS:
            return a
        return a if math.log(target_ms / max(below, 1e-6)) <= math.log(above / target_ms) else b

    def _unblock(self, alpha: float) -> bool:
        """Without meta shapes: after a failed real run at a small scale, freeze the first constant whose
        freezing lets it run (each try is still a small run: the other sizes stay scaled)."""
        for knob in sorted(self.plan.scalable, key=lambda k: k.value):
            if knob.label in self.frozen:
                continue
            trial = self.frozen | {knob.label}
            try:
                cpu_ms, wall_ms = measure(self.source, self.filename, self._overrides(alpha, trial), runs=1)
            except Exception:
                continue
            self.frozen = trial
            return True
        return False

    def _next_alpha(self, alpha: float, cpu_ms: float, floor: float) -> float:
        below = [p for p in self.points if p[1] < TARGET_MS]
        above = [p for p in self.points if p[1] > TARGET_MS]
        if below and above:  # interpolate log(time) between the tightest bracket
            a = max(below, key=lambda p: p[0])
            b = min(above, key=lambda p: p[0])
            la, lb = math.log(max(a[1], 1e-3)), math.log(b[1])
            frac = (math.log(TARGET_MS) - la) / (lb - la) if lb > la else 0.5
            return a[0] + min(max(frac, 0.1), 0.9) * (b[0] - a[0])
        if self.meta_ok and self.meta_cheap:
            est = self._est(alpha)
            if est:
                self.calibration *= cpu_ms / est
            return self._alpha_for(TARGET_MS, floor if cpu_ms > TARGET_MS else alpha,
                                   alpha if cpu_ms > TARGET_MS else 1.0)
        # no estimate: log(work) is about alpha * sum(log v); step on that slope, at most 0.35 at a time
        slope = sum(math.log(k.value) for k in self.plan.scalable if k.label not in self.frozen) or 1.0
        if len(self.points) >= 2:  # or on the slope measured between the last two points, when it is sane
            (a0, t0, *_), (a1, t1, *_) = self.points[-2:]
            if a1 != a0 and 0.5 < (math.log(t1) - math.log(t0)) / (a1 - a0) < 4 * slope:
                slope = (math.log(t1) - math.log(t0)) / (a1 - a0)
        step = (math.log(TARGET_MS) - math.log(max(cpu_ms, 1e-3))) / slope
        return min(1.0 if self.meta_ok else NO_META_MAX_ALPHA, max(0.0, alpha + max(-0.5, min(0.35, step))))

    def run(self) -> dict[str, Any]:
        if not self.plan.scalable:
            return self._own_size("no module-level size constant to scale")
        floor = self._floor() if self.meta_ok else START_ALPHA
        alpha = self._alpha_for(TARGET_MS, floor) if self.meta_ok else floor
        seen: set[str] = set()
        for _ in range(MAX_TRIALS):
            overrides = self._overrides(alpha)
            key = json.dumps(overrides, sort_keys=True, default=str)
            if key in seen:
                break
            seen.add(key)
            est = self._est(alpha) if self.meta_ok and self.meta_cheap else None
            if est is not None and est > RUN_CAP_MS and self.points:
                break
            try:
                cpu_ms, wall_ms = measure(self.source, self.filename, overrides)
            except Exception as e:  # a size the problem rejects
                self.errors.append(f"alpha {alpha:.2f}: {type(e).__name__}: {str(e)[:160]}")
                if self.min_size < MIN_SIZE and not self.points:  # runs on meta, not for real: sizes of 8 again
                    self.min_size = MIN_SIZE
                    continue
                if self.points or self.meta_ok or not self._unblock(alpha):
                    break
                continue
            self.points.append((alpha, cpu_ms, wall_ms, overrides))
            if ACCEPT_MS[0] <= cpu_ms <= ACCEPT_MS[1] or (cpu_ms < TARGET_MS and alpha >= 1.0) or (
                    not self.meta_ok and alpha >= NO_META_MAX_ALPHA and cpu_ms < TARGET_MS):
                break
            alpha = self._next_alpha(alpha, cpu_ms, floor)
        return self._verdict()

    def _verdict(self) -> dict[str, Any]:
        if not self.points:
            load = [e for e in self.errors if "executing the problem failed" in e]
            why = (f"the problem does not run here: {load[-1].split('executing the problem failed: ', 1)[-1]}" if load
                   else "the reference fails at every scaled size: " + (self.errors[-1] if self.errors else
                                                                         "nothing could be timed"))
            return {"status": "unscalable", "overrides": None, "reason": why, "alpha": 0.0, "frozen": sorted(self.frozen)}
        alpha, cpu_ms, wall_ms, overrides = min(self.points, key=lambda p: abs(math.log(max(p[1], 1e-3) / TARGET_MS)))
        lo, hi = cpu_size_records.RANGE_MS
        kept = sorted(self.frozen)
        reason = f"kept {', '.join(kept)} (scaling them broke the problem)" if kept else ""
        if self.min_size < MIN_SIZE:
            tiny = [f"{k}={v}" for k, v in overrides.items() if isinstance(v, int) and v < MIN_SIZE and "batch" not in k]
            if tiny:
                reason = "; ".join(filter(None, [reason, f"sizes below {MIN_SIZE} to fit ({', '.join(tiny)})"]))
        status = "sized"
        if cpu_ms > hi:
            status = "slow"
            literals = literal_sizes(self.source)
            where = f" (get_inputs writes {', '.join(map(str, literals))})" if literals else ""
            reason = (f"{cpu_ms:.0f} ms even at the smallest size its module constants allow; the rest of the work "
                      f"is in sizes written as literals{where}" + (f"; {reason}" if reason else ""))
        elif cpu_ms < lo:
            status = "fast"
            reason = f"{cpu_ms:.2f} ms at {'its own size' if not overrides else 'the largest size tried'}; sizes only shrink"
        return {"status": status, "overrides": overrides, "cpu_ms": round(cpu_ms, 3), "wall_ms": round(wall_ms, 3),
                "alpha": round(alpha, 4), "frozen": kept, "reason": reason}

    def _own_size(self, why: str) -> dict[str, Any]:
        est = self._est(1.0) if self.meta_ok else None
        if est is None or est > RUN_CAP_MS:
            guess = f"estimated {est / 1e3:.1f} s per call" if est else "its cost cannot be estimated safely"
            literals = literal_sizes(self.source)
            where = f" (get_inputs writes {', '.join(map(str, literals))})" if literals else ""
            return {"status": "unscalable", "overrides": None, "reason": f"{why}; {guess}{where}", "alpha": 1.0,
                    "frozen": []}
        cpu_ms, wall_ms = measure(self.source, self.filename, {})
        self.points.append((1.0, cpu_ms, wall_ms, {}))
        out = self._verdict()
        if out["status"] == "slow":
            out["reason"] = f"{why}; {cpu_ms:.0f} ms at its own size"
        return out


def recheck(source: str, filename: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """Time a recorded size again (more runs than the search), keeping its overrides."""
    cpu_ms, wall_ms = measure(source, filename, overrides, runs=2 * RUNS + 1)
    lo, hi = cpu_size_records.RANGE_MS
    status = "slow" if cpu_ms > hi else "fast" if cpu_ms < lo else "sized"
    return {"status": status, "overrides": overrides, "cpu_ms": round(cpu_ms, 3), "wall_ms": round(wall_ms, 3)}


def _limit_self(memory_mb: int, cpu_s: int) -> None:
    """This problem's child: address space = what the interpreter already maps + `memory_mb`; CPU seconds."""
    with open("/proc/self/status") as f:
        vm_kb = next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
    limit = vm_kb * 1024 + memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _child(item: dict[str, Any], job: dict[str, Any], w: int) -> None:
    try:
        _limit_self(int(job["memory_mb"]), int(job["cpu_s"]))
        import torch

        torch.set_num_threads(1)
        spawn_guard.refuse_new_tasks()  # one thread of work, and nothing the problem starts can outlive it
        if item.get("overrides") is not None:  # re-time a recorded size
            result = recheck(item["source"], item["filename"], item["overrides"])
        else:
            result = Search(item["source"], item["filename"]).run()
    except BaseException as e:  # the problem's own faults and our limits alike become its answer
        result = {"status": "unscalable", "overrides": None, "reason": f"derivation failed: {type(e).__name__}: {str(e)[:200]}"}
    try:
        data = json.dumps(result, default=str).encode()
        while data:
            data = data[os.write(w, data):]
    finally:
        os._exit(0)


def _collect(pid: int, r: int, deadline: float) -> dict[str, Any]:
    chunks, timed_out = [], False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([r], [], [], min(left, 1.0))
        if ready:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            if sum(map(len, chunks)) > 1 << 20:
                break
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(r)
    if timed_out:
        return {"status": "unscalable", "overrides": None, "reason": "the derivation ran out of time"}
    try:
        result = json.loads(b"".join(chunks))
        if isinstance(result, dict) and result.get("status") in cpu_size_records.STATUSES:
            return result
    except ValueError:
        pass
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
    why = {signal.SIGXCPU: "CPU-time limit", signal.SIGKILL: "killed (memory?)"}.get(sig, f"exit status {status}")
    return {"status": "unscalable", "overrides": None, "reason": f"the derivation child died: {why}"}


def main(argv: list[str]) -> int:
    """`main([scratch])`: read scratch/job.json, answer every problem into scratch/result.json as it goes."""
    scratch = argv[0]
    with open(os.path.join(scratch, "job.json")) as f:
        job = json.load(f)
    os.unlink(os.path.join(scratch, "job.json"))
    fd = int(os.environ.pop(progress.PROGRESS_FD_ENV, "-1") or -1)
    if fd >= 0:
        os.write(fd, progress.STARTED.encode())
        os.close(fd)
    import torch

    torch.set_num_threads(1)
    meta_cost(WARM_UP, "<warm-up>", {})  # once, before forking: the first meta run's imports take 15 s here

    results: dict[str, Any] = {}
    for item in job["tasks"]:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            _child(item, job, w)
        os.close(w)
        results[item["id"]] = _collect(pid, r, time.monotonic() + float(job["task_timeout_s"]))
        tmp = os.path.join(scratch, RESULT_FILE + ".tmp")
        with open(tmp, "w") as f:
            json.dump({"nonce": job["nonce"], "results": results}, f)
        os.replace(tmp, os.path.join(scratch, RESULT_FILE))
        print(f"{item['id']}: {results[item['id']].get('status')}", file=sys.stderr, flush=True)
    return 0
