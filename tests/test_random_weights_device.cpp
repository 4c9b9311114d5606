// Random weights made through a device storage: the same values as in host memory, the large
// tensors placed in the storage and the small ones (what models widen on the host) not, the host
// never reading the storage's tensors, and sets holding them never written out. A storage of host
// memory stands in for the GPU here, so models built on it run on the CPU backend;
// tests/cuda/test_cuda_random_weights.cpp checks the real one.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "base/counter_random.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "models/drama3/model.h"
#include "models/drama3/presets.h"
#include "models/drama3/random_weights.h"
#include "models/drama3/speaker.h"
#include "models/nemotron_h/presets.h"
#include "models/nemotron_h/random_weights.h"
#include "models/random_tensors.h"
#include "models/registry.h"
#include "test_support.h"
#include "text/frame_rows.h"

namespace duet {
namespace {

using testing::error_of;

// Host memory posing as a device's: it remembers what it handed out, so holds() answers as a GPU's would.
class HostBackedStorage final : public DeviceTensorStorage {
public:
    explicit HostBackedStorage(int64_t min_elements) : min_elements_(min_elements) {}

    std::string_view name() const override { return "test"; }
    int64_t min_elements() const override { return min_elements_; }
    std::shared_ptr<void> allocate(size_t bytes) override {
        auto* p = new uint8_t[bytes > 0 ? bytes : 1];
        blocks_.emplace_back(p, bytes);
        return std::shared_ptr<void>(p, [](void* q) { delete[] static_cast<uint8_t*>(q); });
    }
    void fill_uniform_bf16(void* dst, int64_t count, uint64_t key, float lo, float hi) override {
        ASSERT_TRUE(holds(dst));
        auto* out = static_cast<uint16_t*>(dst);
        for (int64_t i = 0; i < count; ++i) out[i] = counter_random::uniform_bf16(key, static_cast<uint64_t>(i), lo, hi);
        ++fills;
    }
    void copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                   size_t rows) override {
        ASSERT_TRUE(holds(dst));
        for (size_t r = 0; r < rows; ++r) {
            std::memcpy(static_cast<uint8_t*>(dst) + r * dst_pitch, static_cast<const uint8_t*>(src) + r * src_pitch,
                        row_bytes);
        }
        ++copies;
    }
    bool holds(const void* p) const override {
        const auto* q = static_cast<const uint8_t*>(p);
        for (const auto& [begin, bytes] : blocks_) {
            if (q >= begin && q < begin + bytes) return true;
        }
        return false;
    }
    size_t free_bytes() const override { return size_t{1} << 40; }

    int fills = 0, copies = 0;

private:
    int64_t min_elements_;
    std::vector<std::pair<const uint8_t*, size_t>> blocks_;
};

// Below this the tiny presets' norms and conv taps stay on the host; above it most matrices and
// the embedding tables go to the storage.
constexpr int64_t kTinyMinElements = 1024;

// The generator as it was first written, to hold the values still.
uint16_t reference_uniform_bf16(uint64_t key, int64_t i, float lo, float hi) {
    uint64_t x = key + static_cast<uint64_t>(i) + 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    const float unit = static_cast<float>(x >> 40) * (1.0f / 16777216.0f);
    return f32_to_bf16(lo + (hi - lo) * unit);
}

TEST(RandomWeightsOnDevice, HostValuesAreTheCounterFormula) {
    TensorSet set;
    RandomTensorWriter g(set, 7, nullptr);
    g.uniform("a", {3, 333}, -0.25f, 0.75f);
    g.uniform("b", {12347}, -1.0f, 1.0f);
    // The first tensor draws from key mix(seed ^ mix(1)) with the low 40 bits cleared, the second from mix(2).
    const uint64_t seed = 7;
    for (const auto& [name, index, lo, hi] : {std::tuple{"a", 1, -0.25f, 0.75f}, std::tuple{"b", 2, -1.0f, 1.0f}}) {
        const uint64_t key =
            counter_random::mix(seed ^ counter_random::mix(static_cast<uint64_t>(index))) & ~0xFFFFFFFFFFull;
        const TensorEntry* t = set.find(name);
        const auto* values = reinterpret_cast<const uint16_t*>(t->data);
        for (int64_t i = 0; i < t->numel(); ++i) {
            ASSERT_EQ(values[i], reference_uniform_bf16(key, i, lo, hi)) << name << " element " << i;
        }
    }
}

TEST(RandomWeightsOnDevice, SameBytesWithTheLargeTensorsInTheStorage) {
    const nemotron_h::Config config = nemotron_h::preset_config("tiny");
    auto storage = std::make_shared<HostBackedStorage>(kTinyMinElements);
    const std::shared_ptr<TensorSet> host = nemotron_h::make_random_weights(config, 3, nullptr);
    const std::shared_ptr<TensorSet> device = nemotron_h::make_random_weights(config, 3, nullptr, true, storage);
    const std::vector<const TensorEntry*> a = host->all(), b = device->all();
    ASSERT_EQ(a.size(), b.size());
    int on_device = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        SCOPED_TRACE(a[i]->name);
        ASSERT_EQ(a[i]->name, b[i]->name);
        ASSERT_EQ(a[i]->shape, b[i]->shape);
        ASSERT_EQ(a[i]->nbytes, b[i]->nbytes);
        EXPECT_FALSE(a[i]->on_device);
        EXPECT_EQ(b[i]->on_device, b[i]->numel() >= kTinyMinElements);
        EXPECT_EQ(b[i]->on_device, storage->holds(b[i]->data));
        EXPECT_EQ(std::memcmp(a[i]->data, b[i]->data, a[i]->nbytes), 0);
        on_device += b[i]->on_device ? 1 : 0;
    }
    EXPECT_GT(on_device, 0);
    EXPECT_LT(on_device, static_cast<int>(b.size()));
    EXPECT_EQ(storage->fills, on_device);
    EXPECT_EQ(device->total_bytes(), host->total_bytes());
    EXPECT_GT(device->device_bytes(), 0u);
    EXPECT_EQ(host->device_bytes(), 0u);
}

TEST(RandomWeightsOnDevice, TheHostNeverReadsOrWritesDeviceTensors) {
    auto storage = std::make_shared<HostBackedStorage>(16);
    TensorSet set(storage);
    RandomTensorWriter g(set, 1, nullptr);
    g.uniform("small", {8}, 0.0f, 1.0f);
    g.matrix("large", {4, 8});
    ASSERT_FALSE(set.find("small")->on_device);
    ASSERT_TRUE(set.find("large")->on_device);
    EXPECT_EQ(read_f32(*set.find("small")).size(), 8u);
    EXPECT_NE(error_of([&] { read_f32(*set.find("large")); }).find("device memory"), std::string::npos);
    testing::TempDir dir("device-tensors");
    const std::string message = error_of([&] { set.write(dir.file("w.safetensors")); });
    EXPECT_NE(message.find("'large'"), std::string::npos) << message;
    EXPECT_NE(message.find("device memory"), std::string::npos) << message;
    EXPECT_FALSE(std::filesystem::exists(dir.file("w.safetensors")));
    // A set whose tensors all stayed on the host writes as always, storage or not.
    TensorSet host_only(storage);
    RandomTensorWriter(host_only, 1, nullptr).uniform("small", {8}, 0.0f, 1.0f);
    host_only.write(dir.file("h.safetensors"));
    EXPECT_EQ(read_f32(Checkpoint::open(dir.file("h.safetensors")).get("small")), read_f32(*set.find("small")));

    TensorSet plain;
    EXPECT_NE(error_of([&] { plain.add_on_device("x", DType::BF16, {4}); }).find("no device storage"),
              std::string::npos);
}

TEST(RandomWeightsOnDevice, CausalModelsGiveTheSameLogits) {
    ThreadPool pool(2);
    const std::unique_ptr<Backend> backend = make_cpu_backend(&pool);
    for (const char* arch : {"nemotron_h", "qwen35_moe"}) {
        SCOPED_TRACE(arch);
        auto storage = std::make_shared<HostBackedStorage>(kTinyMinElements);
        const std::unique_ptr<CausalLM> host = random_causal_lm(arch, "tiny", 5, &pool);
        const std::unique_ptr<CausalLM> device = random_causal_lm(arch, "tiny", 5, &pool, storage);
        EXPECT_GT(storage->fills, 0);
        EXPECT_EQ(device->tensor_bytes(), host->tensor_bytes());
        const std::vector<int32_t> prompt = {1, 7, 42, 3, 99, 11};
        auto run = [&](const CausalLM& model) {
            const std::unique_ptr<SequenceState> state = model.create_state(*backend, 16);
            return model.forward(*backend, *state, prompt, false);
        };
        EXPECT_EQ(run(*device), run(*host));
    }
}

TEST(RandomWeightsOnDevice, Drama3CopiesItsPiecesInTheStorage) {
    ThreadPool pool(2);
    const std::unique_ptr<Backend> backend = make_cpu_backend(&pool);
    const drama3::Config config = drama3::preset_config("tiny");
    auto storage = std::make_shared<HostBackedStorage>(kTinyMinElements);
    const drama3::Model host = drama3::Model::from_tensors(config, drama3::make_random_weights(config, 2, nullptr));
    const drama3::Model device =
        drama3::Model::from_tensors(config, drama3::make_random_weights(config, 2, nullptr, storage));
    // The tower's eh_proj halves and the candidate head are copied where their tensors are.
    EXPECT_GT(storage->copies, 0);
    EXPECT_TRUE(storage->holds(device.weights().candidate_head.data));
    EXPECT_TRUE(storage->holds(device.weights().tower[0].eh_hidden.data));
    EXPECT_FALSE(storage->holds(host.weights().candidate_head.data));

    auto run = [&](const drama3::Model& model) {
        text::FrameRows prompt(static_cast<int>(config.tower.num_codebooks));
        const std::vector<int32_t> text = {3, 5, 8, 13, 21, 34};
        prompt.push_text(text);
        drama3::Speaker speaker(model, *backend, 64);
        speaker.feed(prompt);
        drama3::FrameSampling greedy;
        greedy.params.temperature = 0.0f;
        return drama3::speak_frames(speaker, greedy, 6).frames.values();
    };
    EXPECT_EQ(run(device), run(host));
}

}  // namespace
}  // namespace duet
