#include "models/random_tensors.h"

#include <cmath>

namespace duet {

void RandomTensorWriter::uniform(const std::string& name, std::vector<int64_t> shape, float lo, float hi) {
    auto* out = reinterpret_cast<uint16_t*>(set_.add(name, DType::BF16, std::move(shape)));
    const uint64_t key = next_key();
    const int64_t n = set_.find(name)->numel();
    parallel_for(pool_, n, 1 << 16, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            out[i] = counter_random::uniform_bf16(key, static_cast<uint64_t>(i), lo, hi);
        }
    });
}

void RandomTensorWriter::matrix(const std::string& name, std::vector<int64_t> shape) {
    const float bound = std::sqrt(3.0f / static_cast<float>(shape.back()));
    uniform(name, std::move(shape), -bound, bound);
}

}  // namespace duet
