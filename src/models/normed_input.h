// An RMS-normalised input shared by several products (a mixer's projections). The norm runs with
// the products (Backend::matmul_group_normed), so a backend can normalise x inside the products'
// kernel instead of launching a norm before it: on a GPU, once a thread block into shared memory.
// Folding the norm into each row of a product (Backend::matmul_fused) was measured slower on an H200
// for these widths (every row's lanes then read x and the norm's weights beside the weights). The
// products must be issued before x changes (mixers add their output to x only after them).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>

#include "backend/backend.h"

namespace duet {

class NormedInput {
public:
    // rmsnorm(x [n, cols]) with `norm_weight`, cols being the products' columns; `normed` [n, cols] is
    // scratch kept by the caller.
    NormedInput(Backend& b, const float* x, int64_t n, const float* norm_weight, float eps, float* normed)
        : b_(b), x_(x), n_(n), norm_weight_(norm_weight), eps_(eps), normed_(normed) {}

    // out = w · rmsnorm(x).
    void product(const MatrixView& w, float* out) const { products({{w, out}}); }
    // Each product's out = its w · rmsnorm(x), as one group (a backend may run it as one kernel).
    void products(std::initializer_list<ProductOut> products) const {
        b_.matmul_group_normed(std::span<const ProductOut>(products.begin(), products.size()), x_, norm_weight_, eps_,
                               n_, normed_);
    }

    // out = silu(gate · rmsnorm(x)) ⊙ (up · rmsnorm(x)), `up_out` [n, gate.rows] being scratch.
    void swiglu(const MatrixView& gate, const MatrixView& up, float* out, float* up_out) const {
        b_.matmul_swiglu_normed(gate, up, x_, norm_weight_, eps_, n_, normed_, up_out, out);
    }

    int64_t tokens() const { return n_; }

private:
    Backend& b_;
    const float* x_;
    int64_t n_;
    const float* norm_weight_;
    float eps_;
    float* normed_;
};

}  // namespace duet
