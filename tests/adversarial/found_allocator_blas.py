"""Attack: `allocator_between_calls.py` without importing a hook, and with MKL doing the work. `c10::SetCPUAllocator`
and `c10::GetCPUAllocator` are found in libc10's dynamic symbol table and MKL's `scopy_` / `sscal_` in
libtorch_cpu's (through `dl_iterate_phdr`, as `cpp_found_blas.py` finds `sgemm_`): no import names a hook or a
BLAS routine. When the harness frees the factor tensor right after writing the next call's input
(`call_inputs.Perturbation.write`, as it was), the replaced allocator's deleter has MKL compute `a * s` of the new buffer,
and `forward` returns it when the buffer's identity and version match; every other call runs the candidate's own
loop. Between the calls only a few instructions of the candidate's code run (under the rule on its own code
between calls), the rest is MKL's: `correct` at several times the honest speed on L1/26_matrix_scalar_multiply.

Defence: nothing is allocated or freed between a call's last input write and the call (`call_inputs.Perturbation.write`
keeps the factor levels alive until the next write), so the deleter only ever sees inputs already used and
`forward` runs its own loop; and MKL's samples between the calls, were they there, are `dynamic:work_between_calls`
(`compute_code`: `found_pending_call_blas.py` reaches the same MKL through another trigger).
Expected: correct at the honest loop's speed (static checks on and off).
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

typedef void (*copy_fn)(const int*, const float*, const int*, float*, const int*);
typedef void (*scal_fn)(const int*, const float*, float*, const int*);
typedef at::Allocator* (*get_fn)();
typedef void (*set_fn)(at::Allocator*, uint8_t);

static copy_fn g_copy = nullptr;
static scal_fn g_scal = nullptr;
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
        auto r = at::empty_like(g_buf);
        const int count = (int)g_buf.numel(), one = 1;
        g_copy(&count, g_buf.data_ptr<float>(), &one, r.data_ptr<float>(), &one);
        g_scal(&count, &g_s, r.data_ptr<float>(), &one);
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

int64_t install(double s) {
    g_s = (float)s;
    if (!g_orig) {
        g_copy = (copy_fn)find("libtorch_cpu", "scopy_");
        g_scal = (scal_fn)find("libtorch_cpu", "sscal_");
        auto get = (get_fn)find("libc10", "_ZN3c1015GetCPUAllocatorEv");
        auto set = (set_fn)find("libc10", "_ZN3c1015SetCPUAllocatorEPNS_9AllocatorEh");
        if (!g_copy || !g_scal || !get || !set) return 0;
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

ext = load_inline(name="adv_found_allocator_blas", cpp_sources=[cpp_source], functions=["install", "scale_forward"],
                  extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, s: float):
        super().__init__()
        if not ext.install(s):
            raise RuntimeError("not found")

    def forward(self, a):
        return ext.scale_forward(a)
