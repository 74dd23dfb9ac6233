"""The harness, one evaluation's parent side, split by job (docs/architecture.md, "kernelbench/ inside"):

- here, judging: `evaluate` (the stages), `measurement` (the run stage's children), `reference` and
  `reference_cache`, `paired` and `paired_judge` (CPU timing), `compare`, `verdict`, `static_checks`,
  `code_check`, `result` (the `EvalResult`), `feedback`; `protocol` and `record_codec` (the records both
  ends speak) and `config` (`EvalConfig`) at the bottom, which the child may import too;
- `build/`: the compile child's job, the build cache and its quota, precompiled headers, the toolchain, the
  built library's imports (`symbols`), Triton's rules;
- `isolation/`: the sandbox (uid slots, bubblewrap, rlimits, cgroups, the warm zygote's parent side);
- `insight/`: what the agent is told besides the verdict (profiles, roofline, CPU peaks, ncu, telemetry);
- `child/`: everything that runs inside the sandbox.
"""
