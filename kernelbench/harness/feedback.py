"""The short text the agent reads next turn.

Kevin-32B (arXiv 2507.11948) feeds back the evaluation's outcome each turn (compiler errors, the mismatch,
the speedup). The harness returns verdicts (status, correctness, speedup, flags); turning a verdict into a
training reward is `rewards.score`'s job alone, under the run's own settings (`correctness_weight`, a speedup
cap): a result carries no score.
"""

from __future__ import annotations

from kernelbench.harness.result import CORRECT, HARNESS_ERROR, REJECTED

MAX_FEEDBACK_CHARS = 2500

FLAG_REASONS = {
    "suspicious_speedup": "speedup above the suspicion threshold; re-verified with fresh inputs and the lower speedup kept",
    "timing_inconsistent": "the reported trial times exceed the wall time of the run; timers were tampered with",
    "dynamic:timer_patched": "timing functions were replaced after the candidate was imported",
    "dynamic:harness_tampered": "the harness's own checking or measuring code was replaced in the run process",
    "dynamic:threads": "the candidate started threads (work could escape the timed window)",
    "dynamic:no_kernel_call": "no custom kernel ran during forward",
    "sandbox:rlimits": "ran without bubblewrap (plain child with rlimits only)",
    "interpreted": "Triton kernels ran under Triton's interpreter on CPU: correctness only, no speedup measured",
}
NOT_CHECKS = ("sandbox:rlimits", "interpreted")
"""Flags that record conditions, not checks that fired (not listed under `checks:`)."""


def flag_line(flag: str, reason: str = "") -> str:
    return f"- {flag}: {reason or FLAG_REASONS.get(flag, 'policy check fired')}"


def render(status: str, *, detail: str = "", speedup: float = 0.0, runtime_ms: float = 0.0, ref_runtime_ms: float = 0.0,
           flags: tuple[str, ...] = (), reasons: dict[str, str] | None = None, max_abs_error: float = 0.0,
           profile: str = "") -> str:
    """One feedback text: status line, then what went wrong or how fast it ran, then the flags, then the profile
    of a correct candidate (`Profile.summary`; last, so a long text is cut there first)."""
    reasons = reasons or {}
    lines = [f"status: {status}"]
    if status == HARNESS_ERROR:
        lines.append("the evaluation harness failed; this is not your kernel's fault and the attempt is not scored")
    if status == CORRECT and "interpreted" in flags:
        lines.append(f"correct under Triton's interpreter on CPU (max abs error {max_abs_error:.3g}); interpreted "
                     "timings say nothing about a kernel's speed, so no speedup is measured")
    elif status == CORRECT:
        lines.append(f"correct; runtime {runtime_ms:.4g} ms vs eager PyTorch {ref_runtime_ms:.4g} ms: "
                     f"speedup {speedup:.3g}x (max abs error {max_abs_error:.3g})")
    if detail:
        lines.append(detail.strip())
    shown = [f for f in flags if f not in NOT_CHECKS]
    if shown:
        lines.append("checks:" if status != REJECTED else "rejected by checks (score 0):")
        lines.extend(flag_line(f, reasons.get(f, "")) for f in shown)
    if profile:
        lines.append(profile)
    text = "\n".join(lines)
    if len(text) > MAX_FEEDBACK_CHARS:
        text = text[: MAX_FEEDBACK_CHARS - 20] + "\n... (truncated)"
    return text
