// The CPU backend's two-part decode step (the second part runs only when the first part's flag is
// set) and the op that starts a speech frame from its main choice and sets such a flag.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "base/thread_pool.h"

namespace duet {
namespace {

class CpuBackendSteps : public ::testing::Test {
protected:
    int32_t read_int(const int32_t* at) {
        int32_t value = 0;
        backend_->download_ints(&value, at, 1);
        return value;
    }

    ThreadPool pool_{2};
    std::unique_ptr<Backend> backend_ = make_cpu_backend(&pool_);
};

// The first part copies the flag from where the test puts it, so it is written by an op of the
// step, as a sampler's choice would be.
TEST_F(CpuBackendSteps, SecondPartRunsOnlyWhenTheFirstPartSetsTheFlag) {
    Backend& b = *backend_;
    Buffer ints = b.alloc(4);  // [flag source, flag, first part runs, second part runs]
    Buffer first_out = b.alloc(1), second_out = b.alloc(1);
    int32_t* source = ints.ints();
    int32_t* flag = ints.ints() + 1;
    const auto key = std::make_shared<int>(0);
    const auto first = [&] {
        b.copy(reinterpret_cast<float*>(flag), reinterpret_cast<const float*>(source), 1);
        b.add_to_int(ints.ints() + 2, 1);
        return static_cast<const float*>(first_out.data());
    };
    const auto second = [&] {
        b.add_to_int(ints.ints() + 3, 1);
        return static_cast<const float*>(second_out.data());
    };
    int32_t second_runs = 0, step = 0;
    for (int32_t value : {1, 0, 0, 7, 1, 0, -1}) {
        SCOPED_TRACE(::testing::Message() << "step " << step << ", flag " << value);
        b.upload_ints(source, &value, 1);
        const float* result = b.run_step_then_if(key, first, flag, second);
        if (value != 0) ++second_runs;
        ++step;
        EXPECT_EQ(result, value != 0 ? second_out.data() : first_out.data());
        EXPECT_EQ(read_int(ints.ints() + 2), step);
        EXPECT_EQ(read_int(ints.ints() + 3), second_runs);
    }
}

TEST_F(CpuBackendSteps, FrameStartsFromItsChoiceOrIsTheEndFrame) {
    Backend& b = *backend_;
    const int64_t width = 6;
    const FrameStart start{100, 40, 7};
    Buffer ints = b.alloc(static_cast<size_t>(width + 2));  // [choice, go on, frame]
    for (int32_t choice : {0, 13, 39, 40}) {
        SCOPED_TRACE(::testing::Message() << "choice " << choice);
        const std::vector<int32_t> garbage(static_cast<size_t>(width + 2), -5);
        b.upload_ints(ints.ints(), garbage.data(), garbage.size());
        b.upload_ints(ints.ints(), &choice, 1);
        b.start_frame(ints.ints(), start, width, ints.ints() + 2, ints.ints() + 1, nullptr);
        std::vector<int32_t> got(static_cast<size_t>(width + 2));
        b.download_ints(got.data(), ints.ints(), got.size());
        const std::vector<int32_t> frame(got.begin() + 2, got.end());
        if (choice == start.end_choice) {
            EXPECT_EQ(frame, (std::vector<int32_t>{7, 0, 0, 0, 0, 0}));
            EXPECT_EQ(got[1], 0);
        } else {
            EXPECT_EQ(frame, (std::vector<int32_t>{100 + choice, choice, 0, 0, 0, 0}));
            EXPECT_EQ(got[1], 1);
        }
    }
}

// Steered by its go-on flag (live = go_on), a frame starts while the flag is set and ends it with
// EOS; then the next start, and the main token's draw, leave everything as it was.
TEST_F(CpuBackendSteps, TheEndFrameStopsTheFramesQueuedBehindIt) {
    Backend& b = *backend_;
    const int64_t width = 4;
    const FrameStart start{100, 40, 7};
    Buffer ints = b.alloc(static_cast<size_t>(width + 4));  // [choice, go on, step, window count, frame]
    int32_t* choice = ints.ints();
    int32_t* go_on = ints.ints() + 1;
    int32_t* frame = ints.ints() + 4;
    const std::vector<int32_t> set = {start.end_choice, 1, 0, 0};
    b.upload_ints(ints.ints(), set.data(), set.size());
    b.start_frame(choice, start, width, frame, go_on, go_on);
    std::vector<int32_t> ended(static_cast<size_t>(width + 4));
    b.download_ints(ended.data(), ints.ints(), ended.size());
    EXPECT_EQ(ended[1], 0);
    EXPECT_EQ(std::vector<int32_t>(ended.begin() + 4, ended.end()), (std::vector<int32_t>{7, 0, 0, 0}));

    // A draw that would choose 3 (every logit but one far below) and a start from it do nothing.
    std::vector<float> logits(static_cast<size_t>(start.end_choice + 1), -50.0f);
    logits[3] = 10.0f;
    Buffer x = b.alloc(logits.size());
    b.upload(x.data(), logits.data(), logits.size());
    const SamplingParams params{1.0f, 0, 1.0f, 9};
    b.sample_with_ras(x.data(), static_cast<int64_t>(logits.size()), params, RasParams{0, 2}, ints.ints() + 3,
                      DrawCounter{params.seed, ints.ints() + 2, 0}, start.end_choice, choice, go_on);
    b.start_frame(choice, start, width, frame, go_on, go_on);
    std::vector<int32_t> after(ended.size());
    b.download_ints(after.data(), ints.ints(), after.size());
    EXPECT_EQ(after, ended);

    // Set again, the same draw starts its frame.
    const int32_t on = 1;
    b.upload_ints(go_on, &on, 1);
    b.sample_with_ras(x.data(), static_cast<int64_t>(logits.size()), params, RasParams{0, 2}, ints.ints() + 3,
                      DrawCounter{params.seed, ints.ints() + 2, 0}, start.end_choice, choice, go_on);
    b.start_frame(choice, start, width, frame, go_on, go_on);
    b.download_ints(after.data(), ints.ints(), after.size());
    EXPECT_EQ(after[0], 3);
    EXPECT_EQ(after[1], 1);
    EXPECT_EQ(std::vector<int32_t>(after.begin() + 4, after.end()), (std::vector<int32_t>{103, 3, 0, 0}));
}

TEST_F(CpuBackendSteps, FrameEndCopiesTheFrameAndAdvancesTheCounters) {
    Backend& b = *backend_;
    const std::vector<int32_t> start = {5, 6, 7, /*counters*/ 10, 20, 30, 40, /*previous*/ -1, -1, -1};
    Buffer ints = b.alloc(start.size());
    b.upload_ints(ints.ints(), start.data(), start.size());
    b.end_frame(ints.ints(), 3, ints.ints() + 7, ints.ints() + 3, 3);
    std::vector<int32_t> got(start.size());
    b.download_ints(got.data(), ints.ints(), got.size());
    EXPECT_EQ(got, (std::vector<int32_t>{5, 6, 7, 11, 21, 31, 40, 5, 6, 7}));
}

}  // namespace
}  // namespace duet
