#include "backend/cuda/normed_row_products.h"

#include <algorithm>

#include "backend/cuda/f32_products.h"
#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace duet {

namespace {

// Table rows widened and normalised at once: two scratch pieces of this many rows.
constexpr int64_t kPieceRows = 1024;

}  // namespace

size_t NormedRowProducts::bytes(const Source& s) {
    return static_cast<size_t>(s.table_rows) * static_cast<size_t>(s.rows) * sizeof(float);
}

const float* NormedRowProducts::find(const Source& s) {
    const auto it = products_.find(key(s));
    if (it == products_.end()) return nullptr;
    const std::shared_ptr<cuda::DeviceBuffer> kept = it->second.lock();
    if (kept == nullptr) {
        products_.erase(it);
        return nullptr;
    }
    return kept->as<float>();
}

std::shared_ptr<const void> NormedRowProducts::make(const Source& s, size_t reserve, cudaStream_t backend_stream) {
    require(s.table != nullptr && s.w != nullptr && s.norm_weight != nullptr && s.table_rows > 0 && s.rows > 0 &&
                s.cols > 0,
            "precomputed row products: a table, a matrix and norm weights of positive shapes");
    if (const auto it = products_.find(key(s)); it != products_.end()) {
        if (std::shared_ptr<cuda::DeviceBuffer> kept = it->second.lock()) return kept;
    }
    const int64_t piece = std::min(s.table_rows, kPieceRows);
    const size_t scratch = sizeof(float) * static_cast<size_t>(s.cols) * static_cast<size_t>(s.rows + 2 * piece);
    size_t free = 0, total = 0;
    DUET_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    if (free < bytes(s) + scratch + reserve) return nullptr;

    // The weights may still be on their way on the backend's stream.
    DUET_CUDA_CHECK(cudaStreamSynchronize(backend_stream));
    auto out = std::make_shared<cuda::DeviceBuffer>(bytes(s));
    cuda::DeviceBuffer w32(sizeof(float) * static_cast<size_t>(s.rows * s.cols));
    cuda::DeviceBuffer rows32(sizeof(float) * static_cast<size_t>(piece * s.cols));
    cuda::DeviceBuffer normed(sizeof(float) * static_cast<size_t>(piece * s.cols));
    {
        const cuda::F32Products products;  // waits for its stream when it goes
        cudaStream_t stream = products.stream();
        cuda::widen_to_f32(s.w, cuda::WeightType::BF16, s.rows * s.cols, w32.as<float>(), stream);
        const auto* table = static_cast<const uint16_t*>(s.table);
        for (int64_t first = 0; first < s.table_rows; first += piece) {
            const int64_t n = std::min(piece, s.table_rows - first);
            cuda::widen_to_f32(table + first * s.cols, cuda::WeightType::BF16, n * s.cols, rows32.as<float>(),
                               stream);
            cuda::rmsnorm(rows32.as<float>(), s.norm_weight, n, s.cols, s.eps, normed.as<float>(), stream);
            products.product(w32.as<float>(), s.rows, s.cols, normed.as<float>(), n, out->as<float>() + first * s.rows);
        }
    }
    products_[key(s)] = out;
    return out;
}

}  // namespace duet
