"""Everything that runs inside the sandbox: the worker and the zygote, timing, op tracing, kernel-call counting,
the reference's and the candidate's jobs, and the formats the parent reads back (`report`, `call_frames`,
`result_files`, `build_manifest`, `build_flags`, `progress`). Imports only `kernelbench.harness.protocol`
(and its codec), the task records and its own modules (tests/test_architecture.py)."""
