"""Attack: cache a linear first stage per input set and scale it. The task is a linear layer; the C++ kernel
keeps x @ W^T of every input it computes (the correctness calls, the first timing calls) and, when a later
input is a scalar multiple of a kept one (one ratio checked at 32 sampled positions), returns g * (x @ W^T) + b:
a multiply-add per output instead of a matmul. When the timed inputs were a correctness set times one factor
per call, every timed call, check call and verification call was such a multiple: correct outputs, a 100x+
"speedup" (111x reported).

Defence: the timed inputs are their own sets, drawn from secret seeds (never a correctness set), and every
element of every call is multiplied by its own fresh factor (`kernelbench.harness.child.call_inputs.check_inputs`), so no timed
input is a scalar multiple of anything seen before; the cache never hits and the naive matmul is timed.
Expected: correct with an honest speedup below 1x (naive loops against the BLAS-backed reference), no
suspicious_speedup flag.
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The integrity attacks' shared C++ library (tests/test_adversarial.py): every candidate that differs only in
# what forward calls shares one build. This file's attack is the call below.
cpp_source = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstdint>
#include <vector>

torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];
    return y;
}

torch::Tensor relu_in_place(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous(), "contiguous input expected");
    float* p = x.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) p[i] = p[i] < 0.0f ? 0.0f : p[i];
    return x;
}

torch::Tensor alias_input(torch::Tensor x) {
    TORCH_CHECK(x.dim() > 0, "tensor input expected");
    return x;
}

int64_t spin(int64_t iterations) {
    volatile int64_t counter = 0;
    for (int64_t i = 0; i < iterations; ++i) counter = counter + 1;
    return counter;
}

struct Stage {
    std::vector<float> x;
    std::vector<float> xw;  // x @ w^T, before the bias
};
static std::vector<Stage> stages;

torch::Tensor stage_cached_linear(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    const int64_t m = xc.size(0), k = xc.size(1), n = wc.size(0), numel = m * k;
    const float* xp = xc.data_ptr<float>();
    const float* wp = wc.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    auto y = torch::empty({m, n}, xc.options());
    float* yp = y.data_ptr<float>();
    for (const Stage& s : stages) {  // a scalar multiple of a set seen before: scale its first stage
        if (static_cast<int64_t>(s.x.size()) != numel || s.x[0] == 0.0f) continue;
        const float g = xp[0] / s.x[0];
        bool hit = true;
        for (int64_t t = 1; t < 32 && hit; ++t) {
            const int64_t p = (t * 7919) % numel;
            const float want = g * s.x[p];
            hit = std::fabs(xp[p] - want) <= 1e-5f * std::fabs(want) + 1e-7f;
        }
        if (!hit) continue;
        for (int64_t i = 0; i < m * n; ++i) yp[i] = g * s.xw[i] + bp[i % n];
        return y;
    }
    Stage s;
    s.x.assign(xp, xp + numel);
    s.xw.resize(m * n);
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            float acc = 0.0f;
            for (int64_t t = 0; t < k; ++t) acc += xp[i * k + t] * wp[j * k + t];
            s.xw[i * n + j] = acc;
            yp[i * n + j] = acc + bp[j];
        }
    if (stages.size() < 16) stages.push_back(std::move(s));
    return y;
}
"""

ext = load_inline(name="adv_integrity", cpp_sources=[cpp_source],
    functions=["relu_forward", "relu_in_place", "alias_input", "spin", "stage_cached_linear"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.stage_cached_linear(x, self.linear.weight, self.linear.bias)
