#include "models/random_tensors.h"

#include <cmath>

namespace duet {

void RandomTensorWriter::uniform(const std::string& name, std::vector<int64_t> shape, float lo, float hi) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    DeviceTensorStorage* device = set_.device_storage();
    if (device != nullptr && n >= device->min_elements()) {
        uint8_t* out = set_.add_on_device(name, DType::BF16, std::move(shape));
        device->fill_uniform_bf16(out, n, next_key(), lo, hi);
        return;
    }
    auto* out = reinterpret_cast<uint16_t*>(set_.add(name, DType::BF16, std::move(shape)));
    const uint64_t key = next_key();
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
