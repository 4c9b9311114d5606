// The CUDA backend against the CPU backend, op by op, on random inputs: every op the models call,
// with the states they update. The CPU kernels are themselves checked against double references
// (tests/test_cpu_ops*.cpp), so agreement here carries that check over to the GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "cuda_test_support.h"
#include "kernel_test_support.h"

namespace duet {
namespace {

using testing::random_values;
using testing::relative_error;

std::vector<uint16_t> random_bf16(std::mt19937& rng, size_t count, float range) {
    std::vector<uint16_t> v;
    for (float x : random_values(rng, count, -range, range)) v.push_back(f32_to_bf16(x));
    return v;
}

// How the experts are chosen in CudaBackendOps::expect_experts_agree.
struct ExpertChoice {
    int64_t experts = 8, top_k = 3, groups = 4, groups_kept = 2;
    int64_t distinct_router_rows = 0;  // when set, the router's rows repeat with this period: tied scores
};

// The selective scan's arguments for n tokens of `heads` heads of hd in `groups` groups of ns states:
// x (then B and C) rows `x_stride` apart, dt rows `dt_stride` apart; the per-head constants from
// the host and Nemotron-H's dt clamp.
struct ScanHeads {
    int64_t heads, hd, groups, ns;
};
SsmScanArgs scan_args(int64_t n, const ScanHeads& h, const float* x, int64_t x_stride, const float* dt,
                      int64_t dt_stride, float* state, float* y, const std::vector<float>& dt_bias,
                      const std::vector<float>& a, const std::vector<float>& d) {
    SsmScanArgs s;
    s.n = n;
    s.heads = h.heads;
    s.head_dim = h.hd;
    s.groups = h.groups;
    s.state_size = h.ns;
    s.x = x;
    s.x_stride = x_stride;
    s.dt = dt;
    s.dt_stride = dt_stride;
    s.dt_bias = dt_bias.data();
    s.a = a.data();
    s.d = d.data();
    s.dt_min = 0.001f;
    s.dt_max = 0.5f;
    s.state = state;
    s.y = y;
    return s;
}

// The delta rule's arguments for n tokens of kh key and vh value heads (of dk and dv values): q, k, v
// rows at qkv, `stride` apart; a and b [n, vh]; the per-head constants from the host.
GatedDeltaArgs delta_rule_args(int64_t n, int64_t kh, int64_t vh, int64_t dk, int64_t dv, const float* qkv,
                               int64_t stride, const float* a, const float* b, float* state, float* out,
                               const std::vector<float>& neg_exp_a_log, const std::vector<float>& dt_bias) {
    GatedDeltaArgs g;
    g.n = n;
    g.k_heads = kh;
    g.v_heads = vh;
    g.k_dim = dk;
    g.v_dim = dv;
    g.qkv = qkv;
    g.qkv_stride = stride;
    g.a = a;
    g.a_stride = vh;
    g.b = b;
    g.b_stride = vh;
    g.neg_exp_a_log = neg_exp_a_log.data();
    g.dt_bias = dt_bias.data();
    g.state = state;
    g.out = out;
    return g;
}

// Runs the same op on both backends: inputs are copied into each backend's memory, `op` is called
// with the backend and its copies, and the copies are read back for comparison.
class CudaBackendOps : public cuda::testing::DeviceTest {
protected:
    void SetUp() override {
        DeviceTest::SetUp();
        if (IsSkipped()) return;
        gpu_ = make_cuda_backend();
    }

    template <typename Op>
    void expect_same(std::vector<std::vector<float>> tensors, const std::vector<size_t>& outputs, Op op,
                     double tolerance, const char* what) {
        std::vector<std::vector<float>> results[2];
        Backend* backends[2] = {cpu_.get(), gpu_.get()};
        for (int which = 0; which < 2; ++which) {
            Backend& b = *backends[which];
            std::vector<Buffer> buffers;
            std::vector<float*> pointers;
            for (const auto& t : tensors) {
                buffers.push_back(b.alloc(t.size()));
                b.upload(buffers.back().data(), t.data(), t.size());
                pointers.push_back(buffers.back().data());
            }
            op(b, pointers);
            for (size_t i : outputs) {
                std::vector<float> host(tensors[i].size());
                b.download(host.data(), buffers[i].data(), host.size());
                results[which].push_back(host);
            }
        }
        for (size_t i = 0; i < outputs.size(); ++i) {
            EXPECT_LE(relative_error(results[1][i], results[0][i]), tolerance) << what << ", output " << i;
        }
    }

    // Both mixture-of-experts ops on n random tokens.
    void expect_experts_agree(int64_t n, int64_t hidden, int64_t inter, int64_t shared_inter, double tolerance,
                              const ExpertChoice& choice = {});

    std::mt19937 rng_{2024};
    ThreadPool pool_{2};
    std::unique_ptr<Backend> cpu_ = make_cpu_backend(&pool_);
    std::unique_ptr<Backend> gpu_;
};

// Past 32 tokens bf16 products run on tensor cores with the activations split into two bf16
// halves: about 16 bits of each activation survive, hence the looser bound there.
TEST_F(CudaBackendOps, MatmulBf16AndF32ForFewAndManyTokens) {
    for (int64_t n : {1, 3, 9, 40, 300}) {
        for (bool bf16 : {true, false}) {
            const int64_t rows = 67, cols = 200;
            const std::vector<uint16_t> w16 = random_bf16(rng_, rows * cols, 0.1f);
            const std::vector<float> w32 = random_values(rng_, rows * cols, -0.1f, 0.1f);
            const MatrixView w = bf16 ? MatrixView{DType::BF16, rows, cols, w16.data()}
                                      : MatrixView{DType::F32, rows, cols, w32.data()};
            expect_same({random_values(rng_, n * cols), std::vector<float>(n * rows)}, {1},
                        [&](Backend& b, std::vector<float*> p) { b.matmul(w, p[0], n, p[1]); },
                        bf16 && n > 32 ? 5e-5 : 1e-5, bf16 ? "bf16 matmul" : "f32 matmul");
        }
    }
}

// A group of products of one input runs as one launch for a token (matrices of any row count, the
// row blocks of all of them in one grid); for more tokens one product after another. The outputs
// start as NaN, so a row nobody wrote fails the comparison.
TEST_F(CudaBackendOps, ProductGroupsOfOneInput) {
    for (int64_t cols : {256, 2048}) {
        for (int64_t n : {1, 3}) {
            const std::vector<int64_t> rows = {300, 45, 1, 8};
            std::vector<std::vector<uint16_t>> store;
            std::vector<std::vector<float>> tensors = {random_values(rng_, n * cols)};
            for (int64_t r : rows) {
                store.push_back(random_bf16(rng_, r * cols, 0.1f));
                tensors.emplace_back(static_cast<size_t>(n * r), std::numeric_limits<float>::quiet_NaN());
            }
            expect_same(tensors, {1, 2, 3, 4},
                        [&](Backend& b, std::vector<float*> p) {
                            std::vector<ProductOut> group;
                            for (size_t i = 0; i < rows.size(); ++i) {
                                group.push_back({MatrixView{DType::BF16, rows[i], cols, store[i].data()}, p[i + 1]});
                            }
                            b.matmul_group(group, p[0], n);
                        },
                        1e-5, "product group");
        }
    }
}

// The same group with its input RMS-normalised first: one token normalises x inside the group's
// kernel (rows of 8, 16 and 32 lanes), more tokens run a norm and then the products. Widths up to
// Nemotron-H's 2688 and beyond the 4096 of Drama 3's tower; 12032 is the widest the kernel's shared
// memory takes, 12288 (48 KiB of input) and 12800 are wider, so a token runs the norm and the products.
TEST_F(CudaBackendOps, NormedProductGroups) {
    for (int64_t cols : {264, 512, 2688, 4096, 12032, 12288, 12800}) {
        for (int64_t n : {1, 3}) {
            const std::vector<int64_t> rows = {300, 45, 1};
            std::vector<std::vector<uint16_t>> store;
            const std::vector<float> norm = random_values(rng_, cols, 0.5f, 1.5f);
            std::vector<std::vector<float>> tensors = {random_values(rng_, n * cols, -2.0f, 2.0f),
                                                       std::vector<float>(static_cast<size_t>(n * cols))};
            for (int64_t r : rows) {
                store.push_back(random_bf16(rng_, r * cols, 0.1f));
                tensors.emplace_back(static_cast<size_t>(n * r), std::numeric_limits<float>::quiet_NaN());
            }
            expect_same(tensors, {2, 3, 4},
                        [&](Backend& b, std::vector<float*> p) {
                            std::vector<ProductOut> group;
                            for (size_t i = 0; i < rows.size(); ++i) {
                                group.push_back({MatrixView{DType::BF16, rows[i], cols, store[i].data()}, p[i + 2]});
                            }
                            b.matmul_group_normed(group, p[0], norm.data(), 1e-6f, n, p[1]);
                        },
                        1e-5, "normed product group");
        }
    }
}

// A SwiGLU's first half of a normalised input: one token as one kernel (a row pair over 8 or 16 lanes
// each), more tokens, and inputs wider than the kernel's shared memory, as norm, products and silu.
TEST_F(CudaBackendOps, SwigluOfANormedInput) {
    for (int64_t cols : {264, 512, 2048, 12800}) {
        for (int64_t rows : {1, 77}) {
            for (int64_t n : {1, 3}) {
                const std::vector<uint16_t> gate = random_bf16(rng_, rows * cols, 0.1f);
                const std::vector<uint16_t> up = random_bf16(rng_, rows * cols, 0.1f);
                const std::vector<float> norm = random_values(rng_, cols, 0.5f, 1.5f);
                const auto nan = std::numeric_limits<float>::quiet_NaN();
                expect_same({random_values(rng_, n * cols, -2.0f, 2.0f), std::vector<float>(size_t(n * cols)),
                             std::vector<float>(size_t(n * rows)), std::vector<float>(size_t(n * rows), nan)},
                            {3},
                            [&](Backend& b, std::vector<float*> p) {
                                b.matmul_swiglu_normed(MatrixView{DType::BF16, rows, cols, gate.data()},
                                                       MatrixView{DType::BF16, rows, cols, up.data()}, p[0],
                                                       norm.data(), 1e-6f, n, p[1], p[2], p[3]);
                            },
                            1e-5, "normed swiglu");
            }
        }
    }
}

// One token runs norm, product and residual add as one kernel; more tokens run them one by one.
// Rows of 33 groups take 8 lanes, rows of 128 and 256 a whole warp; rows of several rounds of loads
// in a launch of one wave (70 rows) and of several (4000).
TEST_F(CudaBackendOps, FusedProductsWithNormAndResidual) {
    struct Shape {
        int64_t rows, cols;
    };
    for (const auto [rows, cols] : {Shape{70, 264}, Shape{70, 1024}, Shape{70, 2048}, Shape{4000, 1032}}) {
        const std::vector<uint16_t> w16 = random_bf16(rng_, rows * cols, 0.1f);
        const MatrixView w{DType::BF16, rows, cols, w16.data()};
        const std::vector<float> norm = random_values(rng_, cols, 0.5f, 1.5f);
        for (int64_t n : {1, 3}) {
            for (bool with_norm : {false, true}) {
                for (bool add : {false, true}) {
                    const FusedProduct fused{with_norm ? norm.data() : nullptr, 1e-5f, add};
                    expect_same({random_values(rng_, n * cols, -2.0f, 2.0f), random_values(rng_, n * rows)}, {1},
                                [&](Backend& b, std::vector<float*> p) { b.matmul_fused(w, p[0], n, p[1], fused); },
                                1e-5, with_norm ? (add ? "norm, product, add" : "norm, product")
                                                : (add ? "product, add" : "product"));
                }
            }
        }
    }
}

// Two normalised products summed into one output (Drama 3's eh_proj): one token in one kernel at
// rows of 8, 16 and 32 lanes, more tokens, and inputs too wide for a block's shared memory (8192
// columns), as two fused products; and with either input ready early (NormedProduct::ready_early,
// its half streamed before the kernel's wait: whole-warp rows of one and two rounds of loads a part).
TEST_F(CudaBackendOps, NormedPairOfProducts) {
    for (int64_t cols : {264, 640, 1024, 2048, 4096, 8192}) {
        const int64_t rows = 70;
        const std::vector<uint16_t> wa = random_bf16(rng_, rows * cols, 0.1f), wb = random_bf16(rng_, rows * cols, 0.1f);
        const std::vector<float> na = random_values(rng_, cols, 0.5f, 1.5f), nb = random_values(rng_, cols, 0.5f, 1.5f);
        for (int64_t n : {1, 3}) {
            for (bool add : {false, true}) {
                for (int early : {-1, 0, 1}) {
                    SCOPED_TRACE(::testing::Message() << cols << " columns, " << n << " tokens, early input " << early);
                    expect_same({random_values(rng_, n * cols, -2.0f, 2.0f),
                                 random_values(rng_, n * cols, -0.1f, 0.1f), random_values(rng_, n * rows)},
                                {2},
                                [&](Backend& b, std::vector<float*> p) {
                                    NormedProduct first{MatrixView{DType::BF16, rows, cols, wa.data()}, p[0],
                                                        na.data()};
                                    NormedProduct second{MatrixView{DType::BF16, rows, cols, wb.data()}, p[1],
                                                         nb.data()};
                                    first.ready_early = early == 0;
                                    second.ready_early = early == 1;
                                    b.matmul_normed_pair(first, second, n, 1e-6f, p[2], add);
                                },
                                1e-5, add ? "normed pair, add" : "normed pair");
                }
            }
        }
    }
}

// A normalised product that keeps its norm for later readers (Drama 3's tower head and output norm),
// at rows of 8, 16 and 32 lanes; more tokens and unaligned widths take the plain norm and product.
TEST_F(CudaBackendOps, NormedProductKeepsItsNorm) {
    for (int64_t cols : {264, 640, 2048, 100}) {
        const int64_t rows = 70;
        const std::vector<uint16_t> w = random_bf16(rng_, rows * cols, 0.1f);
        const std::vector<float> norm = random_values(rng_, cols, 0.5f, 1.5f);
        for (int64_t n : {1, 3}) {
            SCOPED_TRACE(::testing::Message() << cols << " columns, " << n << " tokens");
            expect_same({random_values(rng_, n * cols, -2.0f, 2.0f), random_values(rng_, n * rows),
                         random_values(rng_, n * cols)},
                        {1, 2},
                        [&](Backend& b, std::vector<float*> p) {
                            b.matmul_normed_keeping(ProductOut{MatrixView{DType::BF16, rows, cols, w.data()}, p[1]},
                                                    p[0], norm.data(), 1e-6f, n, p[2]);
                        },
                        1e-5, "normed product keeping its norm");
        }
    }
}

// Ids and positions that live in backend memory travel as the bits of floats here.
std::vector<float> as_float_bits(const std::vector<int32_t>& ints) {
    std::vector<float> bits(ints.size());
    std::memcpy(bits.data(), ints.data(), ints.size() * sizeof(int32_t));
    return bits;
}

// The pair's first input as one token's embedding row, named by an id in backend memory (Drama 3's
// tower input): read in place by the kernel, gathered first by the CPU; a negative id is a zero row.
TEST_F(CudaBackendOps, NormedPairReadsAnEmbeddingRow) {
    for (int64_t cols : {264, 2048}) {
        const int64_t rows = 70, table_rows = 9;
        const std::vector<uint16_t> wa = random_bf16(rng_, rows * cols, 0.1f), wb = random_bf16(rng_, rows * cols, 0.1f);
        const std::vector<uint16_t> table16 = random_bf16(rng_, table_rows * cols, 1.0f);
        const MatrixView table{DType::BF16, table_rows, cols, table16.data()};
        const std::vector<float> na = random_values(rng_, cols, 0.5f, 1.5f), nb = random_values(rng_, cols, 0.5f, 1.5f);
        for (int32_t id : {4, 0, 8, -1}) {
            for (int early : {-1, 0, 1}) {
                const bool add = id == 0 || id == -1;
                SCOPED_TRACE(::testing::Message() << cols << " columns, row " << id << (add ? ", add" : "")
                                                  << ", early input " << early);
                expect_same({as_float_bits({id}), random_values(rng_, cols, -0.1f, 0.1f), random_values(rng_, rows),
                             std::vector<float>(cols)},
                            {2},
                            [&](Backend& b, std::vector<float*> p) {
                                NormedProduct embedding{MatrixView{DType::BF16, rows, cols, wa.data()}, nullptr,
                                                        na.data()};
                                embedding.table = &table;
                                embedding.row_id = reinterpret_cast<const int32_t*>(p[0]);
                                embedding.row_scratch = p[3];
                                embedding.ready_early = early == 0;
                                NormedProduct hidden{MatrixView{DType::BF16, rows, cols, wb.data()}, p[1], nb.data()};
                                hidden.ready_early = early == 1;
                                b.matmul_normed_pair(embedding, hidden, 1, 1e-6f, p[2], add);
                            },
                            1e-5, "normed pair over an embedding row");
            }
        }
    }
}

TEST_F(CudaBackendOps, GatheredEmbeddingsRowStoresAndCounters) {
    const int64_t rows = 50, cols = 24, n = 3, per_row = 2;
    const std::vector<uint16_t> table16 = random_bf16(rng_, rows * cols, 1.0f);
    const MatrixView table{DType::BF16, rows, cols, table16.data()};
    const std::vector<int32_t> ids = {3, -1, 19, 0, 7, 12};
    for (bool accumulate : {false, true}) {
        EmbeddingGather g;
        g.per_row = per_row;
        g.first_row = 5;
        g.row_step = 10;
        g.scale = 0.5f;
        g.accumulate = accumulate;
        expect_same({as_float_bits(ids), random_values(rng_, n * cols)}, {1},
                    [&](Backend& b, std::vector<float*> p) {
                        EmbeddingGather at = g;
                        at.ids = reinterpret_cast<const int32_t*>(p[0]);
                        b.gather_embeddings(table, at, n, p[1]);
                    },
                    1e-6, accumulate ? "gathered embeddings, accumulated" : "gathered embeddings");
    }
    const int64_t width = 16, capacity = 9;
    expect_same({as_float_bits({4, 5}), random_values(rng_, 2 * width), random_values(rng_, capacity * width)}, {0, 2},
                [&](Backend& b, std::vector<float*> p) {
                    auto* ints = reinterpret_cast<int32_t*>(p[0]);
                    b.store_rows(p[2], width, 0, ints, p[1], 2);  // rows 4 and 5, the position read on the device
                    b.store_rows(p[2], width, 7, nullptr, p[1], 1);
                    b.add_to_int(ints, 3);
                    b.add_to_int(ints + 1, -2);
                },
                0.0, "row stores and counters");
    // Keys and values in one op, the first row from the device and from the host.
    expect_same({as_float_bits({3}), random_values(rng_, 2 * width), random_values(rng_, 2 * width),
                 random_values(rng_, capacity * width), random_values(rng_, capacity * width)},
                {3, 4},
                [&](Backend& b, std::vector<float*> p) {
                    const auto* at = reinterpret_cast<const int32_t*>(p[0]);
                    b.store_key_value_rows(p[3], p[4], width, 0, at, p[1], p[2], 2);  // rows 3 and 4
                    b.store_key_value_rows(p[3], p[4], width, 7, nullptr, p[2], p[1], 1);
                },
                0.0, "key and value row stores");
}

// A frame started from random choices, EOS among them, over frames of random widths (some wider
// than a warp) that hold leftovers of an earlier frame; every third trial steered by its go-on flag
// (0 in some: the frame must be left as it was). The values are compared bit for bit.
TEST_F(CudaBackendOps, FramesStartFromTheirChoice) {
    std::uniform_int_distribution<int32_t> small(1, 5000);
    for (int trial = 0; trial < 24; ++trial) {
        const int64_t width = std::uniform_int_distribution<int64_t>(2, 70)(rng_);
        const FrameStart start{small(rng_), std::uniform_int_distribution<int32_t>(1, 300)(rng_), small(rng_)};
        const int32_t choice =
            trial % 4 == 0 ? start.end_choice : std::uniform_int_distribution<int32_t>(0, start.end_choice)(rng_);
        std::vector<int32_t> leftovers(static_cast<size_t>(width));
        for (int32_t& v : leftovers) v = small(rng_);
        const bool steered = trial % 3 == 1;
        const int32_t go_on = steered && trial % 2 == 0 ? 0 : small(rng_);
        expect_same({as_float_bits({choice, go_on}), as_float_bits(leftovers)}, {0, 1},
                    [&](Backend& b, std::vector<float*> p) {
                        auto* ints = reinterpret_cast<int32_t*>(p[0]);
                        b.start_frame(ints, start, width, reinterpret_cast<int32_t*>(p[1]), ints + 1,
                                      steered ? ints + 1 : nullptr);
                    },
                    0.0, choice == start.end_choice ? "end frame" : "frame start");
    }
}

// A frame's end: the frame copied over the previous row and the counters advanced, bit for bit
// (non-negative values, as codes and counters are: a negative one's bits compare as a float NaN).
TEST_F(CudaBackendOps, FramesEndByCopyingAndCounting) {
    std::uniform_int_distribution<int32_t> any(0, 1 << 20);
    for (const int64_t width : {1, 11, 40}) {
        std::vector<int32_t> frame(static_cast<size_t>(width)), previous(frame.size()), counters(5);
        for (auto* v : {&frame, &previous, &counters}) {
            for (int32_t& x : *v) x = any(rng_);
        }
        expect_same({as_float_bits(frame), as_float_bits(previous), as_float_bits(counters)}, {1, 2},
                    [&](Backend& b, std::vector<float*> p) {
                        b.end_frame(reinterpret_cast<const int32_t*>(p[0]), width, reinterpret_cast<int32_t*>(p[1]),
                                    reinterpret_cast<int32_t*>(p[2]), 3);
                    },
                    0.0, "frame end");
    }
}

TEST_F(CudaBackendOps, EmbeddingsNormsAndElementwise) {
    const int64_t n = 5, dim = 96, vocab = 40;
    const std::vector<uint16_t> table = random_bf16(rng_, vocab * dim, 1.0f);
    const MatrixView view{DType::BF16, vocab, dim, table.data()};
    const std::vector<int32_t> ids = {3, 39, 0, 7, 3};
    const std::vector<int32_t> bag = {1, -1, 5, 6, -1, -1, 38, 2, 0, 0};
    const std::vector<float> scale = {1.0f, 0.5f, 2.0f, 1.0f, 0.25f};
    const std::vector<float> weight = random_values(rng_, dim, 0.5f, 1.5f);
    expect_same({std::vector<float>(n * dim)}, {0}, [&](Backend& b, std::vector<float*> p) {
        b.embed(view, ids.data(), n, p[0]);
        b.sum_embeddings(view, bag.data(), 2, n, true, scale.data(), p[0]);
    }, 1e-6, "embeddings");
    expect_same({random_values(rng_, n * dim, -3, 3), std::vector<float>(n * dim)}, {1},
                [&](Backend& b, std::vector<float*> p) { b.rmsnorm(p[0], weight.data(), n, dim, 1e-6f, p[1]); }, 1e-5,
                "rmsnorm");
    expect_same({random_values(rng_, n * dim), random_values(rng_, n * dim)}, {0, 1},
                [&](Backend& b, std::vector<float*> p) {
                    b.add(p[0], p[1], n * dim);
                    b.scale(p[0], 0.75f, n * dim);
                    b.silu_mul(p[0], p[1], n * dim);
                    b.relu2(p[1], n * dim);
                },
                1e-6, "element-wise");
    const std::vector<float> group_weight = random_values(rng_, dim, 0.5f, 1.5f);
    expect_same({random_values(rng_, n * dim), random_values(rng_, n * 2 * dim)}, {0},
                [&](Backend& b, std::vector<float*> p) {
                    b.gated_group_rmsnorm(p[0], p[1], 2 * dim, group_weight.data(), n, dim, 4, 1e-5f);
                },
                1e-5, "gated group rmsnorm");
}

TEST_F(CudaBackendOps, HeadNormRopeGatesBothStyles) {
    const int64_t n = 4, heads = 3, hd = 32;
    const std::vector<float> w = random_values(rng_, hd, 0.5f, 1.5f);
    for (RopeStyle style : {RopeStyle::RotateHalf, RopeStyle::Interleaved}) {
        expect_same({random_values(rng_, n * heads * 2 * hd, -2, 2), std::vector<float>(n * heads * hd)}, {1},
                    [&](Backend& b, std::vector<float*> p) {
                        HeadNormRopeArgs a;
                        a.n = n;
                        a.heads = heads;
                        a.head_dim = hd;
                        a.x = p[0];
                        a.x_row_stride = heads * 2 * hd;
                        a.x_head_stride = 2 * hd;
                        a.norm_weight = w.data();
                        a.eps = 1e-6f;
                        a.pos = 17;
                        a.rotary_dim = 16;
                        a.theta = 1e7f;
                        a.style = style;
                        a.out = p[1];
                        a.out_row_stride = heads * hd;
                        b.head_rmsnorm_rope(a);
                    },
                    1e-5, "head rmsnorm rope");
    }
    expect_same({random_values(rng_, n * heads * hd), random_values(rng_, n * heads * 2 * hd)}, {0},
                [&](Backend& b, std::vector<float*> p) {
                    b.head_rmsnorm_silu_gate(p[0], p[1], heads * 2 * hd, w.data(), n, heads, hd, 1e-6f);
                },
                1e-5, "head gates");
}

TEST_F(CudaBackendOps, HeadNormRopeReadsItsPositionOnTheDevice) {
    const int64_t n = 3, heads = 4, hd = 64;
    const std::vector<float> w = random_values(rng_, hd, 0.5f, 1.5f);
    for (RopeStyle style : {RopeStyle::RotateHalf, RopeStyle::Interleaved}) {
        for (int64_t rotary : {int64_t(64), int64_t(32)}) {
            for (int32_t pos : {0, 1, 700, 5000}) {
                expect_same({random_values(rng_, n * heads * hd, -2, 2)}, {0},
                            [&](Backend& b, std::vector<float*> p) {
                                Buffer at = b.alloc(1);
                                int32_t* position = at.ints();
                                b.upload_ints(position, &pos, 1);
                                HeadNormRopeArgs a;
                                a.n = n;
                                a.heads = heads;
                                a.head_dim = hd;
                                a.x = p[0];
                                a.x_row_stride = heads * hd;
                                a.x_head_stride = hd;
                                a.norm_weight = w.data();
                                a.eps = 1e-6f;
                                a.pos = pos == 0 ? 9 : 0;  // stale: the device position rules
                                a.position = position;
                                a.rotary_dim = rotary;
                                a.theta = rotary == 64 ? 1e4f : 1e7f;
                                a.style = style;
                                a.out = p[0];  // in place
                                a.out_row_stride = heads * hd;
                                b.head_rmsnorm_rope(a);
                            },
                            1e-5, "head rmsnorm rope at a device position");
            }
        }
    }
}

// The query and key heads normed and rotated and the keys and values stored into cache rows by one
// op (one launch on the GPU, the four ops it stands for on the CPU), at a position given on the host
// or read on the device; the cache rows around the new ones keep what they held.
TEST_F(CudaBackendOps, AttentionRowsNormRotateAndStoreInOneOp) {
    const int64_t heads = 4, kv_heads = 2, hd = 64, capacity = 40, kv_width = kv_heads * hd;
    const std::vector<float> q_norm = random_values(rng_, hd, 0.5f, 1.5f);
    const std::vector<float> k_norm = random_values(rng_, hd, 0.5f, 1.5f);
    for (RopeStyle style : {RopeStyle::RotateHalf, RopeStyle::Interleaved}) {
        for (int64_t n : {int64_t(1), int64_t(3)}) {
            for (bool on_device : {false, true}) {
                const int32_t pos = on_device ? 29 : 6;
                expect_same({random_values(rng_, n * heads * 2 * hd, -2, 2), random_values(rng_, n * kv_width, -2, 2),
                             random_values(rng_, n * kv_width), std::vector<float>(n * heads * hd),
                             random_values(rng_, capacity * kv_width), random_values(rng_, capacity * kv_width)},
                            {1, 3, 4, 5},
                            [&](Backend& b, std::vector<float*> p) {
                                Buffer at = b.alloc(1);
                                b.upload_ints(at.ints(), &pos, 1);
                                AttentionRowsArgs rows;
                                HeadNormRopeArgs& q = rows.queries;
                                q.n = n;
                                q.head_dim = hd;
                                q.eps = 1e-6f;
                                q.pos = on_device ? 3 : pos;  // stale when the device position rules
                                q.position = on_device ? at.ints() : nullptr;
                                q.rotary_dim = 32;
                                q.theta = 1e7f;
                                q.style = style;
                                rows.keys = q;
                                q.heads = heads;
                                q.x = p[0];
                                q.x_row_stride = heads * 2 * hd;
                                q.x_head_stride = 2 * hd;
                                q.norm_weight = q_norm.data();
                                q.out = p[3];
                                q.out_row_stride = heads * hd;
                                HeadNormRopeArgs& k = rows.keys;
                                k.heads = kv_heads;
                                k.x = p[1];
                                k.x_row_stride = kv_width;
                                k.x_head_stride = hd;
                                k.norm_weight = k_norm.data();
                                k.out = p[1];  // in place, as gated attention has it
                                k.out_row_stride = kv_width;
                                rows.values = p[2];
                                rows.key_cache = p[4];
                                rows.value_cache = p[5];
                                rows.kv_width = kv_width;
                                b.prepare_attention_rows(rows);
                            },
                            1e-5, "attention rows");
            }
        }
    }
}

// Prompts without a state history go through the GPU's chunked form (ssm_scan_chunked), against
// the CPU's recurrence: Nemotron-H's head and state sizes in fewer heads over several chunks with a
// part-filled last one, a head of 48 rows (a part-filled slice of 32) with 16 states, and two tokens.
// The chunks' decays are products taken as differences of sums (e^{G_i − G_j}), hence 1e-4.
TEST_F(CudaBackendOps, SelectiveScanChunkedOverPrompts) {
    struct Shape {
        int64_t n, heads, hd, groups, ns;
    };
    for (const Shape& sh : {Shape{200, 8, 64, 2, 128}, Shape{70, 6, 48, 3, 16}, Shape{2, 4, 64, 1, 128}}) {
        const int64_t width = sh.heads * sh.hd + 2 * sh.groups * sh.ns;
        const std::vector<float> dt_bias = random_values(rng_, sh.heads),
                                 a = random_values(rng_, sh.heads, -2.0f, -0.5f), d = random_values(rng_, sh.heads);
        expect_same({random_values(rng_, sh.n * width), random_values(rng_, sh.n * sh.heads),
                     random_values(rng_, sh.heads * sh.hd * sh.ns), std::vector<float>(sh.n * sh.heads * sh.hd)},
                    {2, 3},
                    [&](Backend& b, std::vector<float*> p) {
                        b.ssm_scan(scan_args(sh.n, {sh.heads, sh.hd, sh.groups, sh.ns}, p[0], width, p[1], sh.heads,
                                             p[2], p[3], dt_bias, a, d));
                    },
                    1e-4, "ssm scan over a prompt, chunked");
    }
}

TEST_F(CudaBackendOps, SelectiveScanOneTokenAndManyWithHistory) {
    // Nemotron-H's shape, fewer heads; 18 states take the general kernel.
    for (int64_t ns : {int64_t(128), int64_t(18)}) {
        for (int64_t n : {int64_t(1), int64_t(40)}) {
            const int64_t heads = 8, hd = 64, groups = 2, width = heads * hd + 2 * groups * ns;
            const std::vector<float> dt_bias = random_values(rng_, heads), a = random_values(rng_, heads, -2.0f, -0.5f),
                                     d = random_values(rng_, heads);
            expect_same({random_values(rng_, n * width), random_values(rng_, n * heads),
                         random_values(rng_, heads * hd * ns), std::vector<float>(n * heads * hd),
                         std::vector<float>(n * heads * hd * ns)},
                        {2, 3, 4},
                        [&](Backend& b, std::vector<float*> p) {
                            SsmScanArgs s = scan_args(n, {heads, hd, groups, ns}, p[0], width, p[1], heads, p[2],
                                                      p[3], dt_bias, a, d);
                            s.state_history = p[4];
                            b.ssm_scan(s);
                        },
                        1e-5, ns == 128 ? "ssm scan, 128 states" : "ssm scan, 18 states");
        }
    }
}

// The convolution's token blocks (16 tokens a thread): fewer tokens than the ring holds, one
// block's worth and a part-filled last block, with and without the ring's history, kernels 2 to 8.
TEST_F(CudaBackendOps, ConvolutionOverTokenBlocks) {
    const int64_t channels = 150;
    for (int64_t kernel : {int64_t(2), int64_t(4), int64_t(8)}) {
        for (int64_t n : {int64_t(2), int64_t(16), int64_t(53)}) {
            const std::vector<float> taps = random_values(rng_, channels * kernel), bias = random_values(rng_, channels);
            for (bool history : {false, true}) {
                expect_same({random_values(rng_, n * (channels + 5)), random_values(rng_, (kernel - 1) * channels),
                             std::vector<float>(n * channels), std::vector<float>(n * (kernel - 1) * channels)},
                            {1, 2, 3},
                            [&](Backend& b, std::vector<float*> p) {
                                b.causal_conv1d_silu(p[0], channels + 5, n, channels, taps.data(), bias.data(), kernel,
                                                     p[1], p[2], history ? p[3] : nullptr);
                            },
                            1e-5, history ? "conv over token blocks, with history" : "conv over token blocks");
            }
        }
    }
}

TEST_F(CudaBackendOps, ConvolutionAndSelectiveScanWithHistory) {
    const int64_t n = 6, channels = 70, kernel = 4;
    const std::vector<float> taps = random_values(rng_, channels * kernel), bias = random_values(rng_, channels);
    expect_same({random_values(rng_, n * (channels + 3)), random_values(rng_, (kernel - 1) * channels),
                 std::vector<float>(n * channels), std::vector<float>(n * (kernel - 1) * channels)},
                {1, 2, 3},
                [&](Backend& b, std::vector<float*> p) {
                    b.causal_conv1d_silu(p[0], channels + 3, n, channels, taps.data(), bias.data(), kernel, p[1], p[2],
                                         p[3]);
                },
                1e-5, "conv");

    const int64_t heads = 4, hd = 8, groups = 2, ns = 16, width = heads * hd + 2 * groups * ns;
    const std::vector<float> dt_bias = random_values(rng_, heads), a = random_values(rng_, heads, -2.0f, -0.5f),
                             d = random_values(rng_, heads);
    expect_same({random_values(rng_, n * width), random_values(rng_, n * heads), random_values(rng_, heads * hd * ns),
                 std::vector<float>(n * heads * hd), std::vector<float>(n * heads * hd * ns)},
                {2, 3, 4},
                [&](Backend& b, std::vector<float*> p) {
                    SsmScanArgs s =
                        scan_args(n, {heads, hd, groups, ns}, p[0], width, p[1], heads, p[2], p[3], dt_bias, a, d);
                    s.state_history = p[4];
                    b.ssm_scan(s);
                },
                1e-5, "ssm scan");
}

// The Mamba-2 middle as one op against the CPU's three: one token, which the GPU runs as one launch
// in clusters of a group's heads (8 and 2 here, with and without a conv bias), and shapes it does not
// take there (three tokens, 16 heads a group), which it runs as the three ops.
TEST_F(CudaBackendOps, MambaConvolutionScanAndGatedNormAsOneOp) {
    struct Shape {
        int64_t n, heads, hd, groups, ns;
        bool bias;
    };
    for (const Shape& sh : {Shape{1, 16, 64, 2, 128, true}, Shape{1, 6, 24, 3, 16, false},
                            Shape{3, 8, 64, 1, 128, true}, Shape{1, 16, 8, 1, 16, true}}) {
        const int64_t inner = sh.heads * sh.hd, channels = inner + 2 * sh.groups * sh.ns, kernel = 4;
        const int64_t rows = inner + channels + sh.heads;
        const std::vector<float> taps = random_values(rng_, channels * kernel), bias = random_values(rng_, channels),
                                 dt_bias = random_values(rng_, sh.heads),
                                 a = random_values(rng_, sh.heads, -2.0f, -0.5f), d = random_values(rng_, sh.heads),
                                 norm = random_values(rng_, inner, 0.5f, 1.5f);
        expect_same({random_values(rng_, sh.n * rows), random_values(rng_, (kernel - 1) * channels),
                     std::vector<float>(sh.n * channels), random_values(rng_, inner * sh.ns),
                     std::vector<float>(sh.n * inner)},
                    {1, 3, 4},
                    [&](Backend& b, std::vector<float*> p) {
                        MambaMiddleArgs m;
                        m.conv.x = p[0] + inner;
                        m.conv.x_stride = rows;
                        m.conv.channels = channels;
                        m.conv.kernel = kernel;
                        m.conv.taps = taps.data();
                        m.conv.bias = sh.bias ? bias.data() : nullptr;
                        m.conv.ring = p[1];
                        m.conv.out = p[2];
                        const float* dt = p[0] + inner + channels;
                        m.scan = scan_args(sh.n, {sh.heads, sh.hd, sh.groups, sh.ns}, p[2], channels, dt, rows, p[3],
                                           p[4], dt_bias, a, d);
                        m.z = p[0];
                        m.z_stride = rows;
                        m.norm_weight = norm.data();
                        m.norm_groups = sh.groups;
                        m.eps = 1e-5f;
                        b.mamba_conv_scan_norm(m);
                    },
                    1e-5, "mamba conv, scan, gated norm");
    }
}

// Attention of n queries [n, heads · hd] at p[0] over caches at p[1] and p[2] whose first pos rows
// are filled, into p[3], scaled by 1/sqrt(hd).
AttentionArgs attention_over(const std::vector<float*>& p, int64_t n, int64_t pos, int64_t heads, int64_t kv,
                             int64_t hd) {
    AttentionArgs a;
    a.n = n;
    a.pos = pos;
    a.heads = heads;
    a.kv_heads = kv;
    a.head_dim = hd;
    a.scale = 1.0f / std::sqrt(float(hd));
    a.q = p[0];
    a.k_cache = p[1];
    a.v_cache = p[2];
    a.out = p[3];
    return a;
}

TEST_F(CudaBackendOps, AttentionOverACacheWithGqa) {
    const int64_t n = 3, pos = 9, heads = 4, kv = 2, hd = 16, cap = 16;
    expect_same({random_values(rng_, n * heads * hd), random_values(rng_, cap * kv * hd),
                 random_values(rng_, cap * kv * hd), std::vector<float>(n * heads * hd)},
                {3},
                [&](Backend& b, std::vector<float*> p) {
                    AttentionArgs a;
                    a.n = n;
                    a.pos = pos;
                    a.heads = heads;
                    a.kv_heads = kv;
                    a.head_dim = hd;
                    a.scale = 0.25f;
                    a.q = p[0];
                    a.k_cache = p[1];
                    a.v_cache = p[2];
                    a.out = p[3];
                    b.attention(a);
                },
                1e-5, "attention");
}

// Attention with the position in backend memory, as a recorded decode step runs it: every
// position up to the cache's capacity, GQA groups of 1, 4 and 8 heads, head sizes 64 to 256. The
// host's pos is left stale, so only the device position can give the right answer.
TEST_F(CudaBackendOps, AttentionReadsItsPositionOnTheDevice) {
    const int64_t capacity = 8192, kv = 2;
    Backend* backends[2] = {cpu_.get(), gpu_.get()};
    for (int64_t hd : {int64_t(64), int64_t(128), int64_t(256)}) {
        const std::vector<float> keys = random_values(rng_, capacity * kv * hd);
        const std::vector<float> values = random_values(rng_, capacity * kv * hd);
        Buffer k_cache[2], v_cache[2], at[2];
        for (int which = 0; which < 2; ++which) {
            Backend& b = *backends[which];
            k_cache[which] = b.alloc(keys.size());
            v_cache[which] = b.alloc(values.size());
            at[which] = b.alloc(1);
            b.upload(k_cache[which].data(), keys.data(), keys.size());
            b.upload(v_cache[which].data(), values.data(), values.size());
        }
        for (int64_t ratio : {int64_t(1), int64_t(4), int64_t(8)}) {
            for (int64_t n : {int64_t(1), int64_t(2), int64_t(5)}) {
                for (int32_t pos : {0, 1, 700, 5000}) {
                    const int64_t heads = kv * ratio;
                    const std::vector<float> q = random_values(rng_, n * heads * hd, -2.0f, 2.0f);
                    std::vector<float> results[2];
                    for (int which = 0; which < 2; ++which) {
                        Backend& b = *backends[which];
                        Buffer q_buffer = b.alloc(q.size()), out = b.alloc(q.size());
                        b.upload(q_buffer.data(), q.data(), q.size());
                        int32_t* position = at[which].ints();
                        b.upload_ints(position, &pos, 1);
                        AttentionArgs a;
                        a.n = n;
                        a.pos = pos == 0 ? 33 : 0;  // stale
                        a.position = position;
                        a.capacity = capacity;
                        a.heads = heads;
                        a.kv_heads = kv;
                        a.head_dim = hd;
                        a.scale = 1.0f / std::sqrt(float(hd));
                        a.q = q_buffer.data();
                        a.k_cache = k_cache[which].data();
                        a.v_cache = v_cache[which].data();
                        a.out = out.data();
                        b.attention(a);
                        results[which].resize(q.size());
                        b.download(results[which].data(), out.data(), q.size());
                    }
                    EXPECT_LE(relative_error(results[1], results[0]), 1e-5)
                        << "attention at device position " << pos << ", n " << n << ", " << heads << " heads over "
                        << kv << ", head_dim " << hd;
                }
            }
        }
    }
}

// Without a device position: one token deep in the cache (split over the context), a long prompt
// (one block per token and head group, no scratch), groups of 5 heads (rows left over in a block),
// head sizes that are not multiples of 4 (4-byte copies) or need a block per half group (320, 512).
TEST_F(CudaBackendOps, AttentionOneTokenDeepLongPromptsAndOddShapes) {
    struct Case {
        int64_t n, pos, heads, kv, hd;
    };
    for (const Case& c : {Case{1, 3000, 8, 2, 128}, Case{40, 300, 8, 2, 128}, Case{7, 0, 8, 2, 128},
                          Case{2, 900, 10, 2, 18}, Case{1, 2000, 10, 2, 80}, Case{3, 100, 4, 4, 512},
                          Case{1, 700, 32, 4, 320}}) {
        const int64_t n = c.n, pos = c.pos, heads = c.heads, kv = c.kv, hd = c.hd, cap = pos + n;
        SCOPED_TRACE(::testing::Message() << "n " << n << ", pos " << pos << ", " << heads << " heads over " << kv
                                          << ", head_dim " << hd);
        expect_same({random_values(rng_, n * heads * hd, -2.0f, 2.0f), random_values(rng_, cap * kv * hd),
                     random_values(rng_, cap * kv * hd), std::vector<float>(n * heads * hd)},
                    {3},
                    [&](Backend& b, std::vector<float*> p) { b.attention(attention_over(p, n, pos, heads, kv, hd)); },
                    1e-5, "attention without a device position");
    }
}

// Gated attention's output gate applied by the attention op: with one split (the kernel writes the
// output) and with many (the combine does), the gate interleaved with the queries as in q_proj.
TEST_F(CudaBackendOps, AttentionAppliesTheOutputGate) {
    for (int64_t pos : {int64_t(5), int64_t(2500)}) {
        const int64_t n = 2, heads = 8, kv = 2, hd = 128, cap = pos + n;
        SCOPED_TRACE(::testing::Message() << "pos " << pos);
        expect_same({random_values(rng_, n * heads * hd, -2.0f, 2.0f), random_values(rng_, cap * kv * hd),
                     random_values(rng_, cap * kv * hd), std::vector<float>(n * heads * hd),
                     random_values(rng_, n * heads * 2 * hd, -3.0f, 3.0f)},
                    {3},
                    [&](Backend& b, std::vector<float*> p) {
                        AttentionArgs a = attention_over(p, n, pos, heads, kv, hd);
                        a.output_gate = p[4] + hd;
                        a.gate_row_stride = heads * 2 * hd;
                        a.gate_head_stride = 2 * hd;
                        b.attention(a);
                    },
                    1e-5, "gated attention");
    }
}

TEST_F(CudaBackendOps, GatedDeltaRuleOneTokenAndManyAgainstTheChunkedForm) {
    const int64_t kh = 2, vh = 4, dk = 16, dv = 16, width = 2 * kh * dk + vh * dv;
    const std::vector<float> neg = random_values(rng_, vh, -3.0f, -0.5f), dt_bias = random_values(rng_, vh);
    for (int64_t n : {1, 70}) {
        expect_same({random_values(rng_, n * width), random_values(rng_, n * vh), random_values(rng_, n * vh),
                     random_values(rng_, vh * dk * dv, -0.1f, 0.1f), std::vector<float>(n * vh * dv)},
                    {3, 4},
                    [&](Backend& b, std::vector<float*> p) {
                        GatedDeltaArgs g =
                            delta_rule_args(n, kh, vh, dk, dv, p[0], width, p[1], p[2], p[3], p[4], neg, dt_bias);
                        g.chunk = n > 1 ? 64 : 0;
                        b.gated_delta_rule(g);
                    },
                    1e-4, n == 1 ? "delta rule, one token" : "delta rule, chunked on the CPU");
    }
}

// The Gated DeltaNet middle as one op against the CPU's three: one token at Qwen3.5's head sizes
// (a cluster of two value heads of four 32-column slices), at 48 value columns (a slice partly
// out of range) and at four value heads a key head (a cluster of 16, which the GPU does not take
// in one launch), and three tokens (the three ops on the GPU too).
TEST_F(CudaBackendOps, DeltaConvolutionRuleAndGatedNormAsOneOp) {
    struct Shape {
        int64_t n, kh, vh, dk, dv;
    };
    for (const Shape& sh : {Shape{1, 2, 4, 128, 128}, Shape{1, 3, 6, 40, 48}, Shape{1, 1, 4, 64, 128},
                            Shape{3, 2, 4, 128, 128}}) {
        const int64_t channels = 2 * sh.kh * sh.dk + sh.vh * sh.dv, v_width = sh.vh * sh.dv, kernel = 4;
        const std::vector<float> taps = random_values(rng_, channels * kernel),
                                 neg = random_values(rng_, sh.vh, -3.0f, -0.5f), dt_bias = random_values(rng_, sh.vh),
                                 norm = random_values(rng_, sh.dv, 0.5f, 1.5f);
        expect_same({random_values(rng_, sh.n * channels), random_values(rng_, (kernel - 1) * channels),
                     std::vector<float>(sh.n * channels), random_values(rng_, sh.n * sh.vh),
                     random_values(rng_, sh.n * sh.vh), random_values(rng_, sh.vh * sh.dk * sh.dv, -0.1f, 0.1f),
                     std::vector<float>(sh.n * v_width), random_values(rng_, sh.n * v_width)},
                    {1, 5, 6},
                    [&](Backend& b, std::vector<float*> p) {
                        DeltaMiddleArgs m;
                        m.conv.x = p[0];
                        m.conv.x_stride = channels;
                        m.conv.channels = channels;
                        m.conv.kernel = kernel;
                        m.conv.taps = taps.data();
                        m.conv.ring = p[1];
                        m.conv.out = p[2];
                        m.rule = delta_rule_args(sh.n, sh.kh, sh.vh, sh.dk, sh.dv, p[2], channels, p[3], p[4], p[5],
                                                 p[6], neg, dt_bias);
                        m.z = p[7];
                        m.z_stride = v_width;
                        m.norm_weight = norm.data();
                        m.eps = 1e-6f;
                        b.delta_conv_rule_norm(m);
                    },
                    1e-4, "delta conv, rule, gated norm");
    }
}

// Qwen3.5's head sizes (128) and half of them, two v-heads per k-head, 1, 3 and 70 tokens.
TEST_F(CudaBackendOps, GatedDeltaRuleAtModelHeadSizes) {
    for (int64_t dim : {int64_t(128), int64_t(64)}) {
        const int64_t kh = 2, vh = 4, dk = dim, dv = dim, width = 2 * kh * dk + vh * dv;
        const std::vector<float> neg = random_values(rng_, vh, -3.0f, -0.5f), dt_bias = random_values(rng_, vh);
        for (int64_t n : {int64_t(1), int64_t(3), int64_t(70)}) {
            expect_same({random_values(rng_, n * width), random_values(rng_, n * vh), random_values(rng_, n * vh),
                         random_values(rng_, vh * dk * dv, -0.1f, 0.1f), std::vector<float>(n * vh * dv)},
                        {3, 4},
                        [&](Backend& b, std::vector<float*> p) {
                            GatedDeltaArgs g =
                            delta_rule_args(n, kh, vh, dk, dv, p[0], width, p[1], p[2], p[3], p[4], neg, dt_bias);
                            g.chunk = n > 64 ? 64 : 0;
                            b.gated_delta_rule(g);
                        },
                        1e-4, "delta rule at model head sizes");
        }
    }
}

// Prompts through the GPU's chunked form (delta_rule_chunked) against the CPU's: several chunks with
// a part-filled last one, chunks shorter than the kernel's 64 rows, a value head whose last
// 32-column slice is part-filled, three value heads a key head, and a strong decay (the chunk's
// e^G far below 1).
TEST_F(CudaBackendOps, GatedDeltaRuleChunkedOverPrompts) {
    struct Shape {
        int64_t n, chunk, kh, vh, dk, dv;
        float decay_low, decay_high;
    };
    for (const Shape& sh : {Shape{200, 64, 2, 4, 128, 128, -3.0f, -0.5f}, Shape{97, 16, 1, 3, 64, 48, -3.0f, -0.5f},
                            Shape{130, 64, 2, 2, 32, 80, -12.0f, -6.0f}}) {
        const int64_t width = 2 * sh.kh * sh.dk + sh.vh * sh.dv;
        const std::vector<float> neg = random_values(rng_, sh.vh, sh.decay_low, sh.decay_high),
                                 dt_bias = random_values(rng_, sh.vh);
        expect_same({random_values(rng_, sh.n * width), random_values(rng_, sh.n * sh.vh),
                     random_values(rng_, sh.n * sh.vh), random_values(rng_, sh.vh * sh.dk * sh.dv, -0.1f, 0.1f),
                     std::vector<float>(sh.n * sh.vh * sh.dv)},
                    {3, 4},
                    [&](Backend& b, std::vector<float*> p) {
                        GatedDeltaArgs g = delta_rule_args(sh.n, sh.kh, sh.vh, sh.dk, sh.dv, p[0], width, p[1], p[2],
                                                           p[3], p[4], neg, dt_bias);
                        g.chunk = sh.chunk;
                        b.gated_delta_rule(g);
                    },
                    1e-4, "delta rule over a prompt, chunked");
    }
}

// Few tokens run every chosen expert and the shared expert in two launches (the layer added to the
// stream in the second); more than 32 run grouped by expert on tensor cores. Narrow and model-like
// widths take rows of 8, 16 and 32 lanes; the shared expert is wider than the routed ones, as in
// Nemotron-H. The grouped launches meet experts of several row tiles (200 tokens), outputs that end
// inside a block's 128 and columns inside a stage's 64 (136), and rows of odd lengths (52, 20).
TEST_F(CudaBackendOps, MixturesOfExpertsBothRoutings) {
    for (int64_t n : {1, 5, 200}) expect_experts_agree(n, 48, 24, 40, n > 32 ? 1e-4 : 1e-5);
    expect_experts_agree(100, 256, 136, 96, 1e-4);
    expect_experts_agree(70, 52, 20, 24, 1e-4);
    for (int64_t n : {1, 3}) expect_experts_agree(n, 512, 256, 512, 1e-5);
    expect_experts_agree(2, 1024, 1024, 2048, 1e-5);  // rows of a whole warp in both launches
    expect_experts_agree(1, 2688, 64, 128, 1e-5);      // Nemotron-H's hidden width: first rows in one round
}

// The down launch by parts of rows (short rows of up to 64 groups from up to 9 sources, Qwen3.5-MoE's
// widths; long rows of 128 or more groups in up to 8 parts, Nemotron-H's, whose shared expert's rows
// take two) and the kernel it leaves other rows and more sources to.
TEST_F(CudaBackendOps, MixturesOfExpertsDownByParts) {
    for (int64_t n : {1, 3}) {
        expect_experts_agree(n, 72, 512, 512, 1e-5, ExpertChoice{16, 8, 1, 1, 0});  // short rows, 9 parts
        expect_experts_agree(n, 64, 520, 64, 1e-5, ExpertChoice{16, 8, 1, 1, 0});  // 65 groups: 16 lanes a row
        expect_experts_agree(n, 64, 24, 40, 1e-5, ExpertChoice{32, 12, 1, 1, 0});  // 13 sources: 8 lanes a row
        expect_experts_agree(n, 40, 1856, 3712, 1e-5, ExpertChoice{16, 6, 1, 1, 0});  // 232 and 2 × 232 groups
        expect_experts_agree(n, 40, 1024, 2048, 1e-5, ExpertChoice{16, 8, 1, 1, 0});  // 9 long parts: 32 lanes
    }
}

// The models' expert counts (128 top-6 in one group, 256 top-8) and more, the router's rows
// repeating so that many scores tie and the lower index must win, on the one-launch gate (one token)
// and the routing kernels of several tokens.
TEST_F(CudaBackendOps, MixturesOfManyExpertsWithTiedScores) {
    for (int64_t n : {1, 3, 40}) {
        expect_experts_agree(n, 64, 16, 32, n > 32 ? 1e-4 : 1e-5, ExpertChoice{128, 6, 1, 1, 40});
        expect_experts_agree(n, 64, 16, 32, n > 32 ? 1e-4 : 1e-5, ExpertChoice{256, 8, 1, 1, 24});
        expect_experts_agree(n, 64, 16, 32, n > 32 ? 1e-4 : 1e-5, ExpertChoice{256, 8, 8, 4, 0});
        // More experts than a block has threads: the routing ranks every entry against every other.
        expect_experts_agree(n, 64, 16, 32, n > 32 ? 1e-4 : 1e-5, ExpertChoice{300, 8, 1, 1, 37});
    }
}

void CudaBackendOps::expect_experts_agree(int64_t n, int64_t hidden, int64_t inter, int64_t shared_inter,
                                          double tolerance, const ExpertChoice& choice) {
    const int64_t experts = choice.experts;
    std::vector<std::vector<uint16_t>> store;
    auto matrix = [&](int64_t rows, int64_t cols) {
        store.push_back(random_bf16(rng_, rows * cols, 0.3f));
        return MatrixView{DType::BF16, rows, cols, store.back().data()};
    };
    auto router = [&] {
        MatrixView r = matrix(experts, hidden);
        if (choice.distinct_router_rows > 0) {
            std::vector<uint16_t>& w = store.back();
            for (int64_t e = choice.distinct_router_rows; e < experts; ++e) {
                std::copy_n(w.begin() + (e % choice.distinct_router_rows) * hidden, hidden, w.begin() + e * hidden);
            }
        }
        return r;
    };
    store.reserve(8 * experts + 16);
    std::vector<float> bias = random_values(rng_, experts, -0.1f, 0.1f);
    for (int64_t e = choice.distinct_router_rows; choice.distinct_router_rows > 0 && e < experts; ++e) {
        bias[e] = bias[e % choice.distinct_router_rows];
    }
    MoeWeights relu;
    relu.router = router();
    relu.score_bias = bias.data();
    for (int e = 0; e < experts; ++e) {
        relu.up.push_back(matrix(inter, hidden));
        relu.down.push_back(matrix(hidden, inter));
    }
    relu.shared_up = matrix(shared_inter, hidden);
    relu.shared_down = matrix(hidden, shared_inter);
    MoeRouting routing;
    routing.top_k = choice.top_k;
    routing.groups = choice.groups;
    routing.groups_kept = choice.groups_kept;
    routing.scale = 2.5f;
    // As in a model: the layer reads the residual stream, normalises it into scratch and adds itself
    // to the same stream. Both the stream and the normalised input are compared.
    const std::vector<float> norm = random_values(rng_, hidden, 0.5f, 1.5f);
    auto layer_input = [&](std::vector<float*> p) { return MoeInput{p[0], norm.data(), 1e-5f, p[1]}; };
    expect_same({random_values(rng_, n * hidden, -2.0f, 2.0f), std::vector<float>(n * hidden)}, {0, 1},
                [&](Backend& b, std::vector<float*> p) { b.moe_relu2(layer_input(p), n, relu, routing, p[0]); },
                tolerance, "relu2 experts");

    SwigluMoeWeights swiglu;
    swiglu.router = router();
    for (int e = 0; e < experts; ++e) {
        swiglu.gate.push_back(matrix(inter, hidden));
        swiglu.up.push_back(matrix(inter, hidden));
        swiglu.down.push_back(matrix(hidden, inter));
    }
    swiglu.shared_gate = matrix(shared_inter, hidden);
    swiglu.shared_up = matrix(shared_inter, hidden);
    swiglu.shared_down = matrix(hidden, shared_inter);
    swiglu.shared_expert_gate = matrix(1, hidden);
    // Weights normalised over the chosen experts (Qwen3.5-MoE's, which the GPU finds from the chosen
    // logits alone) and not.
    for (bool normalize : {true, false}) {
        expect_same({random_values(rng_, n * hidden, -2.0f, 2.0f), std::vector<float>(n * hidden)}, {0, 1},
                    [&](Backend& b, std::vector<float*> p) {
                        b.moe_swiglu(layer_input(p), n, swiglu, choice.top_k, normalize, p[0]);
                    },
                    tolerance, normalize ? "swiglu experts, normalised" : "swiglu experts");
    }
}

}  // namespace
}  // namespace duet
