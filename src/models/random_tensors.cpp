#include "models/random_tensors.h"

#include <cmath>

namespace duet {

uint64_t RandomTensorWriter::mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void RandomTensorWriter::uniform(const std::string& name, std::vector<int64_t> shape, float lo, float hi) {
    auto* out = reinterpret_cast<uint16_t*>(set_.add(name, DType::BF16, std::move(shape)));
    const uint64_t key = next_key();
    const int64_t n = set_.find(name)->numel();
    parallel_for(pool_, n, 1 << 16, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) out[i] = f32_to_bf16(lo + (hi - lo) * unit(key + static_cast<uint64_t>(i)));
    });
}

void RandomTensorWriter::matrix(const std::string& name, std::vector<int64_t> shape) {
    const float bound = std::sqrt(3.0f / static_cast<float>(shape.back()));
    uniform(name, std::move(shape), -bound, bound);
}

}  // namespace duet
