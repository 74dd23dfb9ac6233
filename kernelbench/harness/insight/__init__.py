"""What the agent is told besides the verdict: profiles, roofline, CPU peaks, Nsight Compute, telemetry."""
