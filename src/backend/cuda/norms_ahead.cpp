#include "backend/cuda/norms_ahead.h"

#include <algorithm>

#include "kernels/cuda/cuda_check.h"

namespace duet {

namespace {
constexpr size_t kSumBytes = sizeof(double) * cuda::kNormAheadSums * cuda::kNormAheadSumStride;  // a place's
}

double* NormsAhead::sums(int64_t place) {
    return reinterpret_cast<double*>(static_cast<char*>(memory_.data()) + place * kSumBytes);
}

float* NormsAhead::weighted(int64_t place) {
    auto* first = reinterpret_cast<float*>(static_cast<char*>(memory_.data()) + kPlaces * kSumBytes);
    return first + place * kWidestStream;
}

void NormsAhead::begin_step(cudaStream_t stream) {
    if (memory_.data() == nullptr) {
        memory_ = cuda::DeviceBuffer(kPlaces * (kSumBytes + kWidestStream * sizeof(float)));
    }
    places_zeroed_ = places_wanted_ < 0 ? kPlaces : places_wanted_;
    DUET_CUDA_CHECK(cudaMemsetAsync(memory_.data(), 0, places_zeroed_ * kSumBytes, stream));
    in_step_ = true;
    places_used_ = 0;
    expected_x_ = expected_weight_ = nullptr;
    prepared_ = Prepared{};
}

void NormsAhead::end_step() {
    if (in_step_) places_wanted_ = std::min(kPlaces, std::max(places_wanted_, places_used_));
    in_step_ = false;
    expected_x_ = expected_weight_ = nullptr;
    prepared_ = Prepared{};
}

void NormsAhead::expect(const float* x, const float* weight) {
    if (!in_step_) return;
    expected_x_ = x;
    expected_weight_ = weight;
}

const float* NormsAhead::expected_for(const float* out) {
    if (out != expected_x_) return nullptr;
    const float* weight = expected_weight_;
    expected_x_ = expected_weight_ = nullptr;
    return weight;
}

cuda::NormAhead NormsAhead::start(const float* out, int64_t cols, const float* host_weight, const float* device_weight,
                                  uint64_t op) {
    prepared_ = Prepared{};
    if (!in_step_ || cols > kWidestStream || cols % 8 != 0) return {};
    const int64_t place = places_used_++;
    if (place >= places_zeroed_) return {};
    prepared_ = Prepared{out, host_weight, cols, op, cuda::NormAhead{device_weight, weighted(place), sums(place)}};
    return prepared_.ahead;
}

cuda::NormAhead NormsAhead::for_reader(const float* x, int64_t cols, const float* weight, uint64_t op) const {
    const Prepared& p = prepared_;
    const bool fits = p.ahead.on() && p.x == x && p.cols == cols && p.host_weight == weight && p.op + 1 == op;
    return fits ? p.ahead : cuda::NormAhead{};
}

}  // namespace duet
