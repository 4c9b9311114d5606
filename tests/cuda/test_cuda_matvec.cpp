// matvec_bf16 against a double-precision CPU reference, over shapes that hit
// the vector path, the scalar path and the partial-unroll tails.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "cuda_test_support.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/matvec_bf16.h"

namespace duet::cuda {
namespace {

struct Problem {
    int64_t rows = 0;
    int64_t cols = 0;
    std::vector<uint16_t> w;  // bf16 bits
    std::vector<float> x;
};

Problem random_problem(int64_t rows, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    Problem p{rows, cols, std::vector<uint16_t>(size_t(rows * cols)), std::vector<float>(size_t(cols))};
    for (auto& v : p.w) v = f32_to_bf16(uniform(rng));
    for (auto& v : p.x) v = uniform(rng);
    return p;
}

// Checks y against the exact product of the bf16 weights and f32 inputs. The
// bound scales with sum |w||x|, the size of the terms f32 rounding acts on.
void expect_matches_reference(const Problem& p, const std::vector<float>& y) {
    ASSERT_EQ(y.size(), size_t(p.rows));
    int64_t failures = 0;
    for (int64_t r = 0; r < p.rows; ++r) {
        double exact = 0.0;
        double magnitude = 0.0;
        for (int64_t c = 0; c < p.cols; ++c) {
            const double term = double(bf16_to_f32(p.w[size_t(r * p.cols + c)])) * p.x[size_t(c)];
            exact += term;
            magnitude += std::fabs(term);
        }
        const double error = std::fabs(double(y[size_t(r)]) - exact);
        // Written so that a NaN (e.g. a row the kernel never wrote) fails.
        if (!(error <= 1e-5 * magnitude) && failures++ < 5) {
            ADD_FAILURE() << "row " << r << " of " << p.rows << "x" << p.cols << ": got "
                          << y[size_t(r)] << ", expected " << exact << " (error " << error
                          << ", bound " << 1e-5 * magnitude << ")";
        }
    }
    EXPECT_EQ(failures, 0);
}

// Runs the kernel with every operand at `offset` elements past a 256-byte
// aligned allocation, so offsets other than multiples of 8 force the scalar
// path even for widths that are multiples of 8.
std::vector<float> run_on_device(const Problem& p, int64_t offset = 0) {
    std::vector<uint16_t> w(size_t(offset), 0);
    w.insert(w.end(), p.w.begin(), p.w.end());
    std::vector<float> x(size_t(offset), 0.0f);
    x.insert(x.end(), p.x.begin(), p.x.end());

    DeviceBuffer w_device = DeviceBuffer::from_vector(w);
    DeviceBuffer x_device = DeviceBuffer::from_vector(x);
    DeviceBuffer y_device(size_t(p.rows + offset) * sizeof(float));
    // All-ones bytes are NaN: any output the kernel fails to write shows up.
    DUET_CUDA_CHECK(cudaMemset(y_device.data(), 0xFF, y_device.size_bytes()));

    matvec_bf16(w_device.as<uint16_t>() + offset, x_device.as<float>() + offset,
                y_device.as<float>() + offset, p.rows, p.cols, nullptr);
    DUET_CUDA_CHECK(cudaDeviceSynchronize());

    std::vector<float> y = y_device.download<float>(size_t(p.rows + offset));
    return std::vector<float>(y.begin() + offset, y.end());
}

class CudaMatvec : public testing::DeviceTest {};

// Rows of 8, 16 and 32 lanes in one round of loads and in several; launches of one wave ({50, 400},
// {100, 1000}, {1000, 4096}) and of several ({16384, 1032}: 4096 blocks).
TEST_F(CudaMatvec, MatchesCpuReference) {
    const int64_t shapes[][2] = {{1, 1},      {3, 7},      {17, 8},      {64, 100},    {50, 400},
                                 {100, 1000}, {1000, 4096}, {4099, 2056}, {16384, 1032}};
    uint32_t seed = 1234;
    for (const auto& shape : shapes) {
        SCOPED_TRACE(::testing::Message() << shape[0] << "x" << shape[1]);
        const Problem p = random_problem(shape[0], shape[1], seed++);
        expect_matches_reference(p, run_on_device(p));
    }
}

TEST_F(CudaMatvec, UnalignedOperandsUseScalarPath) {
    for (int64_t offset : {1, 2, 3, 4}) {
        SCOPED_TRACE(::testing::Message() << "offset " << offset);
        const Problem p = random_problem(37, 264, 99);
        expect_matches_reference(p, run_on_device(p, offset));
    }
}

TEST_F(CudaMatvec, ZeroColumnsGivesZeros) {
    DeviceBuffer y(4 * sizeof(float));
    DUET_CUDA_CHECK(cudaMemset(y.data(), 0xFF, y.size_bytes()));
    matvec_bf16(nullptr, nullptr, y.as<float>(), 4, 0, nullptr);
    DUET_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(y.download<float>(4), std::vector<float>(4, 0.0f));
}

TEST(CudaMatvecArguments, RejectsBadShapesAndPointers) {
    float dummy = 0.0f;
    EXPECT_THROW(matvec_bf16(nullptr, nullptr, &dummy, -1, 4, nullptr), Error);
    EXPECT_THROW(matvec_bf16(nullptr, nullptr, &dummy, 4, -1, nullptr), Error);
    EXPECT_THROW(matvec_bf16(nullptr, nullptr, nullptr, 4, 4, nullptr), Error);
    EXPECT_THROW(matvec_bf16(nullptr, nullptr, &dummy, 4, 4, nullptr), Error);
    // Nothing to compute: no launch, no error, even without a device.
    EXPECT_NO_THROW(matvec_bf16(nullptr, nullptr, nullptr, 0, 4, nullptr));
}

}  // namespace
}  // namespace duet::cuda
