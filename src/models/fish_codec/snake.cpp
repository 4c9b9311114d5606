#include "kernels/cpu/simd_level.h"
#include "models/fish_codec/layers.h"
#include "models/fish_codec/snake_kernel.h"

namespace duet::fish_codec {

// snake_avx2.cpp: the same loop built for AVX2 + FMA.
void snake_rows_avx2(const float* alpha, const float* inv_alpha, float* x, int64_t channels, int64_t begin,
                     int64_t end);

void snake(const Snake& s, float* x, int64_t steps, ThreadPool* pool) {
    const int64_t channels = static_cast<int64_t>(s.alpha.size());
    const bool avx2 = cpu::active_simd_level() != cpu::SimdLevel::Scalar;
    parallel_for(pool, steps, std::max<int64_t>(1, 16384 / channels), [&](int64_t begin, int64_t end) {
        if (avx2)
            snake_rows_avx2(s.alpha.data(), s.inv_alpha.data(), x, channels, begin, end);
        else
            snake_detail::snake_rows(s.alpha.data(), s.inv_alpha.data(), x, channels, begin, end);
    });
}

}  // namespace duet::fish_codec
