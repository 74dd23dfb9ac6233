"""Attack: `found_allocator_blas.py` with ATen itself doing the work instead of MKL. The allocator hook is found in
libc10's dynamic symbol table as before, and the op in libtorch_cpu's: `at::_ops::mul_Scalar::call`, the entry the
dispatcher's own `at::mul` calls (no import names it, no dispatcher API is spelled). When the harness frees the
factor tensor right after writing the next call's input, the deleter has ATen's multiply kernel compute `a * s` of
the new buffer, and `forward` returns it when the buffer's identity and version match. Between the calls the
samples fall in libtorch_cpu's elementwise kernels, where the harness's own input writes run too: `correct` at
14.8x on L1/26_matrix_scalar_multiply (static checks off).

Defence: nothing is allocated or freed between a call's last input write and the call (`Perturbation.write` keeps
the factor levels alive until the next write), so the deleter only sees inputs already used.
Expected: rejected, static:dispatch_bypass (static checks on: the mangled name's spelling); correct at the honest
loop's speed (off).
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <link.h>
#include <cstring>
#include <cstdint>

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

static void* find(const char* lib, const char* name) {
    Found f{lib, name, nullptr};
    dl_iterate_phdr(visit, &f);
    return f.addr;
}

typedef at::Tensor (*mul_fn)(const at::Tensor&, const c10::Scalar&);
typedef at::Allocator* (*get_fn)();
typedef void (*set_fn)(at::Allocator*, uint8_t);

static mul_fn g_mul = nullptr;
static at::Allocator* g_orig = nullptr;
static bool busy = false;
static bool in_forward = false;
static at::Tensor g_buf;
static int64_t g_ver = -1;
static at::Tensor g_res;
static size_t g_nbytes = 0;
static float g_s = 1.0f;

struct Ctx { c10::DataPtr inner; size_t n; };

static void del(void* p) {
    Ctx* c = static_cast<Ctx*>(p);
    size_t n = c->n;
    delete c;
    if (!busy && !in_forward && g_buf.defined() && n == g_nbytes && g_buf._version() != g_ver) {
        busy = true;
        g_res = g_mul(g_buf, c10::Scalar((double)g_s));
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

int64_t install(double s) {
    g_s = (float)s;
    if (!g_orig) {
        g_mul = (mul_fn)find("libtorch_cpu", "_ZN2at4_ops10mul_Scalar4callERKNS_6TensorERKN3c106ScalarE");
        auto get = (get_fn)find("libc10", "_ZN3c1015GetCPUAllocatorEv");
        auto set = (set_fn)find("libc10", "_ZN3c1015SetCPUAllocatorEPNS_9AllocatorEh");
        if (!g_mul || !get || !set) return 0;
        g_orig = get();
        set(&g_hook, 100);
    }
    return 1;
}

torch::Tensor scale_forward(torch::Tensor x) {
    if (g_res.defined() && x.is_same(g_buf) && x._version() == g_ver) {
        auto r = g_res;
        g_res.reset();
        return r;
    }
    in_forward = true;
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] * g_s;
    if (x.is_contiguous() && x.scalar_type() == at::kFloat) {
        g_buf = x; g_ver = x._version(); g_nbytes = x.nbytes(); g_res.reset();
    }
    in_forward = false;
    return y;
}
"""

ext = load_inline(name="adv_found_allocator_aten", cpp_sources=[cpp_source], functions=["install", "scale_forward"],
                  extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, s: float):
        super().__init__()
        if not ext.install(s):
            raise RuntimeError("not found")

    def forward(self, a):
        return ext.scale_forward(a)
