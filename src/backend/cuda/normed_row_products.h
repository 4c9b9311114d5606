// Precomputed products of embedding rows (Backend::precompute_normed_rows): for a bf16 table whose
// rows are a product's normalised input, W · rmsnorm(row) for every row, made once in f32 with
// exact f32 products (no TF32), as a decode step would compute them one row at a time. A step then
// adds one row of floats where it would stream all of W (Drama 3's tower input: 8 MB a layer).
// The products live as long as the tokens make() hands out, so that weights freed and others
// loaded at the same addresses never meet products of the old ones.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "kernels/cuda/device_buffer.h"

namespace duet {

class NormedRowProducts {
public:
    // Device pointers: a bf16 table [table_rows, cols], a bf16 matrix [rows, cols] and the norm's
    // weights [cols].
    struct Source {
        const void* table = nullptr;
        int64_t table_rows = 0;
        const void* w = nullptr;
        int64_t rows = 0, cols = 0;
        const float* norm_weight = nullptr;
        float eps = 0.0f;
    };

    // The products [table_rows, rows] of this source, while a token make() gave for them lives; else null.
    const float* find(const Source& s);
    // Makes them unless they exist, once the work queued on `backend_stream` (the source's uploads)
    // is done, and waits for them. Returns the token that keeps them (they are freed with its last
    // copy), or null, with nothing made, where they would leave less than `reserve` bytes of device
    // memory free.
    std::shared_ptr<const void> make(const Source& s, size_t reserve, cudaStream_t backend_stream);
    // Device bytes the products take.
    static size_t bytes(const Source& s);

private:
    using Key = std::tuple<const void*, const void*, const float*, int64_t, int64_t, int64_t, float>;
    static Key key(const Source& s) { return {s.table, s.w, s.norm_weight, s.table_rows, s.rows, s.cols, s.eps}; }
    std::map<Key, std::weak_ptr<cuda::DeviceBuffer>> products_;
};

}  // namespace duet
