// Every model's fixture checks again with the CUDA backend, at the same tolerances: Nemotron-H
// (plain and speculative), Qwen3.5-MoE, and Drama 3's prefill trace and greedy frames; Drama 3's
// sampled frames, EOS included, equal the CPU's.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "base/thread_pool.h"
#include "causal_lm_fixture.h"
#include "cuda_test_support.h"
#include "drama3_test_models.h"
#include "models/drama3/model.h"
#include "models/drama3/speaker.h"
#include "models/nemotron_h/model.h"
#include "models/nemotron_h/speculative.h"
#include "models/qwen35_moe/model.h"
#include "models/registry.h"
#include "models/tensor_set.h"

namespace duet {
namespace {

using testing::fixture_dir;
using testing::kFixtureTolerance;
using testing::read_i32;
using testing::relative_error;

class CudaModels : public cuda::testing::DeviceTest {
protected:
    void SetUp() override {
        DeviceTest::SetUp();
        if (!IsSkipped()) backend_ = make_cuda_backend();
    }
    static Checkpoint expected(const std::string& fixture) {
        return Checkpoint::open(fixture_dir(fixture) + "/expected.safetensors");
    }
    std::unique_ptr<Backend> backend_;
};

TEST_F(CudaModels, NemotronHBothLayoutsPrefillGreedyAndSpeculative) {
    for (const char* fixture : {"nemotron_h_tiny", "nemotron_h_tiny_transcribe_layout"}) {
        SCOPED_TRACE(fixture);
        const nemotron_h::Model model = nemotron_h::Model::load(fixture_dir(fixture));
        const Checkpoint ref = expected(fixture);
        testing::expect_prefill_matches(model, *backend_, ref, static_cast<int64_t>(model.config().layers.size()),
                                        model.config().hidden);
        testing::expect_greedy_matches(model, *backend_, ref);
        nemotron_h::State state = model.new_state(*backend_, 64);
        nemotron_h::MtpDrafter drafter(model);
        const std::vector<int32_t> greedy = read_i32(ref.get("greedy_ids"));
        EXPECT_EQ(nemotron_h::speculative_greedy(model, *backend_, state, read_i32(ref.get("input_ids")),
                                                 static_cast<int64_t>(greedy.size()), drafter)
                      .ids,
                  greedy);
    }
}

// A prompt longer than the fixtures' takes the GPU's prompt paths: Gated DeltaNet's chunked delta rule
// (three chunks, the last part-filled), Mamba-2's chunked scan, the convolution over token blocks,
// the routed experts grouped on tensor cores with the shared expert first and the products on
// tensor cores over split activations. Its logits, and the next token's after it, against the CPU's
// at the fixtures' tolerance (on an H100: 2.3e-5 for Qwen3.5-MoE, 4.1e-6 for Nemotron-H).
TEST_F(CudaModels, LongRandomPromptsMatchTheCpu) {
    ThreadPool pool(2);
    const std::unique_ptr<Backend> cpu = make_cpu_backend(&pool);
    for (const char* fixture : {"qwen35_moe_tiny", "nemotron_h_tiny"}) {
        SCOPED_TRACE(fixture);
        const std::unique_ptr<CausalLM> model = load_causal_lm(fixture_dir(fixture));
        std::vector<int32_t> prompt(150);
        uint32_t draw = 12345;
        for (int32_t& id : prompt) {
            draw = draw * 1664525u + 1013904223u;
            id = static_cast<int32_t>((draw >> 8) % static_cast<uint32_t>(model->vocab()));
        }
        const int32_t next = prompt[7];
        std::vector<float> logits[2], step[2];
        Backend* backends[2] = {cpu.get(), backend_.get()};
        for (int which = 0; which < 2; ++which) {
            const std::unique_ptr<SequenceState> state = model->create_state(*backends[which], 160);
            logits[which] = model->forward(*backends[which], *state, prompt, true);
            step[which] = model->forward(*backends[which], *state, std::span<const int32_t>(&next, 1), false);
        }
        const double prompt_error = relative_error(logits[1], logits[0]), step_error = relative_error(step[1], step[0]);
        std::fprintf(stderr, "%s: the prompt's logits within %.2e of the CPU's, the next token's within %.2e\n", fixture,
                     prompt_error, step_error);
        EXPECT_LE(prompt_error, kFixtureTolerance);
        EXPECT_LE(step_error, kFixtureTolerance);
    }
}

TEST_F(CudaModels, Qwen35MoePrefillAndGreedy) {
    const qwen35_moe::Model model = qwen35_moe::Model::load(fixture_dir("qwen35_moe_tiny"));
    const Checkpoint ref = expected("qwen35_moe_tiny");
    testing::expect_prefill_matches(model, *backend_, ref, static_cast<int64_t>(model.config().layers.size()),
                                    model.config().hidden);
    testing::expect_greedy_matches(model, *backend_, ref);
}

TEST_F(CudaModels, Drama3PrefillTraceAndGreedyFrames) {
    const drama3::Model model = drama3::Model::load(fixture_dir("drama3_tiny"));
    const Checkpoint ref = expected("drama3_tiny");
    const text::FrameRows prompt = testing::drama3_prompt_rows(model.config());
    drama3::Speaker speaker(model, *backend_, 64);
    drama3::PrefillTrace trace;
    speaker.feed(prompt, &trace);
    EXPECT_LE(relative_error(trace.input_rows, read_f32(ref.get("backbone_input_rows"))), kFixtureTolerance);
    EXPECT_LE(relative_error(trace.main_logits, read_f32(ref.get("prefill_main_logits"))), kFixtureTolerance);
    EXPECT_LE(relative_error(trace.head_logits, read_f32(ref.get("prefill_head_logits"))), kFixtureTolerance);

    drama3::FrameSampling greedy;
    greedy.params.temperature = 0.0f;
    std::vector<drama3::FrameTrace> traces;
    const std::vector<int32_t> frames = read_i32(ref.get("greedy_frames"));
    const drama3::SpokenFrames out =
        drama3::speak_frames(speaker, greedy, static_cast<int64_t>(frames.size()) / prompt.width(), {}, &traces);
    EXPECT_EQ(out.frames.values(), frames);
    const std::vector<float> heads = read_f32(ref.get("step_head_logits"));
    const size_t per_frame = heads.size() / traces.size();
    for (size_t g = 0; g < traces.size(); ++g) {
        EXPECT_LE(relative_error(traces[g].head_logits.data(), heads.data() + g * per_frame, per_frame),
                  kFixtureTolerance)
            << "frame " << g;
    }
}

// The same seed draws the same frames on both backends (the counter-based generator).
TEST_F(CudaModels, Drama3SampledFramesMatchTheCpu) {
    const drama3::Model model = drama3::Model::load(fixture_dir("drama3_tiny"));
    const text::FrameRows prompt = testing::drama3_prompt_rows(model.config());
    auto run = [&](Backend& backend) {
        drama3::Speaker speaker(model, backend, 64);
        speaker.feed(prompt);
        drama3::FrameSampling sampling;
        sampling.params.seed = 9;
        return drama3::speak_frames(speaker, sampling, 20).frames.values();
    };
    ThreadPool pool(2);
    const std::unique_ptr<Backend> cpu = make_cpu_backend(&pool);
    EXPECT_EQ(run(*backend_), run(*cpu));
}

// The fixture's weights with the EOS row of the LM head made the row of a token sampling often
// picks: sampled runs then end in EOS after a few frames, so a frame's recorded step is replayed
// both with its second part (the tower and the feed) and without it (the EOS frame). Each run is a
// conversation of two turns, the second fed after the first's EOS, on the same recording.
TEST_F(CudaModels, Drama3SampledFramesEndingInEosMatchTheCpu) {
    const drama3::Model model = testing::drama3_preferring_eos(1.0f);
    const text::FrameRows prompt = testing::drama3_prompt_rows(model.config());
    struct Turn {
        std::vector<int32_t> frames;
        drama3::StopReason reason;
    };
    auto converse = [&](Backend& backend, uint64_t seed) {
        drama3::Speaker speaker(model, backend, 128);
        drama3::FrameSampling sampling;
        sampling.params.seed = seed;
        std::vector<Turn> turns;
        for (int turn = 0; turn < 2; ++turn) {
            speaker.feed(prompt);
            const drama3::SpokenFrames out = drama3::speak_frames(speaker, sampling, 40);
            turns.push_back({out.frames.values(), out.reason});
        }
        return turns;
    };
    ThreadPool pool(2);
    const std::unique_ptr<Backend> cpu = make_cpu_backend(&pool);
    int long_runs_ending_in_eos = 0;
    for (uint64_t seed : {1, 4, 8}) {
        SCOPED_TRACE(::testing::Message() << "seed " << seed);
        const std::vector<Turn> want = converse(*cpu, seed), got = converse(*backend_, seed);
        ASSERT_EQ(got.size(), want.size());
        for (size_t t = 0; t < want.size(); ++t) {
            EXPECT_EQ(got[t].frames, want[t].frames) << "turn " << t;
            EXPECT_EQ(got[t].reason, want[t].reason) << "turn " << t;
            const size_t frames = want[t].frames.size() / static_cast<size_t>(prompt.width());
            if (want[t].reason == drama3::StopReason::Eos && frames > 2) ++long_runs_ending_in_eos;
        }
    }
    // Runs that replay the recorded frame step before their EOS frame, or this test checks too little.
    EXPECT_GT(long_runs_ending_in_eos, 0);
}

// Frames drawn on the GPU with each next step issued before the last frame is read back, drawing on
// after every EOS (as the bench does), against the CPU drawing one frame at a time: the step queued
// behind an EOS frame must do nothing, and the one after it start from counters set anew.
TEST_F(CudaModels, Drama3FramesDrawnAheadMatchTheCpuAcrossEos) {
    const drama3::Model model = testing::drama3_preferring_eos(1.0f);
    const text::FrameRows prompt = testing::drama3_prompt_rows(model.config());
    ThreadPool pool(2);
    const std::unique_ptr<Backend> cpu = make_cpu_backend(&pool);
    int ends = 0;
    for (uint64_t seed : {1, 4, 8}) {
        drama3::Speaker gpu_speaker(model, *backend_, 128), cpu_speaker(model, *cpu, 128);
        gpu_speaker.feed(prompt);
        cpu_speaker.feed(prompt);
        drama3::FrameSampling sampling;
        sampling.params.seed = seed;
        std::vector<int32_t> got(static_cast<size_t>(model.config().frame_width())), want(got.size());
        for (int i = 0; i < 40; ++i) {
            SCOPED_TRACE(::testing::Message() << "seed " << seed << ", frame " << i);
            const bool fed = gpu_speaker.step(sampling, got, nullptr, /*then_next=*/true);
            ASSERT_EQ(fed, cpu_speaker.step(sampling, want));
            ASSERT_EQ(got, want);
            ASSERT_EQ(gpu_speaker.position(), cpu_speaker.position());
            ends += fed ? 0 : 1;
        }
    }
    // One seed drew a single EOS frame in 40 on an H100; three give several.
    EXPECT_GT(ends, 2) << "too few EOS frames: the test checks too little";
}

}  // namespace
}  // namespace duet
