"""Attack: dilute the check of which code ran with untimed work. `cpp_found_blas.py`'s route (MKL's `sgemm_` found
through `dl_iterate_phdr` and libtorch_cpu's symbol table) on every call, plus 100 ms of spinning in the
candidate's own code in each of the first 7 calls: the correctness calls, untimed and recognisable by their
place. The rule pooled the samples of every call, so the timed calls' MKL time fell under 10 % of the whole:
`correct`, no flag, 0.95-0.96x on L1/21_matmul_square, where `cpp_found_blas.py` alone is rejected.

Defence: the timed calls are judged by themselves as well: the call windows inside the candidate's paired
blocks, as the parent timed them (`paired.Pairing.candidate_block_spans_ns`, `code_check`); padding there costs
the time it hides.
Expected: rejected, dynamic:library_compute (static checks off; on: the same, no static rule applies).
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <link.h>
#include <cstring>
#include <cstdint>
#include <chrono>

typedef void (*gemm_fn)(const char*, const char*, const int*, const int*, const int*, const float*,
                        const float*, const int*, const float*, const int*, const float*, float*, const int*);

struct Found { const char* lib; const char* name; void* addr; };

static int visit(struct dl_phdr_info* info, size_t, void* data) {
    Found* f = static_cast<Found*>(data);
    if (!info->dlpi_name || !std::strstr(info->dlpi_name, f->lib)) return 0;
    const ElfW(Addr) base = info->dlpi_addr;
    const ElfW(Dyn)* dyn = nullptr;
    for (int i = 0; i < info->dlpi_phnum; ++i)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn)*)(base + info->dlpi_phdr[i].p_vaddr);
    if (!dyn) return 0;
    const ElfW(Sym)* syms = nullptr; const char* strs = nullptr; const uint32_t* gnu = nullptr;
    for (; dyn->d_tag != DT_NULL; ++dyn) {
        ElfW(Addr) p = dyn->d_un.d_ptr < base ? base + dyn->d_un.d_ptr : dyn->d_un.d_ptr;
        if (dyn->d_tag == DT_SYMTAB) syms = (const ElfW(Sym)*)p;
        if (dyn->d_tag == DT_STRTAB) strs = (const char*)p;
        if (dyn->d_tag == DT_GNU_HASH) gnu = (const uint32_t*)p;
    }
    if (!syms || !strs || !gnu) return 0;
    uint32_t h = 5381;
    for (const char* c = f->name; *c; ++c) h = h * 33 + (unsigned char)*c;
    const uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_size = gnu[2];
    const uint32_t* buckets = gnu + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
    const uint32_t* chain = buckets + nbuckets;
    for (uint32_t i = buckets[h % nbuckets]; i >= symoffset; ++i) {
        const uint32_t h2 = chain[i - symoffset];
        if ((h | 1) == (h2 | 1) && std::strcmp(f->name, strs + syms[i].st_name) == 0) {
            f->addr = (void*)(base + syms[i].st_value);
            return 1;
        }
        if (h2 & 1) break;
    }
    return 0;
}

torch::Tensor linear_found(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    static gemm_fn gemm = nullptr;
    if (!gemm) {
        Found f{"libtorch_cpu", "sgemm_", nullptr};
        dl_iterate_phdr(visit, &f);
        gemm = (gemm_fn)f.addr;
    }
    auto xc = x.contiguous(); auto wc = weight.contiguous(); auto bc = bias.contiguous();
    const int M = xc.size(0), K = xc.size(1), N = wc.size(0);
    auto y = torch::empty({M, N}, xc.options());
    float* out = y.data_ptr<float>();
    const float* b = bc.data_ptr<float>();
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) out[(int64_t)i * N + j] = b[j];
    const float one = 1.0f;
    // column-major: y^T (N x M) = W (N x K) . x^T (K x M), with beta = 1 over the bias rows
    gemm("T", "N", &N, &M, &K, &one, wc.data_ptr<float>(), &K, xc.data_ptr<float>(), &K, &one, out, &N);
    static int calls = 0;
    if (calls++ < 7) {  // the correctness calls (5 draws and 2 other distributions of one configuration)
        volatile double acc = 0.0;
        const auto t0 = std::chrono::steady_clock::now();
        while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 0.1)
            for (int i = 0; i < 1000; ++i) acc = acc + 1.0;
    }
    return y;
}
"""

ext = load_inline(name="adv_found_blas_padded", cpp_sources=[cpp_source], functions=["linear_found"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.linear_found(x, self.linear.weight, self.linear.bias)
