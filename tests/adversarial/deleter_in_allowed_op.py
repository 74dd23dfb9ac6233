"""Attack: run ATen's matmul inside an op the policy allows. A storage made by `torch::from_blob` with a deleter
(the candidate's lambda, which calls `at::addmm_out`, MKL underneath) is released inside `set_`, an allowed
view op: the op tracer's mode is off while an op it traced runs, so the nested `addmm` is never seen, and the
check of which code ran charged the MKL samples, on the calling thread inside `set_`'s window, to the allowed
op (`torch_op`). A spin in the candidate's own code of 0.8 times the matmul's time kept the outside share under
60 %: `correct`, no flag, 0.50x on L1/21_matmul_square where the honest naive loop scores 0.066x.

Defence: the time an allowed op may spend is bounded by the data it moves (`call_checks.CallTracer` records
the bytes a fill or copy writes, none for views, metadata and allocation; `code_attribution` charges an op's
window at most that data's time at a floor bandwidth): `set_` moves nothing, so MKL's samples inside it are
foreign.
Expected: rejected, dynamic:library_compute.
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <chrono>

torch::Tensor linear_deleter(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto xc = x.contiguous();
    auto wt = weight.contiguous();
    auto bc = bias.contiguous();
    auto out = torch::empty({xc.size(0), wt.size(0)}, xc.options());
    const auto t0 = std::chrono::steady_clock::now();
    {
        static float dummy[1];
        auto blob = torch::from_blob(dummy, {1}, [xc, wt, bc, out](void*) mutable {
            at::addmm_out(out, bc, xc, wt.t());
        }, xc.options());
        auto other = torch::empty({0}, xc.options());
        blob.set_(other.storage());  // the last reference to the blob's storage goes here, inside an allowed op
    }
    const double busy = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 0.8;
    volatile double acc = 0.0;
    const auto t1 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count() < busy)
        for (int i = 0; i < 1000; ++i) acc = acc + 1.0;
    return out;
}
"""

ext = load_inline(name="adv_deleter_in_allowed_op", cpp_sources=[cpp_source], functions=["linear_deleter"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.linear_deleter(x, self.linear.weight, self.linear.bias)
