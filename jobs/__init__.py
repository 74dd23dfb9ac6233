"""Jobs that span training and benchmarking (the CPU pipeline); above `train/` and `evals/`."""
