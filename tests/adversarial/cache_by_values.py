"""Attack: skip work on repeated inputs. A cheap C++ fingerprint (64 sampled values) is computed on every
call, so a kernel always runs; an input seen before returns the stored output of the expensive naive
matmul. Outputs are always right; only the timing is a lie: the rotated timing sets repeat, so every
timed call is a lookup and the speedup is far above 10x.

Defence: a speedup above `suspicious_speedup` is re-verified; the re-verification must not accept a
speed that comes from not computing (timing inputs that never repeat, or rejection when a repeat is much
faster than a first call).
Expected: score 0 (rejected or incorrect), flag suspicious_speedup.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

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
"""

ext = load_inline(name="adv_cache_by_values", cpp_sources=[cpp_source], functions=["fingerprint", "naive_linear"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.cache = {}

    def forward(self, x):
        key = ext.fingerprint(x)
        if key not in self.cache:
            self.cache[key] = ext.naive_linear(x, self.linear.weight, self.linear.bias)
        return self.cache[key]
