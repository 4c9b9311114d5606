// Built with -mavx2 -mfma (see CMakeLists.txt); called only when the CPU has them.
#include <cstdint>

#include "models/fish_codec/snake_kernel.h"

namespace duet::fish_codec {

void snake_rows_avx2(const float* alpha, const float* inv_alpha, float* x, int64_t channels, int64_t begin,
                     int64_t end) {
    snake_detail::snake_rows(alpha, inv_alpha, x, channels, begin, end);
}

}  // namespace duet::fish_codec
