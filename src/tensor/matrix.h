// A borrowed, row-major weight matrix as the matmul kernels read it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "base/error.h"
#include "base/half.h"

namespace duet {

// [rows, cols], row-major, no padding between rows. dtype is F32 or BF16;
// BF16 elements are raw little-endian bits, read as uint16_t.
struct MatrixView {
    DType dtype = DType::F32;
    int64_t rows = 0;
    int64_t cols = 0;
    const void* data = nullptr;
};

// The bytes the matrix's elements take.
inline size_t matrix_bytes(const MatrixView& m) { return static_cast<size_t>(m.rows * m.cols) * dtype_size(m.dtype); }

inline void require_matmul_dtype(const MatrixView& m) {
    require(m.dtype == DType::F32 || m.dtype == DType::BF16,
            "matrix: weights must be F32 or BF16, got ", dtype_name(m.dtype));
}

// One element, for references and tests; the kernels never go element by element.
inline float matrix_element(const MatrixView& m, int64_t r, int64_t c) {
    require_matmul_dtype(m);
    const int64_t index = r * m.cols + c;
    if (m.dtype == DType::BF16) {
        return bf16_to_f32(static_cast<const uint16_t*>(m.data)[index]);
    }
    return static_cast<const float*>(m.data)[index];
}

// Row r widened to f32; out has room for m.cols values.
inline void matrix_row_to_f32(const MatrixView& m, int64_t r, float* out) {
    require_matmul_dtype(m);
    if (m.dtype == DType::BF16) {
        const uint16_t* row = static_cast<const uint16_t*>(m.data) + r * m.cols;
        for (int64_t c = 0; c < m.cols; ++c) out[c] = bf16_to_f32(row[c]);
    } else {
        std::memcpy(out, static_cast<const float*>(m.data) + r * m.cols,
                    static_cast<size_t>(m.cols) * sizeof(float));
    }
}

}  // namespace duet
