// Deterministic random bf16 tensors for models built without a checkpoint (benchmarks at real sizes,
// the demo). Counter-based (splitmix64 of seed, tensor and index), so every element is made
// independently and in parallel, and one seed gives the same weights on every machine. When the
// set has a device storage, tensors of at least its min_elements() are made in device memory by
// the device (the same values, bit for bit); the rest in host memory as always.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/counter_random.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "models/tensor_set.h"

namespace duet {

class RandomTensorWriter {
public:
    RandomTensorWriter(TensorSet& set, uint64_t seed, ThreadPool* pool) : set_(set), seed_(seed), pool_(pool) {}

    // bf16 values uniform in [lo, hi): in device memory when the set has a device storage and the
    // tensor is large enough, else in host memory.
    void uniform(const std::string& name, std::vector<int64_t> shape, float lo, float hi);

    // Matrices [.., rows, cols] scaled so that a unit-RMS input gives roughly unit-RMS output.
    void matrix(const std::string& name, std::vector<int64_t> shape);

    // bf16 values from a function of a uniform number in [0, 1) (small tensors: runs serially, always
    // in host memory).
    template <typename Fn>
    void mapped(const std::string& name, std::vector<int64_t> shape, Fn fn) {
        auto* out = reinterpret_cast<uint16_t*>(set_.add(name, DType::BF16, shape));
        const uint64_t key = next_key();
        const int64_t n = set_.find(name)->numel();
        for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(fn(unit(key + static_cast<uint64_t>(i))));
    }

private:
    static uint64_t mix(uint64_t x) { return counter_random::mix(x); }
    // Uniform in [0, 1).
    static float unit(uint64_t key) { return counter_random::unit(key); }
    // Each tensor draws from its own stretch of the counter space.
    uint64_t next_key() { return mix(seed_ ^ mix(++tensor_index_)) & ~0xFFFFFFFFFFull; }

    TensorSet& set_;
    uint64_t seed_;
    ThreadPool* pool_;
    uint64_t tensor_index_ = 0;
};

}  // namespace duet
