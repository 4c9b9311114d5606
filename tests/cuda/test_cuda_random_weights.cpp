// Random weights made on the GPU: bit for bit the host's, used in place by the CUDA backend, and
// the models built from them computing what the host-made ones compute.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_tensor_storage.h"
#include "base/json.h"
#include "base/thread_pool.h"
#include "cuda_test_support.h"
#include "models/drama3/model.h"
#include "models/drama3/presets.h"
#include "models/drama3/random_weights.h"
#include "models/drama3/speaker.h"
#include "models/random_tensors.h"
#include "models/registry.h"
#include "test_support.h"
#include "text/frame_rows.h"

namespace duet {
namespace {

using testing::relative_error;

// The tiny presets' norms and conv taps stay on the host below this; most matrices go to the GPU.
constexpr int64_t kTinyMinElements = 1024;
constexpr double kTolerance = 1e-5;

class CudaRandomWeights : public cuda::testing::DeviceTest {
protected:
    // The bytes of `t`, fetched from the GPU when they are there.
    static std::vector<uint8_t> bytes_of(const TensorEntry& t, DeviceTensorStorage& storage) {
        std::vector<uint8_t> out(t.nbytes);
        storage.copy_rows(out.data(), t.nbytes, t.data, t.nbytes, t.nbytes, 1);
        return out;
    }
};

TEST_F(CudaRandomWeights, DeviceValuesAreTheHostValues) {
    const std::shared_ptr<DeviceTensorStorage> storage = make_cuda_tensor_storage(1);
    TensorSet host, device(storage);
    ThreadPool pool(2);
    for (TensorSet* set : {&host, &device}) {
        RandomTensorWriter g(*set, 11, &pool);
        g.uniform("one", {1}, -1.0f, 1.0f);
        g.uniform("odd", {7, 13}, 0.9f, 1.1f);
        g.matrix("wide", {3, 100003});
        g.uniform("table", {1031, 1029}, -1.0f, 1.0f);
        g.matrix("stack", {3, 257, 511});
    }
    for (const TensorEntry* t : host.all()) {
        SCOPED_TRACE(t->name);
        const TensorEntry* d = device.find(t->name);
        ASSERT_NE(d, nullptr);
        EXPECT_TRUE(d->on_device);
        EXPECT_TRUE(storage->holds(d->data));
        EXPECT_FALSE(storage->holds(t->data));
        const std::vector<uint8_t> fetched = bytes_of(*d, *storage);
        ASSERT_EQ(fetched.size(), t->nbytes);
        EXPECT_EQ(std::memcmp(fetched.data(), t->data, t->nbytes), 0);
    }
}

TEST_F(CudaRandomWeights, CausalModelsGiveTheSameLogitsOnTheGpu) {
    ThreadPool pool(2);
    const std::unique_ptr<Backend> backend = make_cuda_backend();
    for (const char* arch : {"nemotron_h", "qwen35_moe"}) {
        SCOPED_TRACE(arch);
        const std::unique_ptr<CausalLM> host = random_causal_lm(arch, "tiny", 5, &pool);
        const std::unique_ptr<CausalLM> device =
            random_causal_lm(arch, "tiny", 5, &pool, make_cuda_tensor_storage(kTinyMinElements));
        const std::vector<int32_t> prompt = {1, 7, 42, 3, 99, 11, 200, 5, 64};
        auto run = [&](const CausalLM& model) {
            const std::unique_ptr<SequenceState> state = model.create_state(*backend, 32);
            std::vector<float> logits = model.forward(*backend, *state, prompt, false);
            const int32_t next = 17;
            const std::vector<float> step = model.forward(*backend, *state, std::span<const int32_t>(&next, 1), false);
            logits.insert(logits.end(), step.begin(), step.end());
            return logits;
        };
        const std::vector<float> expected = run(*host), actual = run(*device);
        EXPECT_LE(relative_error(actual, expected), kTolerance);
    }
}

TEST_F(CudaRandomWeights, Drama3GivesTheSameFramesOnTheGpu) {
    const std::unique_ptr<Backend> backend = make_cuda_backend();
    const drama3::Config config = drama3::preset_config("tiny");
    const std::shared_ptr<DeviceTensorStorage> storage = make_cuda_tensor_storage(kTinyMinElements);
    const drama3::Model host = drama3::Model::from_tensors(config, drama3::make_random_weights(config, 2, nullptr));
    const drama3::Model device =
        drama3::Model::from_tensors(config, drama3::make_random_weights(config, 2, nullptr, storage));
    EXPECT_TRUE(storage->holds(device.weights().candidate_head.data));
    EXPECT_TRUE(storage->holds(device.weights().tower[0].eh_embedding.data));

    struct Result {
        std::vector<float> main_logits;
        std::vector<int32_t> frames;
    };
    auto run = [&](const drama3::Model& model) {
        text::FrameRows prompt(static_cast<int>(config.tower.num_codebooks));
        const std::vector<int32_t> text = {3, 5, 8, 13, 21, 34};
        prompt.push_text(text);
        drama3::Speaker speaker(model, *backend, 64);
        drama3::PrefillTrace trace;
        speaker.feed(prompt, &trace);
        drama3::FrameSampling greedy;
        greedy.params.temperature = 0.0f;
        return Result{trace.main_logits, drama3::speak_frames(speaker, greedy, 6).frames.values()};
    };
    const Result expected = run(host), actual = run(device);
    EXPECT_LE(relative_error(actual.main_logits, expected.main_logits), kTolerance);
    EXPECT_EQ(actual.frames, expected.frames);
}

TEST_F(CudaRandomWeights, BenchMakesTheWeightsOnTheGpu) {
    const testing::CliResult result = testing::run_duet(
        "bench --device cuda --arch nemotron_h --preset tiny --random-weights --prompt 8 --decode 2 --bandwidth-mib 64");
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const json::Value line = json::parse(result.out, "bench output");
    ASSERT_NE(line.find("weights_made_on"), nullptr) << result.out;
    EXPECT_EQ(line.find("weights_made_on")->as_string("weights_made_on"), "cuda");
    EXPECT_EQ(line.find("backend")->as_string("backend"), "cuda");
}

}  // namespace
}  // namespace duet
