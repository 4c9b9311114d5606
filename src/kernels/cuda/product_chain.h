// A chain of dependent bf16 products (x_{i+1} = W_i · x_i), run in one of several ways of handing
// each product's result to the next: the question behind decode at batch 1, where a step is
// hundreds of such dependent kernels and the hand-over, not the bytes, is much of the time.
// `duet bench --arch product_chain` times them side by side. Host-only header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/device_buffer.h"

namespace duet::cuda {

enum class ChainHandOver {
    duet_products,  // duet's own product launches (matvec_bf16), each launched early: the reference
    kernel_end,     // a kernel a product, launched early, waiting for the previous kernel to end
    block_counts,   // a kernel a product, launched early, waiting until every block of the previous
                    // one has counted itself done (no wait for the kernel's end)
    one_kernel,     // one resident kernel for the whole chain: its blocks move from product to product,
                    // waiting on the same counts
    staged,         // a kernel a product, launched early, a block an SM: before its wait each block asks
                    // for the first of its rows' weights as bulk copies into shared memory (up to about
                    // 100 KB, so that two products' blocks share an SM), then streams the rest through
                    // the same stages
    streamed,       // one resident kernel, a block an SM, each block the same share of every product's
                    // rows: one thread keeps a ring of shared memory filled with the block's next
                    // weights, product after product, whatever the hand-overs; the warps take a
                    // product's rows from the ring once every block has counted the one before done
};
const char* hand_over_name(ChainHandOver hand_over);
// Every hand-over, in the order the bench and the tests take them.
inline constexpr ChainHandOver kChainHandOvers[] = {ChainHandOver::duet_products, ChainHandOver::kernel_end,
                                                    ChainHandOver::block_counts,  ChainHandOver::one_kernel,
                                                    ChainHandOver::staged,        ChainHandOver::streamed};

// Products alternate between [rows, cols] and [cols, rows] matrices so that each feeds the next;
// each product has its own weights (a chain longer than L2 holds streams them all from memory).
class ProductChain {
public:
    // Weights and the first input random on the device (fill_uniform_bf16 with keys from `seed`).
    // cols and rows multiples of 8 (16-byte rows).
    ProductChain(int64_t rows, int64_t cols, int64_t products, uint64_t seed);

    // Sets every product's output to NaN, so that a row left unwritten, or read before it was
    // written, shows in the output.
    void clear_outputs();
    // Whether this device runs the hand-over (staged and streamed need compute capability 9.0; the
    // others run everywhere).
    static bool available(ChainHandOver hand_over);
    // One pass of the chain on `stream`; the caller synchronises. The hand-overs other than
    // duet_products each leave the same output.
    void run(ChainHandOver hand_over, cudaStream_t stream);
    // Median µs of one pass over `repeats` timed passes (after two untimed ones); the kernel-a-product
    // ways run as a recorded graph, the one-kernel and streamed ways as one launch.
    double median_pass_us(ChainHandOver hand_over, int repeats);

    int64_t products() const { return products_; }
    int64_t weight_bytes_per_product() const { return rows_ * cols_ * 2; }
    // Product p's weights ([rows, cols] for even p, [cols, rows] for odd) as bf16 bits, the first
    // input, and the output of the last pass.
    std::vector<uint16_t> weights(int64_t p) const;
    std::vector<float> input() const;
    std::vector<float> output() const;

private:
    int64_t out_rows(int64_t p) const { return p % 2 == 0 ? rows_ : cols_; }
    int64_t in_cols(int64_t p) const { return p % 2 == 0 ? cols_ : rows_; }
    const uint16_t* weights_of(int64_t p) const;
    float* vector(int64_t i) const;  // the input of product i (i = products: the output)

    int64_t rows_, cols_, products_, vector_stride_;
    unsigned resident_blocks_ = 0;  // the one-kernel chain's grid: every block resident at once
    unsigned staged_blocks_ = 0;    // the staged and streamed chains' grid: a block an SM
    int streamed_stages_ = 0;       // the streamed chain's ring, in stages
    int64_t streamed_stage_bytes_ = 0;
    size_t streamed_shared_bytes_ = 0;
    DeviceBuffer weights_, vectors_, counts_, links_;
};

}  // namespace duet::cuda
