"""Everything that runs inside the sandbox: the worker, timing, op tracing, kernel-call counting, inputs."""
