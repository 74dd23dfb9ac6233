"""The harness, parent side: evaluate, builds, sandbox, compare, verdicts, static checks."""
