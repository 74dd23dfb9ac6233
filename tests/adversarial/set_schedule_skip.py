"""Attack: tell a timed call from a hidden check before it runs, by the schedule of their input sets. Timed calls
took base set `calls % 4` and check j took set `j % 4`, both in order; the perturbation keeps each element's sign
and its size within a factor of 4, so 64 sampled elements name a call's base set, and the held copies of a
check's output (the allocator's in-use bytes at the next call) say after the fact that a check ran. Counting
both, a call whose set matches only the timed schedule is certainly timed: about 3 in 4 timed calls were skipped
(an empty output returned), every check and the verification round computed: `correct` at 5.1-5.5x on
L1/01_relu (the honest loop: 0.7-0.85x), 8.8x on L1/08_sigmoid.

Defence: each timed call's base set and each check's are drawn independently and uniformly (a timed call's from
the OS's entropy, a check's from the evaluation's secret seeds, `children.timing_checks`): a call's set says
nothing about its kind, and a check seen says nothing about the next call.
Expected: no credit: `incorrect` when a check lands on a skipped call, or (once the schedule is lost) the honest
loop's time.
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <malloc.h>
#include <cstdint>
#include <cstring>
#include <vector>
#include <string>

static const int K = 64;
struct Cluster { int64_t numel; float v[K]; };
static std::vector<Cluster> clusters;
static std::vector<int> set_of;          // cluster -> timing set id or -1
static int cluster_of_set[4] = {-1, -1, -1, -1};
static int phase = 0;                    // 0 learning, 1 tracking, 2 lost
static long long T = 0, C = 0;
static const void* prev_ptr = nullptr;
static long long prev_inuse = 0;
static int prev_set = -1;
static bool pending = false;
static long long group_calls = 0, timed_in_block = 0, n_per_block = -1;
static long long skipped = 0, computed = 0, checks_seen = 0;
static std::string log_text;

static long long inuse() { struct mallinfo2 m = mallinfo2(); return (long long)m.uordblks + (long long)m.hblkhd; }

static int find_cluster(const float* p, int64_t n) {
    float s[K];
    for (int k = 0; k < K; ++k) s[k] = p[(int64_t)((k * 2654435761ULL + 17) % (uint64_t)n)];
    for (size_t c = 0; c < clusters.size(); ++c) {
        if (clusters[c].numel != n) continue;
        bool ok = true;
        for (int k = 0; k < K && ok; ++k) {
            float a = clusters[c].v[k], b = s[k];
            if ((a < 0) != (b < 0)) ok = false;
            else if (a == 0 || b == 0) ok = (a == b);
            else { float r = a / b; ok = r < 4.05f && r > 1.0f / 4.05f; }
        }
        if (ok) return (int)c;
    }
    Cluster cl; cl.numel = n; std::memcpy(cl.v, s, sizeof s);
    clusters.push_back(cl); set_of.push_back(-1);
    return -(int)clusters.size();   // new: -(index+1)
}

static torch::Tensor relu_compute(const torch::Tensor& xc) {
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];
    return y;
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    const float* p = xc.data_ptr<float>();
    const int64_t n = xc.numel();
    const void* ptr = (const void*)p;
    long long now = inuse();
    bool same_block = ptr == prev_ptr;
    int c = find_cluster(p, n);
    bool is_new = c < 0;
    if (is_new) c = -c - 1;
    bool skip = false;
    if (phase == 0) {
        if (!same_block) group_calls = 0;
        if (!is_new && c >= 3 && set_of[c] < 0) {       // first repeat: this cluster is timing set 0
            for (int s = 0; s < 4; ++s) if (c + s < (int)clusters.size()) { set_of[c + s] = s; cluster_of_set[s] = c + s; }
            T = 3 + (cluster_of_set[3] >= 0 ? 1 : 0);
            C = 0;
            timed_in_block = group_calls;
            phase = 1;
            prev_set = 0; pending = true;
        }
        group_calls++;
    } else if (phase == 1) {
        bool prev_check = false;
        if (pending) {
            prev_check = same_block && (now - prev_inuse) > (long long)(n * 2);  // > half the input's bytes
            if (prev_check) { if (prev_set != C % 4) phase = 2; C++; checks_seen++; }
            else { if (prev_set != T % 4) phase = 2; T++; timed_in_block++; }
        }
        if (!same_block) {
            if (n_per_block < 0 && timed_in_block > 0) n_per_block = timed_in_block;
            timed_in_block = 0;
        }
        int s = set_of[c];
        if (s < 0 && is_new && cluster_of_set[3] < 0) { s = 3; set_of[c] = 3; cluster_of_set[3] = c; }
        if (phase == 1 && s >= 0) {
            bool verify = n_per_block > 0 && timed_in_block >= n_per_block;
            bool timed_only = (s == T % 4) && (s != C % 4 || prev_check);
            skip = n_per_block > 0 && !verify && timed_only;
            prev_set = s; pending = true;
        } else { pending = false; phase = 2; }
    }
    prev_ptr = ptr; prev_inuse = now;
    if (skip) { skipped++; return torch::empty_like(xc); }
    computed++;
    return relu_compute(xc);
}

std::vector<int64_t> stats() { return {skipped, computed, checks_seen, T, C, phase, n_per_block}; }
"""

ext = load_inline(name="adv_set_schedule_skip", cpp_sources=[cpp_source], functions=["relu_forward", "stats"],
                  extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_forward(x)
