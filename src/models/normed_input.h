// An RMS-normalised input shared by several products (a mixer's projections): the norm is computed
// once into `normed` and every product reads it. Folding the norm into each product instead
// (Backend::matmul_fused) spares a kernel per step on a GPU but was measured slower on an H200 for
// these widths: every row's lanes then read x and the norm's weights beside the weights, which
// costs more than the one small norm kernel it saves. The choice lives here, for all the mixers.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>

#include "backend/backend.h"

namespace duet {

class NormedInput {
public:
    // Normalises x [n, dim] with `norm_weight` [dim] into normed [n, dim] (kept by the caller).
    NormedInput(Backend& b, const float* x, int64_t n, int64_t dim, const float* norm_weight, float eps, float* normed)
        : b_(b), n_(n), normed_(normed) {
        b.rmsnorm(x, norm_weight, n, dim, eps, normed);
    }

    // out = w · rmsnorm(x).
    void product(const MatrixView& w, float* out) const { b_.matmul(w, normed_, n_, out); }
    // Each product's out = its w · rmsnorm(x), as one group (a backend may run it as one kernel).
    void products(std::initializer_list<ProductOut> products) const {
        b_.matmul_group(std::span<const ProductOut>(products.begin(), products.size()), normed_, n_);
    }

    int64_t tokens() const { return n_; }

private:
    Backend& b_;
    int64_t n_;
    float* normed_;
};

}  // namespace duet
