"""Attack: make the parent parse without end. The parent's sampler reads `/proc/<pid>/maps` of the run child to
say which code each sample ran, and the candidate makes those mappings: one buffer split into ~20,000 areas
(`madvise` on every other page; native code reaches it as a plain libc call, no rule refuses it) made each read
~1.5 MB, parsed by the trusted parent after every 20 ms drain, outside every cgroup (with 24-60 forked copies
3.5x the parent's CPU of an honest evaluation). The kernel itself is the honest naive linear: on the base code
`correct`, the parent's reading unbounded.

Defence: reads of a process's maps stop at `code_sampler.MAPS_MAX_BYTES` (1 MiB); such a process is not read
again and a `strict` evaluation cannot attribute its calls' code; the sweeps take at most a tenth of the wall
time (`SWEEP_SHARE_MAX`).
Expected: rejected, dynamic:mapping_flood (static checks off; on: static:forbidden_import for `mmap`).
"""
import mmap

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The suite's shared C++ library (tests/test_adversarial.py): every candidate that differs only in what
# forward calls shares one build. This file's attack is the call below.
cpp_source = r"""
#include <torch/extension.h>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>
#include <cstdlib>

torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];
    return y;
}

torch::Tensor ghost_relu(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];
    return y;
}

torch::Tensor decoy_touch(torch::Tensor x) {
    auto options = x.options();
    auto y = torch::empty({1}, options);
    y.data_ptr<float>()[0] = 0.0f;
    return y;
}

torch::Tensor copy_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) out[i] = in[i];
    return y;
}

torch::Tensor alias_input(torch::Tensor x) {
    TORCH_CHECK(x.dim() > 0, "tensor input expected");
    return x;
}

torch::Tensor relu_then_zero(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous(), "contiguous input expected");
    auto y = torch::empty_like(x);
    float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];
    for (int64_t i = 0; i < x.numel(); ++i) in[i] = 0.0f;
    return y;
}

torch::Tensor column_mean(torch::Tensor x) {
    auto xc = x.contiguous();
    const int64_t m = xc.size(0), n = xc.size(1);
    auto row = torch::zeros({1, n}, xc.options());
    const float* in = xc.data_ptr<float>();
    float* out = row.data_ptr<float>();
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) out[j] += in[i * n + j];
    for (int64_t j = 0; j < n; ++j) out[j] /= static_cast<float>(m);
    return row;
}

torch::Tensor null_write(torch::Tensor x) {
    volatile std::uintptr_t address = 0;  // read at run time: the compiler cannot drop or rewrite the store
    *reinterpret_cast<volatile float*>(address) = static_cast<float>(x.numel());
    return x;
}

torch::Tensor spin_forever(torch::Tensor x) {
    volatile int64_t spins = 0;
    while (spins >= 0) spins = spins + 1 > 1000 ? 1 : spins + 1;
    return x;
}

static std::vector<std::unique_ptr<char[]>> hoard;

torch::Tensor hog_memory(torch::Tensor x) {
    const size_t block = size_t(64) << 20;
    for (;;) {
        hoard.emplace_back(new char[block]);
        std::memset(hoard.back().get(), 1, block);
    }
    return x;
}

torch::Tensor give_up(torch::Tensor x) {
    if (x.numel() >= 0) std::abort();
    return x;
}

torch::Tensor quit_clean(torch::Tensor x) {
    if (x.numel() >= 0) std::exit(0);
    return x;
}

double fingerprint(torch::Tensor x) {
    auto xc = x.contiguous();
    const float* p = xc.data_ptr<float>();
    const int64_t n = xc.numel();
    double h = 0.0;
    for (int64_t k = 0; k < 64; ++k) h = h * 1.000001 + p[(k * 7919) % n];
    return h;
}

torch::Tensor naive_linear(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    const int64_t m = xc.size(0), k = xc.size(1), n = wc.size(0);
    auto y = torch::empty({m, n}, xc.options());
    const float* xp = xc.data_ptr<float>();
    const float* wp = wc.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
            float acc = 0.0f;
            for (int64_t t = 0; t < k; ++t) acc += xp[i * k + t] * wp[j * k + t];
            yp[i * n + j] = acc + bp[j];
        }
    }
    return y;
}

static inline float to_bf16(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    bits &= 0xFFFF0000u;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}

torch::Tensor bf16_linear(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    const int64_t m = xc.size(0), k = xc.size(1), n = wc.size(0);
    auto y = torch::empty({m, n}, xc.options());
    const float* xp = xc.data_ptr<float>();
    const float* wp = wc.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
            float acc = 0.0f;
            for (int64_t t = 0; t < k; ++t) acc = to_bf16(acc + to_bf16(xp[i * k + t]) * to_bf16(wp[j * k + t]));
            yp[i * n + j] = acc + bp[j];
        }
    }
    return y;
}
"""

ext = load_inline(name="adv_kernels", cpp_sources=[cpp_source],
    functions=["relu_forward", "ghost_relu", "decoy_touch", "copy_forward", "alias_input", "relu_then_zero", "column_mean", "null_write", "spin_forever", "hog_memory", "give_up", "quit_clean", "fingerprint", "naive_linear", "bf16_linear"])



AREAS = 20_000
# the candidate's own address space split into AREAS mappings (MADV_DONTDUMP on every other page of one buffer)
_buffer = mmap.mmap(-1, 2 * AREAS * mmap.PAGESIZE)
for _k in range(AREAS):
    _buffer.madvise(mmap.MADV_DONTDUMP, 2 * _k * mmap.PAGESIZE, mmap.PAGESIZE)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.naive_linear(x, self.linear.weight, self.linear.bias)
