"""Parent side: the check of which code ran during the candidate's calls, for one run child: its cgroup, the
sampler over its whole life (`code_sampler`), and the rule (`code_attribution`).

Why: DESIGN.md rules 5 and 10. Under `strict` the candidate's calls must run the code it compiled, and no
reading of its imports or spellings can say what native code reaches at run time. Where it applies: CPU run
children of a non-Triton candidate (a Triton candidate on CPU runs under the interpreter, numpy code, and is
never scored for time). On CUDA the kernels run on the device and the host samples would show the driver's
launch and wait loops: judging device code needs the device's own view (which kernels ran, from the profiler
or a launch callback, and whether their code objects are the candidate's), not done here.
Fails closed: a sampler or cgroup that cannot be had, a ring buffer that lost records, or a child whose guard
against new executable memory did not take is a `harness_error`, unless `EvalConfig.allow_unsampled`, where the
result carries `unsampled` and the reason.
"""

from __future__ import annotations

import logging

from kernelbench.harness import code_attribution, code_sampler, protocol
from kernelbench.harness.build import triton_kernels
from kernelbench.harness.isolation import cgroups
from kernelbench.harness.config import EvalConfig

UNSAMPLED = "unsampled"
"""Informational flag: the check of which code ran did not hold for this result (`allow_unsampled`)."""
MAPS_FLOOD = "dynamic:mapping_flood"
"""`strict`, CPU: a process of the run child made more memory mappings than the parent reads
(`code_sampler.MAPS_MAX_BYTES` of `/proc/<pid>/maps`, about 20 times a torch process's), or the processes mapped
more of the build than the parent hashes (`code_sampler.DIGEST_MAX_BYTES`): what ran at its samples cannot be
attributed, and the candidate made it so."""
LOST_SHARE_MAX = 0.01
"""More lost samples than this share of those kept: the record of what ran has holes a call could hide in."""
log = logging.getLogger(__name__)


class CodeCheckUnavailable(RuntimeError):
    """The check cannot run here and the configuration does not allow running without it."""


def applies(config: EvalConfig, src: str, profile: str = "") -> bool:
    return config.device == "cpu" and profile != "ncu" and not triton_kernels.interpreted(src, config.device)


class CodeCheck:
    """One run child's sampler. Use: `attach` as `sandbox.start_child`'s `on_cgroup` (it opens the perf events
    on the child's own cgroup v2 folder, `cgroups.Cgroup.v2_dir`, before anything of the child runs), `stop()`
    once it is dead (every process killed), `judge(result, policy)` on its report, `close()` always.
    `judged=False`: the paired reference's, sampled at the same rate and never read, so both children pay the
    same cost per CPU second and the speedup stays fair."""

    def __init__(self, config: EvalConfig, ext_dir: str, manifest: dict[str, dict[str, str]], judged: bool = True):
        self.config, self.ext_dir, self.manifest, self.judged = config, ext_dir, manifest, judged
        self.unavailable = ""
        self.allowed = config.allow_unsampled or cgroups.allow_missing(config.allow_missing_cgroups)
        """Running without the check is allowed: `allow_unsampled`, or a machine marked as having no cgroups."""
        self.sampler: code_sampler.CodeSampler | None = None
        self.sampled: code_sampler.Sampled | None = None

    def attach(self, cgroup_dir: str) -> None:
        """Sample every task of `cgroup_dir` (the child's v2 cgroup; "" where there is none) from now on."""
        try:
            if not cgroup_dir:
                raise code_sampler.SamplerUnavailable("the child has no cgroup v2 folder")
            self.sampler = code_sampler.CodeSampler(cgroup_dir, code_sampler.DEFAULT_PERIOD_NS,
                                                    self.ext_dir.rstrip("/") + "/")
        except code_sampler.SamplerUnavailable as e:
            self.close()
            if not self.allowed:
                raise CodeCheckUnavailable(f"the check of which code ran cannot run here: {e} "
                                           "(EvalConfig.allow_unsampled runs without it)") from e
            self.unavailable = str(e)
            return
        self.sampler.start(drain=self.judged)

    def stop(self) -> None:
        if self.sampler is not None and self.sampled is None:
            self.sampled = self.sampler.stop()

    def judge(self, res: protocol.RunResult, policy: str, exec_memory_asked: bool,
              timed_spans_ns: tuple[tuple[int, int], ...] = ()) -> dict[str, str]:
        """flag -> reason: `dynamic:library_compute` or `MAPS_FLOOD` under `strict`; `unsampled` (informational,
        allowed) or `CodeCheckUnavailable` (raised: a harness error) when the check did not hold.

        The rule holds over every call together and, with `timed_spans_ns` (the candidate's paired blocks by the
        parent's clock), over the calls inside them alone. Why both: pooled, a candidate that padded its untimed
        calls with its own work (the correctness calls come first and are told apart by their place) diluted
        MKL's share of its timed calls under the limit: `tests/adversarial/found_blas_padded.py`, `correct` at
        0.94x. Padding the timed calls themselves costs the time it would hide. Unpaired timing has no spans:
        the pooled rule alone."""
        self.stop()
        why = self.unavailable
        refused = res.new_tasks_refused
        if not why and exec_memory_asked and not (refused is not None and refused.exec_memory):
            why = "the run child's refusal of new executable memory did not take effect"
        if not why and self.sampled is not None:
            kept, lost = len(self.sampled.samples), self.sampled.lost_records
            if lost > LOST_SHARE_MAX * max(kept, 1):
                why = f"the sampler lost {lost} of {kept + lost} samples"
        if why:
            if not self.allowed:
                raise CodeCheckUnavailable(f"the check of which code ran did not hold: {why}")
            return {UNSAMPLED: why}
        assert self.sampled is not None
        if policy == "strict" and self.sampled.flooded_pids:
            limit_kib = code_sampler.MAPS_MAX_BYTES >> 10
            return {MAPS_FLOOD: f"{len(self.sampled.flooded_pids)} process(es) of the candidate made more memory "
                                f"mappings than are read ({limit_kib} KiB of /proc/<pid>/maps), or mapped more of "
                                "its build than is hashed: what ran in its calls cannot be attributed"}
        shares = code_attribution.attribute(self.sampled, list(res.call_windows_ns), self.ext_dir, self.manifest,
                                               list(res.op_windows_ns))
        if policy == "strict" and shares.unattributed > LOST_SHARE_MAX * max(shares.in_calls + shares.unattributed, 1):
            # no snapshot of that process's mappings after its first call: never judged as foreign code (seen
            # on a loaded 2-core machine: an honest candidate's whole run fell between two reads)
            why = (f"{shares.unattributed} samples inside the calls came from a process whose mappings were not "
                   "read after its first call")
            if not self.allowed:
                raise CodeCheckUnavailable(f"the check of which code ran did not hold: {why}")
            return {UNSAMPLED: why}
        log.info("which code ran (%s): %s; runtime: %s", policy, shares.summary(), shares.runtime_objects)
        found = code_attribution.judge_between(code_attribution.between_calls(
            self.sampled, list(res.call_windows_ns), self.ext_dir, self.manifest))
        found = found or code_attribution.judge(shares, policy)
        timed = code_attribution.within(list(res.call_windows_ns), timed_spans_ns) if policy == "strict" else []
        if not found and timed:
            timed_shares = code_attribution.attribute(self.sampled, timed, self.ext_dir, self.manifest,
                                                      list(res.op_windows_ns))
            found = code_attribution.judge(timed_shares, policy, "the timed calls")
        return found

    def close(self) -> None:
        if self.sampler is not None:
            if self.sampled is None:
                self.sampled = self.sampler.stop()
            self.sampler = None
