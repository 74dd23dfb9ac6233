"""The sandbox: starting a child under its own uid, namespaces, rlimits, cgroup and seccomp, the warm zygote, CPU accounting."""
