"""Pure reward functions: EvalResult -> per-kernel score, per-turn returns, group advantages."""
