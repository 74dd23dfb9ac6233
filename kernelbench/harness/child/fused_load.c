/* The perturbed load of timed and hidden check calls in one pass (kernelbench.harness.child.call_inputs,
 * `Perturbation`): out[i] = v[i] * (low + step * b[i]), with b[i] one uniform byte per element from a
 * counter-based generator (splitmix64 of key + word index), so no factor array is ever written or read.
 *
 * Why: on the CPU the same values took a byte draw, a cast and an `addcmul` over two precomputed terms,
 * 2.25 ms per 2M float32 elements on a 2-core VM; this loop takes ~0.8 ms (a `copy_` of them: 0.58 ms)
 * and needs no terms (which held twice each timing set's floating tensors). Built by the trusted parent
 * (kernelbench.harness.build.fused_load) and mapped by every CPU child before any candidate code runs.
 */
#include <stdint.h>

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

#define CHUNK 2048 /* elements per batch of drawn bytes: 2 KiB on the stack, then one vectorisable loop */

#define SCALE_BY_BYTES(NAME, T)                                                                        \
    void NAME(const T *restrict v, T *restrict out, int64_t n, uint64_t key, T low, T step) {          \
        uint64_t words[CHUNK / 8];                                                                     \
        const uint8_t *bytes = (const uint8_t *)words;                                                 \
        for (int64_t start = 0; start < n; start += CHUNK) {                                           \
            int64_t m = n - start < CHUNK ? n - start : CHUNK;                                         \
            uint64_t first = (uint64_t)(start / 8);                                                    \
            for (int64_t j = 0; j < (m + 7) / 8; ++j)                                                  \
                words[j] = mix64(key + (first + (uint64_t)j + 1) * 0x9e3779b97f4a7c15ULL);             \
            for (int64_t k = 0; k < m; ++k)                                                            \
                out[start + k] = v[start + k] * (low + step * (T)bytes[k]);                            \
        }                                                                                              \
    }

SCALE_BY_BYTES(ka_scale_by_bytes_f32, float)
SCALE_BY_BYTES(ka_scale_by_bytes_f64, double)
