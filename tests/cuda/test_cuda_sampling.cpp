// The CUDA backend's sampling ops against the CPU backend's: the same index for the same logits and
// draws, row for row, and the same RAS window after a run of choices; and the device's Philox
// against the host's, number for number.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "base/thread_pool.h"
#include "cuda_test_support.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/ops.h"
#include "sample/philox.h"
#include "sample/sampler.h"

namespace duet {
namespace {

// Normal logits of the given spread, never exactly zero.
std::vector<float> random_logits(std::mt19937& rng, size_t count, float spread) {
    std::normal_distribution<float> dist(0.0f, spread);
    std::vector<float> v(count);
    for (float& x : v) {
        do x = dist(rng);
        while (x == 0.0f);
    }
    return v;
}

// Logits on a coarse grid, so that many are equal and ties are ordered by index everywhere.
std::vector<float> tied_logits(std::mt19937& rng, size_t count) {
    std::uniform_int_distribution<int> dist(-8, 8);
    std::vector<float> v(count);
    for (float& x : v) x = 0.25f * static_cast<float>(dist(rng)) + 0.125f;
    return v;
}

std::string describe(const SamplingParams& p) {
    return "temperature " + std::to_string(p.temperature) + ", top_k " + std::to_string(p.top_k) + ", top_p " +
           std::to_string(p.top_p);
}

const SamplingParams kSettings[] = {
    {0.0f, 30, 0.9f, 0},
    {1.0f, 30, 0.9f, 0},
    {0.7f, 0, 0.95f, 0},
    {1.3f, 5, 1.0f, 0},
};

class CudaSampling : public cuda::testing::DeviceTest {
protected:
    void SetUp() override {
        DeviceTest::SetUp();
        if (IsSkipped()) return;
        gpu_ = make_cuda_backend();
    }

    // Draws `rows` indices from `logits` ([rows, count]) on both backends for each (seed, step)
    // and expects the same indices.
    void expect_same_draws(const std::vector<float>& logits, int64_t rows, int64_t count, const SamplingParams& params,
                           const std::vector<uint64_t>& seeds, const std::vector<int32_t>& steps, uint32_t slot,
                           const std::string& what) {
        std::vector<std::vector<int32_t>> results[2];
        Backend* backends[2] = {cpu_.get(), gpu_.get()};
        for (int which = 0; which < 2; ++which) {
            Backend& b = *backends[which];
            Buffer x = b.alloc(logits.size());
            b.upload(x.data(), logits.data(), logits.size());
            Buffer counter = b.alloc(1);
            Buffer out = b.alloc(static_cast<size_t>(rows));
            for (const uint64_t seed : seeds) {
                for (const int32_t step : steps) {
                    b.upload_ints(counter.ints(), &step, 1);
                    b.sample(x.data(), rows, count, params, DrawCounter{seed, counter.ints(), slot}, out.ints());
                    std::vector<int32_t> got(static_cast<size_t>(rows));
                    b.download_ints(got.data(), out.ints(), got.size());
                    results[which].push_back(got);
                }
            }
        }
        size_t call = 0, mismatches = 0;
        for (const uint64_t seed : seeds) {
            for (const int32_t step : steps) {
                for (int64_t r = 0; r < rows; ++r) {
                    const int32_t want = results[0][call][r], got = results[1][call][r];
                    if (want != got && ++mismatches <= 5) {
                        ADD_FAILURE() << what << " (" << describe(params) << "): seed " << seed << ", step " << step
                                      << ", row " << r << ": cpu " << want << ", cuda " << got;
                    }
                }
                ++call;
            }
        }
        EXPECT_EQ(mismatches, 0u) << what << " (" << describe(params) << ")";
    }

    std::mt19937 rng_{7};
    ThreadPool pool_{2};
    std::unique_ptr<Backend> cpu_ = make_cpu_backend(&pool_);
    std::unique_ptr<Backend> gpu_;
};

TEST_F(CudaSampling, SampleMatchesTheCpuForEverySizeAndSetting) {
    struct Size {
        int64_t count, rows;
    };
    const std::vector<uint64_t> seeds = {0, 1, 0x9E3779B97F4A7C15ull};
    std::vector<int32_t> steps;
    for (int32_t s = 0; s < 24; ++s) steps.push_back(s * 37);
    steps.push_back(-1);  // read as 2^32 - 1
    for (const Size size : {Size{1, 1}, Size{7, 1}, Size{4097, 1}, Size{4096, 3}}) {
        for (const float spread : {1.0f, 4.0f}) {
            const std::vector<float> logits = random_logits(rng_, static_cast<size_t>(size.count * size.rows), spread);
            for (const SamplingParams& params : kSettings) {
                expect_same_draws(logits, size.rows, size.count, params, seeds, steps, 5,
                                  std::to_string(size.rows) + " × " + std::to_string(size.count) + " logits of spread " +
                                      std::to_string(spread));
            }
        }
    }
}

TEST_F(CudaSampling, SampleMatchesTheCpuWithTiedLogits) {
    const std::vector<uint64_t> seeds = {3, 4};
    std::vector<int32_t> steps;
    for (int32_t s = 0; s < 20; ++s) steps.push_back(s);
    for (const int64_t count : {7, 300, 4097}) {
        const std::vector<float> logits = tied_logits(rng_, static_cast<size_t>(count * 2));
        for (const SamplingParams& params : kSettings) {
            expect_same_draws(logits, 2, count, params, seeds, steps, 0, std::to_string(count) + " tied logits");
        }
        expect_same_draws(logits, 2, count, SamplingParams{0.9f, 200, 0.99f, 0}, seeds, steps, 0,
                          std::to_string(count) + " tied logits");
    }
}

TEST_F(CudaSampling, SampleMatchesTheCpuWhenManyCandidatesAreKept) {
    // More kept candidates than the GPU sorts at once, so they are walked in pieces.
    const std::vector<uint64_t> seeds = {11, 12};
    std::vector<int32_t> steps;
    for (int32_t s = 0; s < 12; ++s) steps.push_back(s);
    for (const int64_t count : {int64_t(9000), int64_t(131072)}) {
        const std::vector<float> logits = random_logits(rng_, static_cast<size_t>(count), 0.5f);
        for (const SamplingParams params : {SamplingParams{1.0f, 0, 1.0f, 0}, SamplingParams{0.7f, 0, 0.95f, 0},
                                            SamplingParams{1.0f, 6000, 0.5f, 0}, SamplingParams{1.0f, 30, 0.9f, 0},
                                            SamplingParams{0.0f, 0, 1.0f, 0}}) {
            expect_same_draws(logits, 1, count, params, seeds, steps, 2, std::to_string(count) + " logits");
        }
    }
}

TEST_F(CudaSampling, GreedyOverALongRowTakesTheFirstLargest) {
    // Rows long enough to be spread over many blocks, twice in a row (the blocks' counter must be
    // left at zero); the largest logit placed last, then also first, so that the lowest index wins.
    const std::vector<uint64_t> seeds = {1};
    const std::vector<int32_t> steps = {0, 1};
    const SamplingParams greedy{0.0f, 0, 1.0f, 0};
    for (const int64_t count : {int64_t(16384), int64_t(131072), int64_t(248320)}) {
        std::vector<float> logits = random_logits(rng_, static_cast<size_t>(count), 2.0f);
        expect_same_draws(logits, 1, count, greedy, seeds, steps, 0, std::to_string(count) + " logits");
        const float top = *std::max_element(logits.begin(), logits.end()) + 1.0f;
        logits.back() = top;
        expect_same_draws(logits, 1, count, greedy, seeds, steps, 0, std::to_string(count) + " logits, last largest");
        logits[7] = top;
        expect_same_draws(logits, 1, count, greedy, seeds, steps, 0, std::to_string(count) + " logits, tied largest");
    }
}

// NaN (of either sign) and infinite logits among numbers: both backends rank a NaN above every
// number, so they draw the same index, in the warp's top-k, the pieces of a long top-k and the greedy
// draws of short and long rows.
TEST_F(CudaSampling, SampleMatchesTheCpuWithNanAndInfiniteLogits) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<uint64_t> seeds = {5};
    const std::vector<int32_t> steps = {0, 1, 2};
    for (const int64_t count : {int64_t(7), int64_t(300), int64_t(4097), int64_t(16384)}) {
        for (const int specials : {1, 3}) {
            std::vector<float> logits = random_logits(rng_, static_cast<size_t>(count), 2.0f);
            const float values[4] = {nan, -nan, inf, -inf};
            for (int j = 0; j < 4 * specials; ++j) {
                logits[static_cast<size_t>((j * 2654435761u) % count)] = values[j % 4];
            }
            const std::string what =
                std::to_string(count) + " logits with " + std::to_string(specials) + " of each special";
            for (const SamplingParams& params : kSettings) {
                expect_same_draws(logits, 1, count, params, seeds, steps, 1, what);
            }
            expect_same_draws(logits, 1, count, SamplingParams{1.0f, 0, 1.0f, 0}, seeds, steps, 1, what);
        }
    }
}

TEST_F(CudaSampling, SampleRejectsWhatTheCpuRejects) {
    Buffer x = gpu_->alloc(8), counter = gpu_->alloc(1), out = gpu_->alloc(1);
    const DrawCounter draws{1, counter.ints(), 0};
    EXPECT_THROW(gpu_->sample(x.data(), 1, 8, SamplingParams{-1.0f, 30, 0.9f, 0}, draws, out.ints()), Error);
    EXPECT_THROW(gpu_->sample(x.data(), 1, 8, SamplingParams{1.0f, 30, 0.0f, 0}, draws, out.ints()), Error);
    EXPECT_THROW(gpu_->sample(x.data(), 1, 8, SamplingParams{1.0f, -2, 0.9f, 0}, draws, out.ints()), Error);
    EXPECT_THROW(gpu_->sample(x.data(), 1, 0, SamplingParams{1.0f, 30, 0.9f, 0}, draws, out.ints()), Error);
}

TEST_F(CudaSampling, SampleWithRasMatchesTheCpuOverARun) {
    // A few dominant logits make repeats, so choices are redrawn; the last one is exempt (as an
    // end-of-speech candidate is) and is chosen now and then.
    const int64_t count = 4097;
    const int32_t exempt = 4096;
    std::vector<float> logits = random_logits(rng_, static_cast<size_t>(count), 0.5f);
    logits[17] = 8.0f;
    logits[1000] = 7.7f;
    logits[2500] = 7.5f;
    logits[exempt] = 7.4f;
    for (const RasParams ras : {RasParams{16, 2}, RasParams{4, 1}}) {
        for (const SamplingParams& settings : kSettings) {
            SamplingParams params = settings;
            params.seed = 99;
            const int calls = 40;
            std::vector<int32_t> choices[2], windows[2];
            Backend* backends[2] = {cpu_.get(), gpu_.get()};
            for (int which = 0; which < 2; ++which) {
                Backend& b = *backends[which];
                Buffer x = b.alloc(logits.size());
                b.upload(x.data(), logits.data(), logits.size());
                Buffer recent = b.alloc(static_cast<size_t>(1 + ras.window));
                Buffer counter = b.alloc(1);  // both zero-filled: an empty window, step 0
                Buffer out = b.alloc(1);
                Buffer live = b.alloc(1);
                for (int call = 0; call < calls; ++call) {
                    // Now and then a draw that must do nothing (a step queued behind the end of a speech).
                    const int32_t on = call % 7 == 3 ? 0 : 1;
                    b.upload_ints(live.ints(), &on, 1);
                    b.sample_with_ras(x.data(), count, params, ras, recent.ints(),
                                      DrawCounter{params.seed, counter.ints(), 3}, exempt, out.ints(), live.ints());
                    b.add_to_int(counter.ints(), 1);
                    int32_t choice = -1;
                    b.download_ints(&choice, out.ints(), 1);
                    choices[which].push_back(choice);
                }
                windows[which].resize(static_cast<size_t>(1 + ras.window));
                b.download_ints(windows[which].data(), recent.ints(), windows[which].size());
            }
            const std::string what = describe(params) + ", window " + std::to_string(ras.window);
            EXPECT_EQ(choices[1], choices[0]) << what;
            EXPECT_EQ(windows[1], windows[0]) << what;

            // The run went through the redraw and the exempt choice (on the host, by the CPU's rules).
            if (params.temperature == 0.0f) continue;
            std::vector<int32_t> window;
            int redraws = 0, exempts = 0;
            for (int call = 0; call < calls; ++call) {
                const float first = uniform_draw(params.seed, static_cast<uint32_t>(call), 3);
                const int32_t choice = sample_index(logits, params, first);
                redraws += choice != exempt && ras_should_redraw(window, choice, ras);
                const int32_t made = choices[0][static_cast<size_t>(call)];
                if (made == exempt) {
                    ++exempts;
                    continue;
                }
                window.push_back(made);
                if (static_cast<int64_t>(window.size()) > ras.window) window.erase(window.begin());
            }
            EXPECT_GT(redraws, 0) << what;
            EXPECT_GT(exempts, 0) << what;
        }
    }
}

TEST_F(CudaSampling, DevicePhiloxMatchesTheHost) {
    std::mt19937_64 rng(5);
    const int64_t n = 20000;
    std::vector<uint64_t> seeds(n), steps(n);
    std::vector<uint32_t> slots(n), counters(4 * n), keys(2 * n);
    for (int64_t i = 0; i < n; ++i) {
        seeds[i] = i % 4 == 0 ? uint64_t(i) : rng();
        steps[i] = i % 3 == 0 ? uint64_t(i) : i % 3 == 1 ? rng() & 0xFFFFFFFFu : rng();
        slots[i] = i % 5 == 0 ? uint32_t(i % 7) : static_cast<uint32_t>(rng());
        for (int j = 0; j < 4; ++j) counters[4 * i + j] = static_cast<uint32_t>(rng());
        for (int j = 0; j < 2; ++j) keys[2 * i + j] = static_cast<uint32_t>(rng());
    }
    using cuda::DeviceBuffer;
    DeviceBuffer d_seeds = DeviceBuffer::from_vector(seeds), d_steps = DeviceBuffer::from_vector(steps),
                 d_slots = DeviceBuffer::from_vector(slots), d_counters = DeviceBuffer::from_vector(counters),
                 d_keys = DeviceBuffer::from_vector(keys), d_draws(n * sizeof(float)), d_blocks(4 * n * sizeof(uint32_t));
    cuda::uniform_draws(d_seeds.as<uint64_t>(), d_steps.as<uint64_t>(), d_slots.as<uint32_t>(), n,
                        d_draws.as<float>(), nullptr);
    cuda::philox_blocks(d_counters.as<uint32_t>(), d_keys.as<uint32_t>(), n, d_blocks.as<uint32_t>(), nullptr);
    DUET_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> draws = d_draws.download<float>(n);
    const std::vector<uint32_t> blocks = d_blocks.download<uint32_t>(4 * n);
    int64_t mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (draws[i] != uniform_draw(seeds[i], steps[i], slots[i]) && ++mismatches <= 5) {
            ADD_FAILURE() << "uniform_draw(" << seeds[i] << ", " << steps[i] << ", " << slots[i] << "): host "
                          << uniform_draw(seeds[i], steps[i], slots[i]) << ", device " << draws[i];
        }
        const auto want = philox4x32({counters[4 * i], counters[4 * i + 1], counters[4 * i + 2], counters[4 * i + 3]},
                                     {keys[2 * i], keys[2 * i + 1]});
        for (int j = 0; j < 4; ++j) {
            if (blocks[4 * i + j] != want[j] && ++mismatches <= 5) ADD_FAILURE() << "philox4x32 block " << i;
        }
    }
    EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace duet
