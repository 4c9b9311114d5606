// Drama 3 against fixtures/drama3_tiny: backbone input rows, candidate logits at every prompt row,
// the teacher-forced tower's head logits and mask, then greedy frames and the logits behind each.
#include <memory>

#include "base/thread_pool.h"
#include "causal_lm_fixture.h"
#include "models/drama3/model.h"
#include "models/drama3/speaker.h"
#include "test_support.h"

namespace duet::drama3 {
namespace {

using testing::fixture_dir;
using testing::kFixtureTolerance;
using testing::read_i32;
using testing::relative_error;

class Drama3Fixture : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        model_ = std::make_unique<Model>(Model::load(fixture_dir("drama3_tiny")));
        expected_ = std::make_unique<Checkpoint>(Checkpoint::open(fixture_dir("drama3_tiny") + "/expected.safetensors"));
    }
    static void TearDownTestSuite() {
        model_.reset();
        expected_.reset();
    }

    static text::FrameRows prompt() {
        text::FrameRows rows(static_cast<int>(model_->config().tower.num_codebooks));
        const std::vector<int32_t> values = read_i32(expected_->get("prompt_frames"));
        for (size_t r = 0; r < values.size() / rows.width(); ++r) {
            rows.push_row(std::span(values).subspan(r * rows.width(), rows.width()));
        }
        return rows;
    }

    static std::unique_ptr<Model> model_;
    static std::unique_ptr<Checkpoint> expected_;
};
std::unique_ptr<Model> Drama3Fixture::model_;
std::unique_ptr<Checkpoint> Drama3Fixture::expected_;

TEST_F(Drama3Fixture, PrefillMatchesRowsCandidatesAndTeacherForcedTower) {
    ThreadPool pool(2);
    const std::unique_ptr<Backend> backend = make_cpu_backend(&pool);
    Speaker speaker(*model_, *backend, 64);
    PrefillTrace trace;
    speaker.feed(prompt(), &trace);
    EXPECT_LE(relative_error(trace.input_rows, read_f32(expected_->get("backbone_input_rows"))), kFixtureTolerance);
    EXPECT_LE(relative_error(trace.main_logits, read_f32(expected_->get("prefill_main_logits"))), kFixtureTolerance);
    EXPECT_EQ(trace.tower_mask, read_f32(expected_->get("prefill_tower_mask")));
    EXPECT_LE(relative_error(trace.head_logits, read_f32(expected_->get("prefill_head_logits"))), kFixtureTolerance);
}

TEST_F(Drama3Fixture, GreedyFramesAndTheirLogitsMatch) {
    ThreadPool pool(2);
    const std::unique_ptr<Backend> backend = make_cpu_backend(&pool);
    const std::vector<int32_t> greedy = read_i32(expected_->get("greedy_frames"));
    const int64_t width = model_->config().frame_width(), frames = static_cast<int64_t>(greedy.size()) / width;
    Speaker speaker(*model_, *backend, 64);
    speaker.feed(prompt());
    FrameSampling sampling;
    sampling.params.temperature = 0.0f;
    std::vector<FrameTrace> traces;
    const SpokenFrames out = speak_frames(speaker, sampling, frames, {}, &traces);
    EXPECT_EQ(out.frames.values(), greedy);

    const std::vector<float> main = read_f32(expected_->get("step_main_logits"));
    const std::vector<float> heads = read_f32(expected_->get("step_head_logits"));
    const size_t candidates = static_cast<size_t>(model_->config().candidates());
    const size_t head_size = heads.size() / static_cast<size_t>(frames);
    ASSERT_EQ(traces.size(), static_cast<size_t>(frames));
    for (size_t g = 0; g < traces.size(); ++g) {
        EXPECT_LE(relative_error(traces[g].main_logits.data(), main.data() + g * candidates, candidates),
                  kFixtureTolerance)
            << "frame " << g;
        ASSERT_EQ(traces[g].head_logits.size(), head_size);
        EXPECT_LE(relative_error(traces[g].head_logits.data(), heads.data() + g * head_size, head_size),
                  kFixtureTolerance)
            << "frame " << g;
    }
}

// The stable checking form: `duet speak --prompt-frames FILE --temperature 0 --dump OUT`.
TEST_F(Drama3Fixture, SpeakCheckingFormDumpsTheGreedyFramesAndLogits) {
    testing::TempDir tmp("drama3-dump");
    const std::string dir = fixture_dir("drama3_tiny");
    const testing::CliResult result = testing::run_duet("speak --model " + dir + " --prompt-frames " + dir +
                                                        "/expected.safetensors --temperature 0 --max-frames 10 --dump " +
                                                        tmp.file("out.safetensors"));
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const Checkpoint dump = Checkpoint::open(tmp.file("out.safetensors"));
    EXPECT_EQ(read_i32(dump.get("frames")), read_i32(expected_->get("greedy_frames")));
    EXPECT_EQ(dump.get("frames").shape, expected_->get("greedy_frames").shape);
    EXPECT_EQ(dump.get("main_logits").shape, expected_->get("step_main_logits").shape);
    EXPECT_EQ(dump.get("head_logits").shape, expected_->get("step_head_logits").shape);
    EXPECT_LE(relative_error(read_f32(dump.get("main_logits")), read_f32(expected_->get("step_main_logits"))),
              kFixtureTolerance);
    EXPECT_LE(relative_error(read_f32(dump.get("head_logits")), read_f32(expected_->get("step_head_logits"))),
              kFixtureTolerance);
}

}  // namespace
}  // namespace duet::drama3
