#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "kernels/cpu/bandwidth.h"
#include "kernels/cpu/simd_level.h"
#include "tensor/matrix.h"
#include "kernel_test_support.h"

namespace duet::cpu {
namespace {

using duet::testing::random_values;

struct Problem {
    DType dtype;
    int64_t rows;
    int64_t cols;
    int64_t n;
    std::vector<float> w_f32;
    std::vector<uint16_t> w_bf16;
    std::vector<float> x;

    Problem(DType dtype_, int64_t rows_, int64_t cols_, int64_t n_, uint32_t seed)
        : dtype(dtype_), rows(rows_), cols(cols_), n(n_) {
        std::mt19937 rng(seed);
        w_f32 = random_values(rng, rows * cols);
        if (dtype == DType::BF16) {
            for (float v : w_f32) w_bf16.push_back(f32_to_bf16(v));
        }
        x = random_values(rng, n * cols);
    }

    MatrixView view() const {
        const void* data = dtype == DType::BF16 ? static_cast<const void*>(w_bf16.data())
                                                : static_cast<const void*>(w_f32.data());
        return MatrixView{dtype, rows, cols, data};
    }

    std::vector<float> run(ThreadPool* pool) const {
        std::vector<float> out(static_cast<size_t>(n * rows), std::nanf(""));
        matmul(view(), x.data(), n, out.data(), pool);
        return out;
    }

    // Token t alone, as decode computes it.
    std::vector<float> run_token(int64_t t, ThreadPool* pool) const {
        std::vector<float> out(static_cast<size_t>(rows), std::nanf(""));
        matmul(view(), x.data() + t * cols, 1, out.data(), pool);
        return out;
    }

    void expect_close_to_reference(const std::vector<float>& out, const std::string& where) const {
        const MatrixView w = view();
        for (int64_t t = 0; t < n; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
                double exact = 0;
                double magnitude = 0;
                for (int64_t c = 0; c < cols; ++c) {
                    const double product =
                        static_cast<double>(x[t * cols + c]) * matrix_element(w, r, c);
                    exact += product;
                    magnitude += std::fabs(product);
                }
                const double got = out[static_cast<size_t>(t * rows + r)];
                ASSERT_LE(std::fabs(got - exact), 1e-5 * magnitude + 1e-30)
                    << where << " t=" << t << " r=" << r << " got " << got << " want " << exact;
            }
        }
    }

    std::string describe() const {
        return str_cat(dtype_name(dtype), " rows=", rows, " cols=", cols, " n=", n);
    }
};

void expect_bit_identical(const std::vector<float>& a, const std::vector<float>& b,
                          const std::string& where) {
    ASSERT_EQ(a.size(), b.size()) << where;
    for (size_t i = 0; i < a.size(); ++i) {
        uint32_t ba, bb;
        std::memcpy(&ba, &a[i], 4);
        std::memcpy(&bb, &b[i], 4);
        ASSERT_EQ(ba, bb) << where << " element " << i << ": " << a[i] << " vs " << b[i];
    }
}

// Runs each test once per SimdLevel; levels this CPU lacks are skipped whole.
class MatmulAtLevel : public ::testing::TestWithParam<SimdLevel> {
protected:
    void SetUp() override {
        previous_ = active_simd_level();
        if (static_cast<int>(GetParam()) > static_cast<int>(detected_simd_level())) {
            GTEST_SKIP() << "this CPU has no " << simd_level_name(GetParam());
        }
        set_simd_level(GetParam());
        ASSERT_EQ(active_simd_level(), GetParam());
    }
    void TearDown() override { set_simd_level(previous_); }

private:
    SimdLevel previous_ = SimdLevel::Scalar;
};

TEST_P(MatmulAtLevel, MatchesReferenceForEveryShape) {
    ThreadPool one(1);
    ThreadPool two(2);
    uint32_t seed = 1;
    for (DType dtype : {DType::F32, DType::BF16}) {
        for (int64_t n : {1, 2, 3, 5, 7, 16, 33}) {
            for (int64_t rows : {1, 3, 4, 5, 17, 64}) {
                for (int64_t cols : {1, 7, 8, 9, 31, 64, 100, 257}) {
                    const Problem p(dtype, rows, cols, n, seed++);
                    const std::string where = p.describe();
                    const std::vector<float> out = p.run(&one);
                    p.expect_close_to_reference(out, where);
                    expect_bit_identical(out, p.run(&two), where + " (2 threads)");
                    expect_bit_identical(out, p.run(nullptr), where + " (no pool)");
                    for (int64_t t = 0; t < n; ++t) {
                        const std::vector<float> alone = p.run_token(t, &two);
                        const std::vector<float> in_batch(out.begin() + t * rows,
                                                          out.begin() + (t + 1) * rows);
                        expect_bit_identical(in_batch, alone,
                                             where + " token " + std::to_string(t));
                    }
                    if (HasFatalFailure()) return;
                }
            }
        }
    }
}

// Shapes big enough that the work really is split between threads.
TEST_P(MatmulAtLevel, ThreadCountDoesNotChangeResults) {
    ThreadPool one(1);
    ThreadPool two(2);
    ThreadPool three(3);
    uint32_t seed = 1000;
    for (DType dtype : {DType::F32, DType::BF16}) {
        for (int64_t n : {1, 4, 40}) {
            for (int64_t rows : {301, 1028}) {
                for (int64_t cols : {1000, 4099}) {
                    const Problem p(dtype, rows, cols, n, seed++);
                    const std::string where = p.describe();
                    const std::vector<float> out = p.run(&one);
                    expect_bit_identical(out, p.run(&two), where + " (2 threads)");
                    expect_bit_identical(out, p.run(&three), where + " (3 threads)");
                    const int64_t last = n - 1;
                    const std::vector<float> in_batch(out.begin() + last * rows, out.end());
                    expect_bit_identical(in_batch, p.run_token(last, &three),
                                         where + " last token");
                    if (HasFatalFailure()) return;
                }
            }
        }
    }
    // One spot check against the reference on a big shape.
    const Problem p(DType::BF16, 37, 4099, 3, 7);
    p.expect_close_to_reference(p.run(&two), p.describe());
}

// More tokens than one token block holds, so tokens are split between threads too.
TEST_P(MatmulAtLevel, ManyTokensSplitIntoBlocks) {
    ThreadPool one(1);
    ThreadPool three(3);
    uint32_t seed = 2000;
    for (DType dtype : {DType::F32, DType::BF16}) {
        for (int64_t n : {97, 200, 301}) {
            const Problem p(dtype, 45, 300, n, seed++);
            const std::string where = p.describe();
            const std::vector<float> out = p.run(&one);
            p.expect_close_to_reference(out, where);
            expect_bit_identical(out, p.run(&three), where + " (3 threads)");
            for (int64_t t : {int64_t{0}, n / 2, n - 1}) {
                const std::vector<float> in_batch(out.begin() + t * p.rows,
                                                  out.begin() + (t + 1) * p.rows);
                expect_bit_identical(in_batch, p.run_token(t, &three),
                                     where + " token " + std::to_string(t));
            }
            if (HasFatalFailure()) return;
        }
    }
}

// Products of different shapes and token counts in one job, empty ones among them: each equals its
// own matmul bit for bit, whatever the pool, and nothing is written outside its output.
TEST_P(MatmulAtLevel, ManyProductsEachEqualTheirOwnMatmul) {
    ThreadPool three(3);
    struct Shape {
        DType dtype;
        int64_t rows, cols, n;
    };
    const Shape shapes[] = {{DType::BF16, 300, 1000, 1}, {DType::BF16, 1, 1000, 1},  {DType::F32, 0, 64, 1},
                            {DType::BF16, 77, 130, 5},   {DType::F32, 64, 257, 1},   {DType::BF16, 45, 300, 97},
                            {DType::BF16, 5, 31, 0},     {DType::BF16, 1028, 512, 1}};
    std::vector<Problem> problems;
    uint32_t seed = 3000;
    for (const Shape& s : shapes) problems.emplace_back(s.dtype, s.rows, s.cols, s.n, seed++);

    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &three}) {
        constexpr size_t kGuard = 3;
        std::vector<std::vector<float>> outs;
        std::vector<Product> products;
        for (const Problem& p : problems) outs.emplace_back(static_cast<size_t>(p.n * p.rows) + kGuard, -7.0f);
        for (size_t i = 0; i < problems.size(); ++i) {
            products.push_back({problems[i].view(), problems[i].x.data(), problems[i].n, outs[i].data()});
        }
        matmul_many(products, pool);
        for (size_t i = 0; i < problems.size(); ++i) {
            const std::string where = problems[i].describe() + (pool == nullptr ? " (no pool)" : " (3 threads)");
            std::vector<float> got(outs[i].begin(), outs[i].end() - kGuard);
            expect_bit_identical(got, problems[i].run(&three), where);
            for (size_t g = got.size(); g < outs[i].size(); ++g) ASSERT_EQ(outs[i][g], -7.0f) << where;
            if (!got.empty()) problems[i].expect_close_to_reference(got, where);
            if (HasFatalFailure()) return;
        }
    }
}

TEST_P(MatmulAtLevel, EmptyShapes) {
    const std::vector<float> w(8, 1.0f);
    const std::vector<float> x(8, 1.0f);
    std::vector<float> out(8, -1.0f);
    matmul(MatrixView{DType::F32, 2, 0, w.data()}, x.data(), 3, out.data(), nullptr);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(out[static_cast<size_t>(i)], 0.0f);
    EXPECT_EQ(out[6], -1.0f);
    matmul(MatrixView{DType::F32, 0, 4, w.data()}, x.data(), 2, out.data(), nullptr);
    matmul(MatrixView{DType::F32, 2, 4, w.data()}, x.data(), 0, out.data(), nullptr);
    EXPECT_EQ(out[6], -1.0f);
}

TEST_P(MatmulAtLevel, RejectsUnsupportedDtype) {
    const std::vector<float> w(4, 1.0f);
    std::vector<float> out(4);
    EXPECT_THROW(matmul(MatrixView{DType::F16, 2, 2, w.data()}, w.data(), 1, out.data(), nullptr),
                 Error);
}

TEST_P(MatmulAtLevel, DotMatchesReference) {
    std::mt19937 rng(42);
    for (int64_t len : {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 128, 257, 1000}) {
        const std::vector<float> a = random_values(rng, len);
        const std::vector<float> b = random_values(rng, len);
        double exact = 0;
        double magnitude = 0;
        for (size_t i = 0; i < a.size(); ++i) {
            const double product = static_cast<double>(a[i]) * b[i];
            exact += product;
            magnitude += std::fabs(product);
        }
        const double got = dot_f32(a.data(), b.data(), len);
        EXPECT_LE(std::fabs(got - exact), 1e-5 * magnitude + 1e-30) << "len=" << len;
    }
}

TEST_P(MatmulAtLevel, AxpyMatchesReference) {
    std::mt19937 rng(43);
    for (int64_t len : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 257}) {
        const std::vector<float> x = random_values(rng, len);
        std::vector<float> y = random_values(rng, len + 1);
        const float guard = y.back();
        const std::vector<float> y0 = y;
        const float a = -0.37f;
        axpy_f32(a, x.data(), y.data(), len);
        for (int64_t i = 0; i < len; ++i) {
            const size_t k = static_cast<size_t>(i);
            const double exact = static_cast<double>(y0[k]) + static_cast<double>(a) * x[k];
            EXPECT_LE(std::fabs(y[k] - exact), 1e-6 * (std::fabs(y0[k]) + std::fabs(a * x[k])))
                << "len=" << len << " i=" << i;
        }
        EXPECT_EQ(y.back(), guard) << "axpy wrote past the end, len=" << len;
    }
}

INSTANTIATE_TEST_SUITE_P(MatmulSimd, MatmulAtLevel,
                         ::testing::Values(SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512),
                         [](const ::testing::TestParamInfo<SimdLevel>& info) {
                             return std::string(simd_level_name(info.param));
                         });

TEST(MatmulSimdLevel, NamesRoundTrip) {
    for (SimdLevel level : {SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512}) {
        EXPECT_EQ(parse_simd_level(simd_level_name(level)), level);
    }
    EXPECT_FALSE(parse_simd_level("sse9").has_value());
}

TEST(MatmulSimdLevel, SetClampsToTheCpu) {
    const SimdLevel previous = active_simd_level();
    set_simd_level(SimdLevel::Avx512);
    EXPECT_EQ(active_simd_level(), detected_simd_level());
    set_simd_level(SimdLevel::Scalar);
    EXPECT_EQ(active_simd_level(), SimdLevel::Scalar);
    set_simd_level(previous);
}

TEST(MatmulMatrixView, ElementsAndRowsOfBothDtypes) {
    const std::vector<float> f32 = {1.0f, -2.0f, 3.5f, 0.25f, -0.0f, 7.0f};
    std::vector<uint16_t> bf16;
    for (float v : f32) bf16.push_back(f32_to_bf16(v));
    for (const MatrixView& m : {MatrixView{DType::F32, 2, 3, f32.data()},
                                MatrixView{DType::BF16, 2, 3, bf16.data()}}) {
        EXPECT_EQ(matrix_element(m, 0, 1), -2.0f);
        EXPECT_EQ(matrix_element(m, 1, 2), 7.0f);
        float row[3];
        matrix_row_to_f32(m, 1, row);
        EXPECT_EQ(row[0], 0.25f);
        EXPECT_EQ(row[2], 7.0f);
    }
}

TEST(MatmulBandwidth, SmallBufferGivesPositiveFiniteFigures) {
    ThreadPool pool(2);
    const BandwidthResult result = measure_memory_bandwidth(&pool, size_t{64} << 20);
    EXPECT_GT(result.read_gbs, 0.0);
    EXPECT_GT(result.copy_gbs, 0.0);
    EXPECT_TRUE(std::isfinite(result.read_gbs));
    EXPECT_TRUE(std::isfinite(result.copy_gbs));
}

}  // namespace
}  // namespace duet::cpu
