"""Attack: `found_allocator_blas.py` with another trigger. Since the harness neither allocates nor frees anything between
a call's last input write and the call, an allocator hook runs only while the buffers hold stale inputs; so this
candidate makes the interpreter itself run its code: `Py_AddPendingCall`, found in libpython's dynamic symbol table
(no import), queues a callback that the main thread runs at its next check for pending work (after any call into
C returns) and that queues itself again. The first time it runs after a buffer's version changed, the write is
done: MKL's `scopy_` / `sscal_` (found in libtorch_cpu's table) compute `a * s`, and `forward` returns it.

Defence: samples between the calls in a compute routine linked into torch (`compute_code`):
`dynamic:work_between_calls`. Expected: rejected, dynamic:work_between_calls (static checks on and off).
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
typedef int (*pending_fn)(int (*)(void*), void*);

static copy_fn g_copy = nullptr;
static scal_fn g_scal = nullptr;
static pending_fn g_add = nullptr;
static bool in_forward = false;
static at::Tensor g_buf;
static int64_t g_ver = -1;
static at::Tensor g_res;
static size_t g_nbytes = 0;
static float g_s = 1.0f;

static int pending(void*) {
    if (!in_forward && g_buf.defined() && g_buf._version() != g_ver) {
        auto r = at::empty_like(g_buf);
        const int count = (int)g_buf.numel(), one = 1;
        g_copy(&count, g_buf.data_ptr<float>(), &one, r.data_ptr<float>(), &one);
        g_scal(&count, &g_s, r.data_ptr<float>(), &one);
        g_res = r;
        g_ver = g_buf._version();
    }
    g_add(pending, nullptr);  // queued again: the interpreter's next check runs it
    return 0;
}

int64_t install(double s) {
    g_s = (float)s;
    if (!g_add) {
        g_copy = (copy_fn)find("libtorch_cpu", "scopy_");
        g_scal = (scal_fn)find("libtorch_cpu", "sscal_");
        g_add = (pending_fn)find("libpython", "Py_AddPendingCall");
        if (!g_copy || !g_scal || !g_add) return 0;
        g_add(pending, nullptr);
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

ext = load_inline(name="adv_found_pending_call_blas", cpp_sources=[cpp_source], functions=["install", "scale_forward"],
                  extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, s: float):
        super().__init__()
        if not ext.install(s):
            raise RuntimeError("not found")

    def forward(self, a):
        return ext.scale_forward(a)
