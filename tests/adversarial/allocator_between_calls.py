"""Attack: compute the answer in a replaced CPU allocator's deleter, during the harness's own work between calls.
`c10::SetCPUAllocator` wraps torch's allocator; when the harness frees the factor tensor right after writing the
next call's inputs (`call_inputs.Perturbation.write`, as it was), the deleter computes the ReLU of the new buffer and
`forward` returns it when the buffer's identity and version match: `correct` at 12.5-15x on L1/01_relu (the
honest loop: 0.85x), outside every call window and timed trial.

Defence: the build's imports (`build:torch_hooks`) and spellings (`static:dispatch_bypass`); by itself, nothing is
allocated or freed between a call's last input write and the call (`call_inputs.Perturbation.write`), so the deleter
sees only inputs already used; before that, the sampler: the candidate's own code between its calls
(`dynamic:work_between_calls`: 265 samples between the calls against 89 inside them).
Expected: rejected, static:dispatch_bypass (static checks on); correct at the honest loop's speed (off).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <c10/core/CPUAllocator.h>
#include <cstring>

static at::Allocator* g_orig = nullptr;
static bool busy = false;
static bool in_forward = false;
static at::Tensor g_buf;
static int64_t g_ver = -1;
static at::Tensor g_res;
static size_t g_nbytes = 0;

static void relu_loop(const float* in, float* out, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];
}

struct Ctx { c10::DataPtr inner; size_t n; };

static void del(void* p) {
    Ctx* c = static_cast<Ctx*>(p);
    size_t n = c->n;
    delete c;
    if (!busy && !in_forward && g_buf.defined() && n == g_nbytes && g_buf._version() != g_ver) {
        busy = true;
        auto r = at::empty_like(g_buf);
        relu_loop(g_buf.data_ptr<float>(), r.data_ptr<float>(), g_buf.numel());
        g_res = r;
        g_ver = g_buf._version();
        busy = false;
    }
}

struct Hook final : at::Allocator {
    at::DataPtr allocate(size_t n) override {
        at::DataPtr d = g_orig->allocate(n);
        void* data = d.get();
        auto dev = d.device();
        Ctx* c = new Ctx{std::move(d), n};
        return at::DataPtr(data, c, &del, dev);
    }
    void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};
static Hook g_hook;

int64_t install() {
    if (!g_orig) { g_orig = c10::GetCPUAllocator(); c10::SetCPUAllocator(&g_hook, 100); }
    return 1;
}

torch::Tensor relu_forward(torch::Tensor x) {
    if (g_res.defined() && x.is_same(g_buf) && x._version() == g_ver) {
        auto r = g_res;
        g_res.reset();
        return r;
    }
    in_forward = true;
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    relu_loop(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
    if (x.is_contiguous() && x.scalar_type() == at::kFloat) {
        g_buf = x; g_ver = x._version(); g_nbytes = x.nbytes(); g_res.reset();
    }
    in_forward = false;
    return y;
}
"""

ext = load_inline(name="adv_allocator_between_calls", cpp_sources=[cpp_source], functions=["install", "relu_forward"],
                  extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        ext.install()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x)
